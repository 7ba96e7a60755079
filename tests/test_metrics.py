"""Metrics are pure functions of spans, specified on hand-built timelines with known answers."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from record.metrics import (
    METRIC_KEYS,
    busy_fraction,
    compare_runs,
    compute_metrics,
    cpu_phase_times,
    idle_gaps,
    overlap_speedup,
    union_intervals,
)
from record.recorder import Span

GPU = ("scheduler_stream", "engine_stream")


def serial_timeline(steps: int = 3, period: float = 100.0, batch: int = 4) -> list[Span]:
    """A normal_loop-like timeline: every step the GPU waits for the CPU.

    Per step (offsets from ``step * period``): cpu schedule 0-10, launch 10-20, wait 20-80,
    process_last 80-100; scheduler_stream upload 15-20, copy 75-80; engine_stream
    decode 20-70, sample 70-75. GPU busy per step: 15-80 (65 µs); idle: 80-115 (35 µs).
    """
    spans = []
    for n in range(steps):
        t = n * period
        ids = list(range(batch))
        spans += [
            Span("cpu", "schedule", n, t + 0, t + 10, batch, batch, ids),
            Span("cpu", "launch", n, t + 10, t + 20, batch, batch, ids),
            Span("scheduler_stream", "upload", n, t + 15, t + 20, batch, batch, ids),
            Span("engine_stream", "decode", n, t + 20, t + 70, batch, batch, ids),
            Span("cpu", "wait", n, t + 20, t + 80, batch, batch, ids),
            Span("engine_stream", "sample", n, t + 70, t + 75, batch, batch, ids),
            Span("scheduler_stream", "copy", n, t + 75, t + 80, batch, batch, ids),
            Span("cpu", "process_last", n, t + 80, t + 100, batch, batch, ids),
        ]
    return spans


def outputs(n: int = 4, tokens: int = 3) -> list[dict]:
    return [{"token_ids": list(range(tokens)), "text": "", "finish_reason": "length",
             "arrival_us": 0.0, "first_token_us": 100.0, "finish_us": 300.0} for _ in range(n)]


# ---- intervals ------------------------------------------------------------------------------

def test_union_merges_overlapping_touching_and_nested_intervals():
    assert union_intervals([(5, 8), (0, 2), (1, 3), (3, 4), (6, 7)]) == [(0, 4), (5, 8)]


def test_union_drops_empty_and_reversed_intervals():
    assert union_intervals([]) == []
    assert union_intervals([(1, 1), (3, 2)]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), max_size=12))
def test_union_is_sorted_disjoint_and_covers_exactly_the_inputs(pairs):
    intervals = [(min(a, b), max(a, b)) for a, b in pairs]
    merged = union_intervals(intervals)
    assert all(s < e for s, e in merged)
    assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(merged))
    total = sum(e - s for s, e in merged)
    assert total <= sum(e - s for s, e in intervals)

    def covered(x, ivs):
        return any(s <= x < e for s, e in ivs)

    for x in [i + 0.5 for i in range(100)]:
        assert covered(x, merged) == covered(x, intervals)


def test_busy_is_a_union_not_a_sum():
    one = [Span("engine_stream", "decode", 0, 0, 100)]
    both = [*one, Span("scheduler_stream", "copy", 0, 0, 100)]
    assert busy_fraction(one, GPU) == busy_fraction(both, GPU) == 1.0
    # Half-overlapping lanes: busy 0-150 of window 0-200, never (100 + 100) / 200.
    partial = [Span("engine_stream", "decode", 0, 0, 100),
               Span("scheduler_stream", "copy", 0, 50, 150),
               Span("engine_stream", "decode", 1, 190, 200)]
    assert busy_fraction(partial, GPU) == pytest.approx(160 / 200)


def test_busy_ignores_other_lanes_and_clips_to_the_window():
    spans = [Span("cpu", "schedule", 0, 0, 1000), Span("engine_stream", "decode", 0, 100, 200)]
    assert busy_fraction(spans, GPU) == 1.0  # default window: the GPU lanes' own extent
    assert busy_fraction(spans, GPU, window=(0, 400)) == pytest.approx(0.25)
    assert busy_fraction(spans, GPU, window=(150, 250)) == pytest.approx(0.5)
    assert busy_fraction(spans, GPU, window=(5, 5)) == 0.0


def test_idle_gaps_between_and_at_window_edges():
    spans = [Span("engine_stream", "decode", 0, 10, 20),
             Span("scheduler_stream", "copy", 0, 15, 30),
             Span("engine_stream", "decode", 1, 50, 60)]
    assert idle_gaps(spans, GPU) == [(30, 50)]
    assert idle_gaps(spans, GPU, window=(0, 100)) == [(0, 10), (30, 50), (60, 100)]
    assert idle_gaps([], GPU) == []
    assert busy_fraction([], GPU) == 0.0


def test_dict_spans_work_like_span_objects():
    spans = serial_timeline()
    as_dicts = [s.to_dict() for s in spans]
    assert compute_metrics(as_dicts, outputs()) == compute_metrics(spans, outputs())
    assert idle_gaps(as_dicts, GPU) == idle_gaps(spans, GPU)


# ---- compute_metrics ------------------------------------------------------------------------

# What a run without outputs, forwards or an engine stream cannot tell: "not in this trace".
# Without our decode phases it measured no CPU work either: the rest of its steps is the GPU's
# wait (``gpu_wait_us``), and no speedup is predicted from it.
NOT_IN_A_TRACE = {"tokens_per_s", "decode_tokens_per_s", "output_tokens", "ttft_ms_mean",
                  "ttft_ms_p50", "tpot_ms_mean", "engine_busy_frac", "steady_engine_busy_frac",
                  "decode_gap_us_p50", "active_busy_frac", "t_cpu_us",
                  "predicted_overlap_speedup"}


def test_empty_run_gives_zeros_where_it_can_tell_and_none_where_it_cannot():
    metrics = compute_metrics([], [])
    assert set(metrics) == set(METRIC_KEYS) | {"gpu_wait_us"}
    assert {key for key, value in metrics.items() if value is None} == NOT_IN_A_TRACE
    assert all(value == 0 for key, value in metrics.items() if key not in NOT_IN_A_TRACE)
    json.dumps(metrics, allow_nan=False)


def test_a_run_with_outputs_and_an_engine_stream_tells_every_metric():
    m = compute_metrics(serial_timeline(), outputs())
    told = {"tokens_per_s", "decode_tokens_per_s", "output_tokens", "engine_busy_frac",
            "steady_engine_busy_frac"}
    assert all(m[key] is not None for key in told), m
    assert m["output_tokens"] > 0 and m["tokens_per_s"] > 0


def test_whole_run_speedup_is_none_when_a_run_has_no_outputs():
    with_outputs = compute_metrics(serial_timeline(), outputs())
    trace = compute_metrics(serial_timeline(), [])
    assert compare_runs(trace, with_outputs)["whole_run_speedup"] is None
    assert compare_runs(with_outputs, with_outputs)["whole_run_speedup"] == pytest.approx(1.0)


def test_engine_stream_busy_leaves_uploads_and_copies_out():
    # serial_timeline: both lanes busy 15-80 of each 100 µs step; the engine stream 20-75.
    m = compute_metrics(serial_timeline(), outputs())
    gpu_window = 280 - 15                                    # first upload to the last copy
    assert m["gpu_busy_frac"] == pytest.approx(3 * 65 / gpu_window)
    assert m["engine_busy_frac"] == pytest.approx(3 * 55 / gpu_window)


def test_decode_gaps_are_end_to_start_between_consecutive_forwards():
    # Decode forwards 20-70, 120-170, 220-270: 50 µs between each pair (sampling is not one).
    m = compute_metrics(serial_timeline(), outputs())
    assert m["decode_gap_us_p50"] == pytest.approx(50.0)
    touching = [Span("engine_stream", "decode", n, 10 * n, 10 * n + 10) for n in range(6)]
    assert compute_metrics(touching, [])["decode_gap_us_p50"] == 0.0


def test_busy_while_active_leaves_out_the_time_without_requests():
    # Two requests, 0-100 and 900-1000 µs; the GPU works 0-50 and 900-950, idles 100-900.
    spans = [Span("engine_stream", "decode", 0, 0, 50), Span("engine_stream", "decode", 1, 900, 950)]
    outs = [{"token_ids": [1], "arrival_us": 0.0, "finish_us": 100.0},
            {"token_ids": [1], "arrival_us": 900.0, "finish_us": 1000.0}]
    m = compute_metrics(spans, outs)
    assert m["gpu_busy_frac"] == pytest.approx(100 / 950)  # the whole extent, idle time included
    assert m["active_busy_frac"] == pytest.approx(100 / 200)


def test_busy_while_active_counts_a_forward_still_running_after_the_last_request_finished():
    """Work in flight is work: a lag forward after the finish is busy time, not 'no request'."""
    spans = [Span("engine_stream", "decode", 0, 0, 50), Span("engine_stream", "decode", 1, 120, 150)]
    outs = [{"token_ids": [1], "arrival_us": 0.0, "finish_us": 100.0}]
    m = compute_metrics(spans, outs)
    assert m["active_busy_frac"] == pytest.approx((50 + 30) / (100 + 30))


def test_known_answer_serial_timeline():
    m = compute_metrics(serial_timeline(), outputs())
    assert m["output_tokens"] == 12
    assert m["wall_s"] == pytest.approx(300e-6)             # span extent 0..300 µs
    assert m["tokens_per_s"] == pytest.approx(12 / 300e-6)
    assert m["steps"] == 3
    # GPU window 15..280; busy 3 x 65 µs; idle gaps 80-115 and 180-215.
    assert m["gpu_busy_frac"] == pytest.approx(195 / 265)
    assert m["idle_us_total"] == pytest.approx(70)
    assert m["idle_gap_count"] == 2
    assert m["mean_idle_per_step_us"] == pytest.approx(70 / 3)
    # Steps start at the forward (20, 120, 220); the last ends with its engine work (275).
    assert m["mean_step_us"] == pytest.approx((100 + 100 + 55) / 3)
    assert m["decode_tokens_per_s"] == pytest.approx(12 / 255e-6)
    assert m["t_fwd_us"] == pytest.approx(55)                # decode + sample
    assert m["t_cpu_us"] == pytest.approx(40)                # schedule + launch + process_last
    assert m["predicted_overlap_speedup"] == pytest.approx(95 / 55)
    assert m["ttft_ms_mean"] == m["ttft_ms_p50"] == pytest.approx(0.1)
    assert m["tpot_ms_mean"] == pytest.approx(0.1)          # (300 - 100) / (3 - 1) µs
    json.dumps(m, allow_nan=False)


def test_cpu_phase_times_add_up_to_t_cpu_over_the_same_steps():
    spans = serial_timeline(steps=10)
    phases = cpu_phase_times(spans)
    # Steady decode steps 1..8 (the 10%-90% window), each: schedule 10, launch 10, wait 60,
    # process_last 20 µs; T_cpu is all but the wait.
    assert phases == pytest.approx({"schedule": 10, "launch": 10, "wait": 60,
                                    "process_last": 20})
    m = compute_metrics(spans, outputs())
    assert sum(us for p, us in phases.items() if p != "wait") == pytest.approx(m["t_cpu_us"])
    assert cpu_phase_times([]) == {}


def test_an_upload_on_the_engine_stream_is_not_forward_time():
    """An engine that runs its batch metadata on its engine stream (Mini-SGLang's serial loop):
    T_fwd is still the forward's work."""
    spans = [s for s in serial_timeline() if s.lane != "scheduler_stream"]
    spans += [Span("engine_stream", "upload", n, n * 100 + 12, n * 100 + 20) for n in range(3)]
    assert compute_metrics(spans, outputs())["t_fwd_us"] == pytest.approx(55)


def test_wall_time_can_be_given():
    m = compute_metrics(serial_timeline(), outputs(), wall_us=600.0)
    assert m["wall_s"] == pytest.approx(600e-6)
    assert m["tokens_per_s"] == pytest.approx(12 / 600e-6)


def test_prefill_steps_count_as_steps_but_not_decode_tokens():
    spans = [Span("engine_stream", "prefill", 0, 0, 100, 2, 64),
             Span("engine_stream", "decode", 1, 100, 120, 2, 2),
             Span("engine_stream", "decode", 2, 130, 150, 2, 2)]
    m = compute_metrics(spans, [])
    assert m["steps"] == 3
    assert m["decode_tokens_per_s"] == pytest.approx(4 / 50e-6)   # steps 1 (30 µs) and 2 (20 µs)
    assert m["t_fwd_us"] == pytest.approx(20)
    assert m["t_cpu_us"] == 0.0
    assert m["predicted_overlap_speedup"] == pytest.approx(1.0)


def test_latency_skips_outputs_without_timestamps_and_single_tokens():
    outs = [{"token_ids": [1], "arrival_us": 0.0, "first_token_us": 2000.0, "finish_us": 2000.0},
            {"token_ids": [1, 2, 3], "arrival_us": 0.0, "first_token_us": 4000.0,
             "finish_us": 8000.0},
            {"token_ids": [1, 2]}]
    m = compute_metrics([], outs)
    assert m["output_tokens"] == 6
    assert m["ttft_ms_mean"] == pytest.approx(3.0)
    assert m["ttft_ms_p50"] == pytest.approx(3.0)
    assert m["tpot_ms_mean"] == pytest.approx(2.0)


def test_steps_fall_back_to_gpu_lanes_without_an_engine_stream():
    # An imported trace: kernels on CUDA-stream lanes, steps from ProfilerStep annotations.
    lanes = ["GPU 0 stream 7", "GPU 0 stream 20"]
    spans = [Span(lanes[0], "gemm", 5, 0, 40), Span(lanes[1], "memcpy", 5, 30, 50),
             Span(lanes[0], "gemm", 6, 100, 140), Span(lanes[0], "orphan", -1, 150, 160)]
    m = compute_metrics(spans, [], gpu_lanes=lanes)
    assert m["steps"] == 2
    assert m["mean_step_us"] == pytest.approx((100 + 40) / 2)
    assert m["gpu_busy_frac"] == pytest.approx(100 / 160)
    assert m["idle_gap_count"] == 2
    assert m["tokens_per_s"] is None and m["engine_busy_frac"] is None   # not in this trace
    # No scheduler phases: T_fwd is the GPU's busy time per step (50 and 40 µs); the rest of
    # each step is the GPU waiting for the host (50 and 0 µs), not measured CPU work.
    assert m["t_fwd_us"] == pytest.approx(45) and m["gpu_wait_us"] == pytest.approx(25)
    assert m["t_cpu_us"] is None and m["predicted_overlap_speedup"] is None


def test_gaps_shorter_than_join_us_count_as_busy():
    """An imported kernel-level trace: gaps between kernels shorter than a launch are no
    idleness (``join_us``); longer ones, and the view's edges, stay."""
    lanes = ["GPU 0 stream 7"]
    spans = [Span(lanes[0], "k", 1, 0, 10), Span(lanes[0], "k", 1, 12, 20),
             Span(lanes[0], "k", 2, 50, 60), Span(lanes[0], "k", 2, 63, 70)]
    assert idle_gaps(spans, lanes) == [(10, 12), (20, 50), (60, 63)]
    assert idle_gaps(spans, lanes, join_us=3) == [(20, 50)]
    assert busy_fraction(spans, lanes, join_us=3) == pytest.approx(40 / 70)
    m = compute_metrics(spans, [], gpu_lanes=lanes, join_us=3)
    assert m["idle_gap_count"] == 1 and m["t_fwd_us"] == pytest.approx(20)


# ---- comparing runs and zooming -------------------------------------------------------------

def test_overlap_model():
    assert overlap_speedup(100, 100) == 2.0
    assert overlap_speedup(100, 0) == 1.0
    assert overlap_speedup(0, 0) == 0.0
    assert overlap_speedup(100, 300, k=3) == 4.0    # multi-step: max(T_fwd, T_cpu / k)
    assert overlap_speedup(100, 300, k=1) == overlap_speedup(100, 300) == 4 / 3


def test_compare_runs_known_answer():
    """Measured and predicted compare like with like (per decode step, steady window); the
    whole run's tokens/s ratio is reported beside them, named as such."""
    normal = {"tokens_per_s": 100.0, "t_fwd_us": 300.0, "t_cpu_us": 100.0,
              "gpu_busy_frac": 0.75, "idle_us_total": 5000.0, "steady_step_us": 400.0}
    overlap = {"tokens_per_s": 125.0, "t_fwd_us": 300.0, "t_cpu_us": 100.0,
               "gpu_busy_frac": 0.98, "idle_us_total": 400.0, "steady_step_us": 310.0}
    result = compare_runs(normal, overlap)
    assert result["measured_speedup"] == pytest.approx(400 / 310)
    assert result["whole_run_speedup"] == pytest.approx(1.25)
    assert result["predicted_speedup"] == pytest.approx(400 / 300)
    assert result["busy_gain"] == pytest.approx(0.23)
    assert result["idle_saved_us"] == pytest.approx(4600.0)
    # Runs holding their metrics work too, and a zero baseline gives 0.0, not an error.
    assert compare_runs({"metrics": normal}, {"metrics": overlap}) == result
    assert compare_runs({**normal, "tokens_per_s": 0.0}, overlap)["whole_run_speedup"] == 0.0
    assert compare_runs(normal, {**overlap, "steady_step_us": 0.0})["measured_speedup"] == 0.0


def test_compare_runs_on_timelines():
    serial = compute_metrics(serial_timeline(), outputs())
    # The same work overlapped: the CPU's 40 µs hides behind the 55 µs forward, no GPU gaps.
    hidden = [Span("engine_stream", "decode", n, 20 + 60 * n, 80 + 60 * n, 4, 4) for n in range(3)]
    overlapped = compute_metrics(hidden, outputs(), wall_us=200.0)
    result = compare_runs(serial, overlapped)
    assert result["whole_run_speedup"] == pytest.approx(300 / 200)
    assert result["idle_saved_us"] == pytest.approx(70)
    assert result["busy_gain"] == pytest.approx(1 - 195 / 265)

