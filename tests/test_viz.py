"""viz as a specification: lane order, idle gaps on the union of GPU lanes, the traces drawn for a
known timeline, the step window, the panels, both languages, and no torch anywhere in viz."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="viz needs plotly")

import viz  # noqa: E402
from record.lag import lag_marks
from record.metrics import idle_gaps, union_intervals
from record.steps import copy_placement, step_parts  # noqa: E402
from record.window import local_stats, window_run
from texts import STRINGS, t
from viz.labels import ordered_lanes
from viz.style import NEUTRAL_COLOR, PHASE_COLORS

ROOT = Path(__file__).resolve().parent.parent
GPU = ["scheduler_stream", "engine_stream"]


def span(lane, phase, step, start, end, batch_size=4, num_tokens=4):
    return {"lane": lane, "phase": phase, "step": step, "start_us": float(start),
            "end_us": float(end), "batch_size": batch_size, "num_tokens": num_tokens,
            "req_ids": list(range(batch_size))}


def make_run(loop="normal", spans=None, metrics=None, outputs=None, lanes=None, k=1, extra=0):
    return {"loop": loop, "decode_steps": k, "extra_cpu_us": extra, "label": loop,
            "lanes": lanes or ["cpu", *GPU], "gpu_lanes": list(GPU), "metrics": metrics or {},
            "spans": spans or [], "outputs": outputs or []}


@pytest.fixture
def known_run():
    """Two steps. GPU union: [0,12], [15,20], [25,26] µs -> idle gaps (12,15) and (20,25)."""
    spans = [
        span("cpu", "schedule", 0, 0, 2),
        span("scheduler_stream", "upload", 0, 1, 3),
        span("engine_stream", "decode", 0, 2, 10),
        span("scheduler_stream", "copy", 0, 8, 12),       # overlaps the forward: counted once
        span("cpu", "process_last", 0, 12, 16),            # CPU work is not GPU work
        span("engine_stream", "decode", 1, 15, 20),
        span("engine_stream", "mystery", 1, 25, 26),       # unknown phase: neutral colour
        span("cpu", "wait", 1, 16, 30),
    ]
    spans[1]["start_us"] = 0.0
    return make_run(spans=spans)


def _as_plotly(draw):
    """viz draws plain dicts for plotly.js; the checks read them as plotly figures (validated)."""
    return lambda *args, **kwargs: draw(*args, **kwargs).to_plotly()


side_by_side_figure = _as_plotly(viz.side_by_side_figure)
step_figure = _as_plotly(viz.step_figure)
unrolled_figure = _as_plotly(viz.unrolled_figure)
message_figure = _as_plotly(viz.message_figure)


def traces_by_name(fig):
    return {trace.name: trace for trace in fig.data}


# ---- lanes --------------------------------------------------------------------------------------

def test_standard_lanes_come_first_then_extra_lanes_in_listed_order():
    run = make_run(lanes=["engine_stream", "GPU 0 stream 7", "cpu", "scheduler_stream"],
                   spans=[span("kernels: stream 7", "kernel", 0, 0, 1)])
    assert ordered_lanes(run) == ["cpu", "scheduler_stream", "engine_stream", "GPU 0 stream 7",
                                  "kernels: stream 7"]


def test_figure_draws_cpu_on_top_and_engine_stream_at_the_bottom(known_run):
    fig = side_by_side_figure([known_run])
    axis = fig.layout.yaxis
    assert list(axis.tickvals) == [0, 1, 2]
    assert [text.split()[0] for text in axis.ticktext] == ["CPU", "scheduler", "engine"]
    assert axis.range[0] > axis.range[1]  # reversed: lane 0 (cpu) at the top


# ---- gaps ---------------------------------------------------------------------------------------

def test_union_merges_overlapping_and_touching_intervals():
    assert union_intervals([(5, 7), (0, 2), (1, 3), (3, 4), (6, 9)]) == [(0, 4), (5, 9)]


def test_idle_gaps_are_the_holes_in_the_union_of_gpu_lanes(known_run):
    assert idle_gaps(known_run["spans"], GPU) == [(12.0, 15.0), (20.0, 25.0)]
    assert idle_gaps(known_run["spans"], GPU, (0, 30)) == [(12.0, 15.0), (20.0, 25.0),
                                                           (26.0, 30.0)]
    assert idle_gaps([], GPU, (0, 5)) == [(0, 5)]


def test_gap_shading_equals_the_union_gaps(known_run):
    fig = side_by_side_figure([known_run])
    gaps = traces_by_name(fig)[t("en", "gpu_idle")]
    assert list(gaps.base) == pytest.approx([0.012, 0.020])  # ms
    assert list(gaps.x) == pytest.approx([0.003, 0.005])
    # one band over both GPU lanes (rows 1 and 2), not over the CPU lane (row 0)
    assert list(gaps.y) == [1.5, 1.5]
    assert min(gaps.width) > 1.5
    assert fig.data[0] is gaps  # drawn first, so it sits behind the work


def test_title_reports_the_engine_idle_total_when_the_record_has_one(known_run):
    known_run["metrics"] = {"idle_us_total": 8000.0, "idle_gap_count": 2, "gpu_busy_frac": 0.5}
    title = side_by_side_figure([known_run]).layout.annotations[0].text
    assert "8.0 ms" in title and "2 gaps" in title and "50.0%" in title


# ---- traces -------------------------------------------------------------------------------------

def test_one_bar_trace_per_phase_with_start_and_duration_in_ms(known_run):
    traces = traces_by_name(side_by_side_figure([known_run]))
    assert set(traces) == {t("en", "gpu_idle"), "schedule", "upload", "decode", "copy",
                           "process_last", "wait", "other"}
    decode = traces["decode"]
    assert decode.orientation == "h"
    assert list(decode.base) == pytest.approx([0.002, 0.015])
    assert list(decode.x) == pytest.approx([0.008, 0.005])
    assert list(decode.y) == [2, 2]
    assert decode.marker.color == PHASE_COLORS["decode"]
    assert traces["other"].marker.color == NEUTRAL_COLOR
    assert list(traces["other"].customdata[0][:2]) == ["mystery", 1]


def test_hover_shows_phase_step_duration_batch_and_tokens(known_run):
    decode = traces_by_name(side_by_side_figure([known_run]))["decode"]
    phase, step, duration, batch, tokens, lane, *_ = decode.customdata[0]
    assert (phase, step, batch, tokens, lane) == ("decode", 0, 4, 4, "engine_stream")
    assert duration == pytest.approx(0.008)
    for field in ("customdata[0]", "customdata[1]", "customdata[2]", "customdata[3]",
                  "customdata[4]"):
        assert field in decode.hovertemplate


def test_many_spans_are_few_traces():
    spans = []
    for step in range(2000):
        t0 = step * 100.0
        spans += [span("cpu", "schedule", step, t0, t0 + 20),
                  span("cpu", "launch", step, t0 + 20, t0 + 25),
                  span("scheduler_stream", "upload", step, t0 + 21, t0 + 24),
                  span("engine_stream", "decode", step, t0 + 25, t0 + 80),
                  span("engine_stream", "sample", step, t0 + 80, t0 + 85)]
    fig = side_by_side_figure([make_run(spans=spans)])
    assert len(fig.data) <= 12         # a trace per phase, not a shape per span


def test_imported_lanes_get_kernel_colours_and_their_own_rows():
    lanes = ["cpu", "GPU 0 stream 7", "GPU 0 stream 9"]
    run = {"loop": "imported", "decode_steps": 1, "extra_cpu_us": 0, "label": "imported",
           "lanes": lanes, "gpu_lanes": lanes[1:],
           "metrics": {}, "outputs": [],
           "spans": [span("cpu", "ProfilerStep#3", 3, 0, 40),
                     span("GPU 0 stream 7", "void gemm_kernel<float>", 3, 5, 20),
                     span("GPU 0 stream 9", "Memcpy DtoH (Device -> Pinned)", 3, 22, 24)]}
    fig = side_by_side_figure([run])
    traces = traces_by_name(fig)
    assert {"kernel", "memcpy", "other"} <= set(traces)
    assert list(fig.layout.yaxis.ticktext) == ["CPU (scheduler thread)", *lanes[1:]]
    assert list(traces[t("en", "gpu_idle")].base) == pytest.approx([0.020])


# ---- side by side and window --------------------------------------------------------------------

def test_side_by_side_shares_one_time_axis_normal_above_overlap(known_run):
    overlap = make_run("overlap", spans=[dict(s, end_us=s["end_us"] / 2,
                                              start_us=s["start_us"] / 2)
                                         for s in known_run["spans"]])
    fig = side_by_side_figure([known_run, overlap])
    titles = [a.text for a in fig.layout.annotations]
    assert titles[0].startswith("<b>normal") and titles[1].startswith("<b>overlap")
    assert fig.layout.xaxis2.matches == "x" or fig.layout.xaxis.matches == "x2"
    assert tuple(fig.layout.xaxis.range) == tuple(fig.layout.xaxis2.range)
    assert fig.layout.xaxis.range[1] >= 0.030  # the longer run fits


def test_window_keeps_the_steps_and_the_gaps_inside_them():
    """A step runs from its forward's start to the next forward's start (the measured step
    time): steps 2-3 of a serial loop are its forwards 2 and 3 and the CPU work after each."""
    spans = []
    for step in range(6):
        t0 = step * 100.0
        spans += [span("cpu", "schedule", step, t0, t0 + 10),
                  span("engine_stream", "decode", step, t0 + 10, t0 + 70),
                  span("cpu", "process_last", step, t0 + 70, t0 + 100)]
    windowed = window_run(make_run(spans=spans), 2, 3)
    assert windowed["window"] == {"first_step": 2, "last_step": 3, "forwards": 2,
                                  "t_start_us": 210.0, "t_end_us": 410.0, "active": []}
    assert {s["step"] for s in windowed["spans"]} == {2, 3, 4}      # schedule(4) ends step 3
    assert local_stats(windowed)["idle_us_total"] == pytest.approx(40 + 40)
    assert windowed["metrics"]["idle_gap_count"] == 2
    fig = side_by_side_figure([make_run(spans=spans)], window=(2, 3))
    gaps = traces_by_name(fig)[t("en", "gpu_idle")]
    assert list(gaps.base) == pytest.approx([0.060, 0.160])  # ms since the window start
    assert "steps 2–3: 2 forwards in 0.200 ms" in fig.layout.annotations[0].text


def _serial_and_overlapped(steps: int = 8) -> tuple[dict, dict]:
    """A serial loop (60 µs forward + 40 µs CPU per step) and an overlapped one (the CPU's work
    for step n-1 and the schedule of n+1 under forward(n): 60 µs a step), prefill at step 1."""
    normal, overlap = [], []
    for step in range(1, steps + 1):
        phase = "prefill" if step == 1 else "decode"
        t0 = step * 100.0
        normal += [span("cpu", "schedule", step, t0, t0 + 10),
                   span("engine_stream", phase, step, t0 + 10, t0 + 70),
                   span("cpu", "process_last", step, t0 + 70, t0 + 100)]
        t1 = 100.0 + step * 60
        overlap += [span("cpu", "schedule", step, t1 - 60, t1 - 50),
                    span("engine_stream", phase, step, t1, t1 + 60),
                    span("cpu", "process_last", step, t1 + 60, t1 + 90)]
    return make_run("normal", spans=normal), make_run("overlap", spans=overlap)


def test_a_step_window_holds_the_same_forwards_in_every_loop_and_overlap_is_shorter():
    """What the caption says: both runs cut to the same steps; each overlap step is shorter.
    Neither the forward before the window nor the one after it is drawn (they were: the
    overlap panel then showed two forwards more, and a prefill the normal one did not)."""
    normal, overlap = _serial_and_overlapped()
    windows = [window_run(run, 2, 4)["window"] for run in (normal, overlap)]
    assert [w["forwards"] for w in windows] == [3, 3]
    lengths = [w["t_end_us"] - w["t_start_us"] for w in windows]
    assert lengths == [300.0, 180.0]                      # 3 x 100 µs against 3 x 60 µs
    for run in (normal, overlap):
        drawn = window_run(run, 2, 4)["spans"]
        forwards = [s["step"] for s in drawn if s["lane"] == "engine_stream"]
        assert forwards == [2, 3, 4], forwards
        assert all(s["phase"] != "prefill" for s in drawn)
    fig = side_by_side_figure([normal, overlap], window=(2, 4))
    titles = [a.text for a in fig.layout.annotations]
    assert "3 forwards in 0.300 ms" in titles[0] and "3 forwards in 0.180 ms" in titles[1]


def test_a_window_outside_the_run_is_clamped_and_titled_with_the_steps_drawn():
    normal, _ = _serial_and_overlapped()
    windowed = window_run(normal, -5, 99999)
    assert (windowed["window"]["first_step"], windowed["window"]["last_step"]) == (1, 8)
    assert windowed["window"]["forwards"] == 8
    title = side_by_side_figure([normal], window=(-5, 99999)).layout.annotations[0].text
    assert "steps 1–8" in title and "99999" not in title and "-5" not in title
    assert window_run(normal, 5, 3)["window"]["first_step"] == 3        # given backwards


def test_the_first_and_last_windows_keep_the_cpu_work_before_and_after_every_forward():
    normal, _ = _serial_and_overlapped()
    first = window_run(normal, 1, 1)
    assert first["window"]["t_start_us"] == 100.0        # the schedule of step 1, not its forward
    last = window_run(normal, 8, 8)
    assert last["window"]["t_end_us"] == 900.0           # the last process_last ends the run


def test_a_window_starts_at_its_first_forward_and_paints_no_busy_gpu_as_idle():
    spans = [span("engine_stream", "decode", 4, 0, 100), span("cpu", "schedule", 5, 50, 60),
             span("engine_stream", "decode", 5, 100, 200), span("cpu", "schedule", 6, 150, 160),
             span("engine_stream", "decode", 6, 200, 300)]
    windowed = window_run(make_run("overlap", spans=spans), 5, 5)
    assert windowed["metrics"]["idle_us_total"] == 0.0
    assert [(s["step"], s["start_us"], s["end_us"]) for s in windowed["spans"]] == \
        [(5, 100.0, 200.0), (6, 150.0, 160.0)]


# ---- panels -------------------------------------------------------------------------------------

METRICS = {"tokens_per_s": 100.0, "decode_tokens_per_s": 110.0, "output_tokens": 64,
           "wall_s": 0.64, "steps": 17, "gpu_busy_frac": 0.6, "idle_us_total": 250000.0,
           "idle_gap_count": 16, "mean_step_us": 37000.0, "mean_idle_per_step_us": 15000.0,
           "t_fwd_us": 13000.0, "t_cpu_us": 6000.0, "predicted_overlap_speedup": 19 / 13,
           "ttft_ms_mean": 40.0, "ttft_ms_p50": 40.0, "tpot_ms_mean": 37.0,
           "steady_step_us": 19000.0, "steady_busy_frac": 0.6, "steady_steps": 12,
           "steady_prefill_frac": 0.0}


def test_metrics_table_has_each_run_the_ratio_and_the_formula():
    fast = dict(METRICS, tokens_per_s=130.0, idle_us_total=20000.0, gpu_busy_frac=0.97,
                steady_step_us=19000.0 / 1.4)
    html = viz.metrics_html([make_run("normal", metrics=METRICS),
                             make_run("overlap", metrics=fast)])
    assert 'data-mode="normal" data-metric="idle_us_total" data-value="250000"' in html
    assert 'data-mode="overlap" data-metric="idle_us_total" data-value="20000"' in html
    assert "1.30×" in html                            # tokens/s ratio
    assert "13.00 + 6.00 = 19.00 ms" in html          # serial ≈ T_fwd + T_sched + T_post
    assert "max(13.00, 6.00) = 13.00 ms" in html      # overlap ≈ max(...)
    assert "1.46×" in html                            # predicted, from the record
    # like with like: measured per decode step over the steady window, the whole run beside it
    assert 'data-metric="measured_speedup" data-value="1.4"' in html
    assert 'data-metric="whole_run_speedup" data-value="1.3"' in html
    assert 'data-block="why"' not in html             # 1.40 is close to the predicted 1.46


def _why(html: str) -> str:
    import re

    found = re.findall(r'<span class="ov-why" data-block="why"[^>]*>(.*?)</span>', html)
    return found[0] if found else ""


def test_a_measurement_far_below_its_prediction_says_what_the_run_saw():
    # The prediction is 19 / 13 = 1.46x; the overlap step took 18 ms, not max(13, 6) = 13 ms.
    slow = dict(METRICS, tokens_per_s=105.0, steady_step_us=18000.0, steady_prefill_frac=0.1)
    overlap = make_run("overlap", metrics=slow)
    overlap["host"] = {"cpus": 2.0, "other_cpu_frac": 0.55, "device_cpu_frac": 0.6}
    html = viz.metrics_html([make_run("normal", metrics=METRICS), overlap])
    assert 'data-block="why" data-direction="below"' in html
    why = _why(html)
    assert "measured 1.06×, 28% less than the 1.46× the formula predicts" in why
    assert "18.00 ms, 5.00 ms more than the longer of its own forward and CPU work (13.00 ms)" in why
    assert "55% of this machine's 2 cores" in why and "60% of the time" in why
    assert "prefill forwards filled 10%" in why
    zh = _why(viz.metrics_html([make_run("normal", metrics=METRICS), overlap], "zh"))
    assert "其他程序" in zh and "低 28%" in zh


def test_a_first_click_like_gap_is_explained_by_its_largest_measured_term_first():
    """1.51x predicted against 1.31x measured (as a first click can give) gets a note too: a
    measurement 13% under its prediction is explained, not only one under 80% of it."""
    normal = dict(METRICS, t_fwd_us=8000.0, t_cpu_us=4100.0, steady_step_us=12100.0)
    overlap = dict(METRICS, t_fwd_us=8600.0, t_cpu_us=4000.0, steady_step_us=12100.0 / 1.31)
    why = _why(viz.metrics_html([make_run("normal", metrics=normal),
                                 make_run("overlap", metrics=overlap)]))
    assert "1.31×, 13% less than the 1.51×" in why
    # 9.24 ms a step against max(8.6, 4.0): 0.64 ms left between forwards, then the forward
    # itself 0.60 ms slower than in the normal run.
    assert why.index("0.64 ms more than the longer") < why.index("the forward took 8.60 ms")


def test_a_serial_step_longer_than_its_terms_explains_a_measurement_above_the_prediction():
    normal = dict(METRICS, steady_step_us=25000.0)          # 13 + 6 = 19 ms of work in 25 ms
    overlap = dict(METRICS, steady_step_us=13000.0)
    html = viz.metrics_html([make_run("normal", metrics=normal), make_run("overlap",
                                                                           metrics=overlap)])
    assert 'data-direction="above"' in html
    assert "step took 25.00 ms, 6.00 ms more than T_fwd + T_sched + T_post" in _why(html)
    assert "which overlap hides as well (this raises the measured speedup)" in _why(html)


def test_a_serial_loop_that_already_overlapped_its_launches_says_so():
    """Eager on a GPU: the CPU's launches run while the forward runs, so the serial step is
    shorter than T_fwd + T_cpu and the formula over-predicts."""
    normal = dict(METRICS, steady_step_us=14000.0)          # 19 ms of terms in 14 ms
    overlap = dict(METRICS, steady_step_us=13200.0)
    why = _why(viz.metrics_html([make_run("normal", metrics=normal),
                                 make_run("overlap", metrics=overlap)]))
    assert "5.00 ms of the CPU's work per step ran while its forward ran" in why
    assert "not T_fwd + T_sched + T_post = 19.00 ms" in why
    assert "(this lowers the measured speedup)" in why    # each term says which way it pushes
    assert "raises" not in why


def test_a_gap_that_no_measured_term_explains_says_so_rather_than_guess():
    # Each term under 5% of its step (19 ms of terms in 18.15 ms; a forward 0.64 ms slower; a
    # step 0.67 ms past its forward), together 13% below the prediction.
    normal = dict(METRICS, steady_step_us=18150.0)
    overlap = dict(METRICS, t_fwd_us=13637.0, steady_step_us=14305.0)
    overlap_run = make_run("overlap", metrics=overlap)
    overlap_run["host"] = {"cpus": 16.0, "other_cpu_frac": 0.0}   # measured, but nothing
    why = _why(viz.metrics_html([make_run("normal", metrics=normal), overlap_run]))
    assert "None of the terms this page measures explains the difference" in why
    assert "other programs" not in why                   # 0% of 16 cores explains nothing


def test_texts_panel_escapes_text_and_shows_finish_reasons():
    outputs = [{"token_ids": [1, 2], "text": "<b>hi</b>", "finish_reason": "stop",
                "prompt_tokens": 3}, {"token_ids": [5] * 20, "text": "", "finish_reason": "length"}]
    runs = [make_run("normal", outputs=outputs), make_run("overlap", outputs=outputs)]
    html = viz.texts_html(runs)
    assert "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>hi</b>" not in html
    assert "stop" in html and "length" in html and "token ids [5, 5" in html
    assert t("en", "texts_same") in html
    other = [{"token_ids": [9, 9], "text": "", "finish_reason": "length", "prompt_tokens": 3}] * 2
    theirs = [dict(make_run(loop, outputs=other), label=f"{loop} (Mini-SGLang 20fcd7f)")
              for loop in ("normal", "overlap")]
    beside = viz.texts_html(runs + theirs)         # engines side by side: each its own loops
    assert t("en", "texts_same_each") in beside and t("en", "texts_differ") not in beside
    theirs[1]["outputs"] = outputs
    assert t("en", "texts_differ_each") in viz.texts_html(runs + theirs)


def test_display_labels_drop_a_detail_all_runs_share():
    def runs(*labels):
        return [{"loop": label.partition(" ")[0], "decode_steps": 1, "label": label}
                for label in labels]

    same = runs("normal (CPU, device process)", "overlap (CPU, device process)")
    assert viz.display_labels(same) == ["normal", "overlap"]
    live = runs("normal (CPU, device process)", "overlap")
    assert viz.display_labels(live) == ["normal", "overlap"]
    differ = runs("overlap (H200, eager)", "overlap (H200, CUDA graphs)")
    assert viz.display_labels(differ) == ["overlap (eager)", "overlap (CUDA graphs)"]   # H200: all


def test_our_engine_beside_a_peer_is_named_in_the_readers_language():
    runs = [{"loop": "normal", "decode_steps": 1, "label": "normal (this project 7944d1e, H200)"},
            {"loop": "normal", "decode_steps": 1, "label": "normal (Mini-SGLang 20fcd7f, H200)"}]
    assert viz.display_labels(runs, "zh") == ["普通 (本项目 7944d1e)", "普通 (Mini-SGLang 20fcd7f)"]
    assert viz.display_labels(runs)[0] == "normal (this project 7944d1e)"
    setups = [{"loop": "overlap", "decode_steps": 1, "label": "overlap (this project 7944d1e, "
               "NVIDIA H200, CUDA graphs, triton attention, compiled)"},
              {"loop": "overlap", "decode_steps": 1, "label": "overlap (SGLang 0.5.17, "
               "NVIDIA H200, CUDA graphs, FlashInfer attention)"}]
    assert viz.display_labels(setups, "zh") == ["重叠 (本项目 7944d1e, Triton 注意力, 已编译)",
                                                "重叠 (SGLang 0.5.17, FlashInfer 注意力)"]


def test_record_label_names_hardware_and_date():
    record = {"env": {"device_name": "NVIDIA H200", "torch_version": "2.11.0",
                      "date": "2025-06-01"}}
    assert viz.record_label(record) == "NVIDIA H200 · torch 2.11.0 · 2025-06-01"


@pytest.mark.parametrize("env, en, zh", [
    ({"engine_commit": "7944d1e3c0ffee"}, "this project's engine · commit 7944d1e",
     "本项目的引擎 · 提交 7944d1e"),
    ({"engine_commit": "7944d1e+"}, "this project's engine · commit 7944d1e+",
     "本项目的引擎 · 提交 7944d1e+"),
    ({"engine": "sglang", "engine_commit": "0.5.17"},
     "SGLang (the system the article describes) · release 0.5.17", "SGLang（文章所讲的系统） · 版本 0.5.17"),
    ({"engine": "ours", "engine_commit": "unknown"}, "this project's engine", "本项目的引擎"),
])
def test_record_label_names_the_engine_and_the_code_that_made_it(env, en, zh):
    record = {"env": {**env, "device_name": "NVIDIA H200"}}
    assert viz.record_label(record) == f"{en} · NVIDIA H200"
    assert viz.record_label(record, "zh") == f"{zh} · NVIDIA H200"


# ---- languages and imports ----------------------------------------------------------------------

def test_explanations_exist_in_english_and_chinese_in_the_articles_terms():
    assert set(STRINGS["zh"]) == set(STRINGS["en"]) - {"ratio"}
    en, zh = t("en", "timeline_help"), t("zh", "timeline_help")
    for term in ("token pool", "wait_stream", "Lag one", "scheduler stream", "engine stream"):
        assert term in en
    for term in ("token_pool", "wait_stream", "滞后一轮", "空闲"):
        assert term in zh
    assert t("zh", "ratio") == t("en", "ratio")  # falls back to English
    run = make_run(spans=[span("engine_stream", "decode", 0, 0, 1)])
    assert "GPU 空闲" in side_by_side_figure([run], lang="zh").layout.annotations[0].text


def test_viz_imports_neither_torch_nor_the_engine():
    code = ("import sys, viz, viz.gantt, viz.panels, viz.labels, texts, viz.style, "
            "viz.replay, viz.stepview, texts.teach; "
            "bad = [m for m in sys.modules if m == 'torch' or m.split('.')[0] == 'engine']; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# ---- the teaching views: multi-step panels, lag marks, step-through, unrolled rounds -------------

def overlap_steps(loop="overlap", steps=4, stop_at=2, k=1):
    """An overlap run: forward(Bn) over process_last(Bn-1), 100 µs a step. Request 0 of 2 emits
    its stop token in B{stop_at}; the CPU reads it in process_last(B{stop_at}), under
    forward(B{stop_at + 1}), which still carries request 0 (lag one)."""
    spans = []
    for n in range(1, steps + 1):
        t0 = n * 100.0
        rids = [0, 1] if n <= stop_at + 1 else [1]
        spans += [span("cpu", "schedule", n, t0 - 20, t0 - 10, 2), span("cpu", "launch", n, t0 - 10,
                                                                           t0 - 5, 2),
                  span("scheduler_stream", "upload", n, t0 - 8, t0 - 2, 2),
                  span("engine_stream", "decode", n, t0, t0 + 90, 2),
                  span("scheduler_stream", "copy", n, t0 + 90, t0 + 94, 2),
                  span("cpu", "wait", n, t0 + 96, t0 + 98, 2),
                  span("cpu", "process_last", n, t0 + 100, t0 + 160, 2)]
        for s in spans[-7:]:
            if s["lane"] == "cpu":
                s["req_ids"] = list(rids)
            else:
                s["req_ids"] = []
    outputs = [{"token_ids": [5, 6], "text": "", "finish_reason": "stop", "wasted_steps": 1,
                "finish_us": stop_at * 100.0 + 130},
               {"token_ids": [5, 6, 7, 8], "text": "", "finish_reason": "length",
                "wasted_steps": 0, "finish_us": steps * 100.0 + 130}]
    return make_run(loop, spans=spans, outputs=outputs, k=k)


def test_lag_marks_find_the_forward_that_still_carried_a_stopped_request():
    marks = lag_marks(overlap_steps())
    assert marks == [{"request": 0, "stop_step": 2, "stop_us": 330.0, "extra_steps": [3],
                      "wasted_steps": 1}]
    fig = side_by_side_figure([overlap_steps()])
    stars = traces_by_name(fig)[t("en", "lag_legend")]
    assert list(stars.x) == pytest.approx([(300 + 390) / 2 / 1000])   # forward(B3)'s middle
    assert "request 0 stopped at step 2" in stars.hovertext[0]
    assert "lag-one extra step" in stars.hovertext[0]
    stop = traces_by_name(fig)[t("en", "stop_legend")]
    assert list(stop.x) == pytest.approx([0.330]) and "process_last(B2)" in stop.hovertext[0]


def test_no_lag_marks_without_wasted_steps_or_for_length_stops():
    run = overlap_steps()
    run["outputs"][0]["wasted_steps"] = 0
    assert lag_marks(run) == []
    assert t("en", "lag_legend") not in traces_by_name(side_by_side_figure([run]))


def test_step_parts_link_forward_upload_copy_wait_and_the_hidden_process():
    parts = step_parts(overlap_steps(), 3)
    assert parts["forward"]["start_us"] == 300.0 and parts["upload"]["end_us"] == 298.0
    assert parts["copy"]["start_us"] == 390.0 and parts["wait"]["start_us"] == 396.0
    assert [s["step"] for s in parts["hidden"]] == [2]      # process_last(B2) under forward(B3)
    from viz.replay import links
    said = links(parts, 3, "overlap", "en")
    assert any("metadata upload(B3)" in line and "wait_stream" in line for line in said["forward"])
    assert any("process_last(B2)" in line for line in said["forward"])
    assert any("forward(B3)" in line for line in said["upload"])
    assert any("forward(B3)" in line for line in said["hidden0"])
    assert any("copy_done of result copy(B3)" in line for line in said["wait"])


def test_step_figure_outlines_the_linked_spans_and_draws_the_links():
    fig = step_figure(overlap_steps(), 3)
    outlined = {trace.meta: trace for trace in fig.data if trace.meta}
    # process_last(B2) and B4's building (schedule, 380-390 µs) ran under forward(B3); B4's
    # launch starts as forward(B3) ends, so it is not outlined.
    assert set(outlined) == {"forward", "upload", "copy", "wait", "hidden0", "then0"}
    assert outlined["forward"].marker.line.width > 2
    assert "process_last(B2)" in outlined["forward"].hovertext[0]
    assert "schedule(B4)" in outlined["forward"].hovertext[0]
    assert "forward(B3)" in outlined["hidden0"].hovertext[0]
    assert outlined["then0"].name == "schedule(B4)" and "forward(B3)" in outlined["then0"].hovertext[0]
    dimmed = [trace for trace in fig.data if trace.meta is None and trace.type == "bar"
              and trace.legendgroup != "gpu_idle"]
    assert dimmed and all(trace.opacity < 1 for trace in dimmed)
    arrows = {a.name for a in fig.layout.annotations if a.showarrow}
    assert arrows == {"arrow_wait_stream", "arrow_tokens", "arrow_copy_done"}
    assert [shape.name for shape in fig.layout.shapes] == ["hidden", "hidden"]
    labels = [a for a in fig.layout.annotations if a.text and "hidden under forward(B3)" in a.text]
    assert len(labels) == 1                                  # one label, over the longest band
    # Over the forward: from the band's left edge (its middle lies left of the forward's).
    assert labels[0].x == pytest.approx(300 / 1000 - fig_offset_ms(overlap_steps(), 3))
    assert labels[0].xanchor == "left"


def fig_offset_ms(run, step):
    from record.window import step_range, window_run
    first, last = step_range(run)
    return window_run(run, max(first, step - 1), min(last, step + 1))["window"]["t_start_us"] / 1000


def test_the_caption_counts_the_hidden_work_the_figure_outlines():
    """The caption's "ms hidden" is the overlap with forward(Bn) of exactly the outlined spans."""
    run = overlap_steps()
    parts = step_parts(run, 3)
    forward = parts["forward"]
    from record.steps import hidden_roles, overlap_us
    outlined = hidden_roles(parts)
    assert sorted((s["phase"], s["step"]) for s in outlined.values()) == [
        ("process_last", 2), ("schedule", 4)]
    hidden_ms = sum(overlap_us(s, forward) for s in outlined.values()) / 1000
    assert hidden_ms == pytest.approx(0.07)                  # 60 µs of process_last + 10 of schedule
    assert f"{hidden_ms:.2f} ms of the CPU's work ran hidden" in viz.step_caption(run, 3)


def test_step_caption_says_what_the_step_did_with_measured_numbers():
    text = viz.step_caption(overlap_steps(), 3)
    assert text.startswith("**Step 3** (overlap)")
    assert "forward(B3) (0.09 ms) while the CPU processes B2 (0.06 ms)" in text
    assert "wait_stream" in text and "copy_done" in text
    assert "request 0 (stopped at step 2)" in text           # the lag-one rider
    assert "drain" not in text
    assert "fill" in viz.step_caption(overlap_steps(), 1)
    assert "drain" in viz.step_caption(overlap_steps(), 4)
    zh = viz.step_caption(overlap_steps(), 3, lang="zh")
    assert "第 3 步" in zh and "wait_stream" in zh


def test_the_caption_says_what_the_forward_waited_for_where_the_copy_ran():
    """wait_stream orders the forward after everything queued on the scheduler stream: with the
    copy there (older recordings) that is copy(B2) and so forward(B2) too; with the copy on the
    engine stream (the default) only the upload; a CPU device process runs in order."""
    scheduler = overlap_steps()
    engine = overlap_steps()
    for s in engine["spans"]:
        if s["phase"] == "copy":
            s["lane"] = "engine_stream"
    assert copy_placement(scheduler) == "scheduler" and copy_placement(engine) == "engine"
    assert copy_placement(scheduler, {"device_kind": "cpu-process"}) == "in_order"
    said = viz.step_caption(scheduler, 3)
    assert "waited for all the scheduler stream held before it (wait_stream): copy(B2), which " \
           "itself waited for forward(B2), then B3's upload" in said
    said = viz.step_caption(engine, 3)
    assert "waited for B3's metadata upload, the only work on the scheduler stream" in said
    assert "only waited" not in said and "only for" not in said
    said = viz.step_caption(scheduler, 3, placement="in_order")
    assert "The device process runs its commands in order" in said
    zh = viz.step_caption(engine, 3, "zh")
    assert "scheduler stream 上唯一的工作" in zh and "（重叠）" in zh      # the loop, in Chinese
    from viz.replay import links
    hover = links(step_parts(scheduler, 3), 3, "overlap", "en", "scheduler")["upload"]
    assert any("everything queued before it" in line for line in hover), hover


def test_the_normal_loop_hides_nothing_and_says_the_gpu_idles():
    run = overlap_steps("normal")
    parts = step_parts(run, 3)
    assert parts["hidden"] == []
    fig = step_figure(run, 3)
    assert {trace.meta for trace in fig.data if trace.meta} == {"forward", "upload", "copy",
                                                                  "wait", "process"}
    assert "Nothing hides that work: the GPU idles 0.00 ms" in viz.step_caption(run, 3)


def test_multistep_runs_hide_whatever_process_last_overlaps_the_forward():
    run = overlap_steps("multistep", k=4)
    parts = step_parts(run, 3)
    assert [s["step"] for s in parts["hidden"]] == [2]
    assert "k=4" in viz.step_caption(run, 3) and "B2" in viz.step_caption(run, 3)


def test_unrolled_figure_has_fill_steady_and_drain_panels_from_the_run():
    spans = []
    for n in range(1, 10):
        spans += [span("engine_stream", "decode", n, n * 100, n * 100 + 90),
                  span("cpu", "process_last", n, n * 100 + 100, n * 100 + 160)]
    fig = unrolled_figure(make_run("overlap", spans=spans))
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["<b>fill: steps 1–3</b>", "<b>steady state: steps 4–6</b>",
                      "<b>drain: steps 7–9</b>"]
    labels = [trace for trace in fig.data if trace.type == "scatter" and trace.mode == "text"]
    assert len(labels) == 3 and "fwd 1" in labels[0].text and "proc 8" in labels[2].text
    assert fig.layout.xaxis.range[0] == 0 and fig.layout.xaxis3.range[0] == 0  # own scales


def test_empty_runs_give_a_message_not_an_error():
    assert step_figure(None, 3).layout.annotations[0].text == t("en", "replay_empty")
    assert unrolled_figure({"spans": []}).layout.annotations[0].text == t("en", "replay_empty")


def test_metrics_show_the_multistep_formula_and_its_lag_cost_beside_the_gain():
    normal = make_run("normal", metrics=dict(METRICS, wasted_tokens=0))
    overlap = make_run("overlap", metrics=dict(METRICS, tokens_per_s=140.0, wasted_tokens=8))
    multi = make_run("multistep", metrics=dict(METRICS, tokens_per_s=150.0, wasted_tokens=40,
                                               ttft_ms_mean=55.0, output_tokens=200,
                                               steady_step_us=19000.0 / 1.5), k=4)
    html = viz.metrics_html([normal, overlap, multi])
    assert "overlap / normal" in html and "multistep k=4 / normal" in html   # two ratio columns
    assert "max(13.00, 6.00 / 4) = 13.00 ms" in html
    assert 'data-metric="measured_speedup_multistep" data-value="1.5"' in html
    assert "normal 0 · overlap 8 · multistep k=4 40 (20.0% of its 200 output tokens)" in html
    assert "multistep k=4 55.0 ms" in html
    assert 'data-mode="multistep-4" data-metric="wasted_tokens" data-value="40"' in html
    assert viz.multistep_html([normal, overlap]) == ""


def test_texts_show_each_runs_wasted_steps_per_request():
    runs = [overlap_steps("overlap"), overlap_steps("multistep", k=4)]
    runs[1]["outputs"][0]["wasted_steps"] = 5
    html = viz.texts_html(runs)
    assert "extra steps after stop (overlap)" in html
    assert '<td class="num" data-wasted="multistep-4">5</td>' in html


def test_a_step_whose_processing_did_not_overlap_its_forward_does_not_claim_it_did():
    run = overlap_steps("overlap")
    fwd = next(s for s in run["spans"] if s["lane"] == "engine_stream" and s["step"] == 3)
    for s in run["spans"]:                      # move process_last(B2) after forward(B3) ends
        if s["lane"] == "cpu" and s["phase"] == "process_last" and s["step"] == 2:
            length = s["end_us"] - s["start_us"]
            s["start_us"], s["end_us"] = fwd["end_us"] + 1, fwd["end_us"] + 1 + length
    caption = viz.step_caption(run, 3)
    # Only the last 10 µs of building B4 still fall under forward(B3).
    assert "hardly overlapped" in caption and "only 0.01 ms" in caption
    assert "ran hidden under it" not in caption
    assert "几乎没有重叠" in viz.step_caption(run, 3, "zh")


# ---- busy two ways, and time with no request in the system ---------------------------------------

def test_titles_show_busy_over_all_lanes_and_over_the_engine_stream_alone(known_run):
    known_run["metrics"] = {"idle_us_total": 8.0, "idle_gap_count": 2, "gpu_busy_frac": 0.7,
                            "engine_busy_frac": 0.55}
    title = side_by_side_figure([known_run]).layout.annotations[0].text
    assert "GPU busy 70.0% all stream lanes, 55.0% engine stream alone" in title
    zh = side_by_side_figure([known_run], lang="zh").layout.annotations[0].text
    assert "所有 stream 泳道合计 70.0%，engine stream 单独 55.0%" in zh


def test_a_trace_of_another_engine_has_one_busy_figure_its_gpu_lanes_together():
    lanes = ["GPU 0 stream 7"]
    run = {"loop": "imported", "decode_steps": 1, "extra_cpu_us": 0, "label": "imported",
           "lanes": lanes, "gpu_lanes": lanes,
           "metrics": {}, "outputs": [], "spans": [span(lanes[0], "gemm", 1, 0, 30),
                                                   span(lanes[0], "gemm", 2, 60, 100)]}
    title = side_by_side_figure([run]).layout.annotations[0].text
    assert "GPU busy 70.0% (its GPU lanes together)" in title and "engine" not in title


def _served_session() -> dict:
    """Two clients 1 s apart, each served in 10 ms of busy-ish GPU time: as
    /v1/timeline/record returns a session. Nothing at all was asked in between."""
    spans, outputs = [], []
    for client, t0 in enumerate((0.0, 1_000_000.0)):
        for step in range(5):
            a = t0 + step * 2000.0
            spans += [span("scheduler_stream", "upload", 10 * client + step, a, a + 100),
                      span("engine_stream", "decode", 10 * client + step, a + 100, a + 1600)]
        outputs.append({"token_ids": [1] * 5, "text": "", "finish_reason": "length",
                        "arrival_us": t0, "first_token_us": t0 + 1600, "finish_us": t0 + 10_000})
    from record.metrics import compute_metrics

    return make_run("overlap", spans=spans, outputs=outputs,
                    metrics=compute_metrics(spans, outputs))


def test_a_served_session_counts_busy_only_while_requests_were_in_the_system():
    run = _served_session()
    assert run["metrics"]["gpu_busy_frac"] < 0.02            # the whole session: 1.6%
    fig = side_by_side_figure([run])
    title = fig.layout.annotations[0].text
    assert "while requests were in the system (2% of the time)" in title, title
    assert "GPU busy 80.0% all stream lanes, 75.0% engine stream alone" in title, title
    assert "GPU idle 4.0 ms in 10 gaps" in title, title      # 400 µs after each decode, x5 x2
    traces = traces_by_name(fig)
    quiet = traces[t("en", "no_requests")]
    assert list(quiet.x) == pytest.approx([990.0])            # 10 ms to 1000 ms, grey
    assert sum(traces[t("en", "gpu_idle")].x) == pytest.approx(4.0)
    html = viz.metrics_html([run])
    assert 'data-metric="active_busy_frac" data-value="0.8"' in html


def test_a_run_whose_requests_were_always_in_shows_no_quiet_time_and_no_extra_row(known_run):
    known_run["outputs"] = [{"token_ids": [1], "text": "", "finish_reason": "length",
                             "arrival_us": 0.0, "first_token_us": 10.0, "finish_us": 30.0}]
    from record.metrics import compute_metrics

    known_run["metrics"] = compute_metrics(known_run["spans"], known_run["outputs"])
    fig = side_by_side_figure([known_run])
    assert t("en", "no_requests") not in traces_by_name(fig)
    assert "while requests" not in fig.layout.annotations[0].text
    assert 'data-metric="active_busy_frac"' not in viz.metrics_html([known_run])


def test_multi_step_where_the_cpu_is_not_the_bottleneck_says_what_multi_step_is_for():
    """T_cpu <= T_fwd: one-step overlap hides it already, k steps add only lag (the same
    prediction as one step, 17% of the tokens wasted)."""
    multi = make_run("multistep", metrics=dict(METRICS, wasted_tokens=11))
    multi["loop"], multi["decode_steps"] = "multistep", 4
    html = viz.metrics_html([make_run("normal", metrics=METRICS), multi])
    assert 'data-block="multistep-no-gain"' in html
    assert "6.00 ms) is not longer than T_fwd (13.00 ms)" in html
    heavy = dict(METRICS, t_cpu_us=40000.0)
    assert "multistep-no-gain" not in viz.metrics_html([make_run("normal", metrics=heavy), multi])
    assert "重调度器" in viz.metrics_html([make_run("normal", metrics=METRICS), multi], "zh")


def test_a_lane_of_many_kernels_is_drawn_at_pixel_resolution_as_opaque_as_it_was_busy():
    """10,000 kernels of 1 µs every 10 µs (10% busy): a few thousand bars at most, each merged
    bar about sqrt(10%) opaque; the title still counts every gap."""
    lanes = ["GPU 0 stream 7"]
    spans = [span(lanes[0], f"kernel_{i % 7}", i // 100, 10.0 * i, 10.0 * i + 1)
             for i in range(10_000)]
    run = {"loop": "imported", "decode_steps": 1, "extra_cpu_us": 0, "label": "imported",
           "lanes": lanes, "gpu_lanes": lanes,
           "metrics": {}, "outputs": [], "spans": spans}
    fig = side_by_side_figure([run])
    bars = [trace for trace in fig.data if trace.type == "bar" and trace.name == "kernel"]
    assert sum(len(trace.x) for trace in bars) <= 2000
    opacities = [o for trace in bars for o in trace.marker.opacity]
    assert all(0.25 < o < 0.4 for o in opacities), sorted(opacities)[:5]   # sqrt(0.1) = 0.32
    assert "in 9999 gaps" in fig.layout.annotations[0].text


def test_the_overlap_caption_does_not_count_the_steps_own_launch_as_hidden():
    """An eager forward is as long as its launch (the launch issues its kernels as it goes):
    the step's own building and launch under it is not work the forward hides."""
    run = overlap_steps("overlap")
    fwd = next(s for s in run["spans"] if s["lane"] == "engine_stream" and s["step"] == 3)
    for s in run["spans"]:
        if s["lane"] == "cpu" and s["phase"] == "launch" and s["step"] == 3:
            s["end_us"] = fwd["end_us"]                  # launch(B3) spans forward(B3)
        if s["lane"] == "cpu" and s["phase"] == "process_last" and s["step"] == 2:
            length = s["end_us"] - s["start_us"]         # and nothing else falls under it
            s["start_us"], s["end_us"] = fwd["end_us"] + 20, fwd["end_us"] + 20 + length
    assert "hardly overlapped" in viz.step_caption(run, 3)


def test_the_caption_says_how_much_of_process_last_is_the_extra_cpu_work():
    """The extra CPU work runs inside process_last: the caption says how much of that span it
    is, so a reader does not take it for reading tokens; a run without it says nothing."""
    run = overlap_steps()
    run["extra_cpu_us"] = 50
    said = viz.step_caption(run, 3)
    assert "Of process_last(B2)'s 0.06 ms, 0.05 ms is the extra CPU work this run was given" in said
    assert "process_last(B2) 的 0.06 ms 中，有 0.05 ms 是这次运行设定的额外 CPU 工作" in \
        viz.step_caption(run, 3, "zh")
    normal = overlap_steps("normal")
    normal["extra_cpu_us"] = 50
    assert "Of process_last(B3)'s 0.06 ms" in viz.step_caption(normal, 3)
    assert "extra CPU work" not in viz.step_caption(overlap_steps(), 3)
    run["extra_cpu_us"] = 500                               # more than the span: not said
    assert "extra CPU work this run" not in viz.step_caption(run, 3)


def test_every_text_renders_its_emphasis_in_both_languages():
    """Markdown closes ``**`` after a full-width stop or colon only before a space, which Chinese
    shows; a label's punctuation therefore goes after the bold, and no text leaves a ``**``
    unrendered. A line break next to Chinese (or emphasised Chinese) is joined, not a space."""
    md = pytest.importorskip("markdown_it").MarkdownIt()
    from texts import STRINGS
    for lang in ("en", "zh"):
        unrendered = [key for key, text in STRINGS[lang].items() if "**" in md.render(text)]
        assert unrendered == [], (lang, unrendered)
    assert "*现场运行*页" in STRINGS["zh"]["lab_help"]


def test_the_metrics_table_says_which_way_a_ratio_is_better():
    runs = [make_run("normal", metrics=dict(METRICS)), make_run("overlap", metrics=dict(METRICS))]
    html = viz.metrics_html(runs)
    assert 'data-block="ratio-note"' in html and "below 1× means faster" in html
    assert "小于 1× 表示更快" in viz.metrics_html(runs, "zh")
    assert 'data-block="ratio-note"' not in viz.metrics_html(runs[:1])   # no ratio column
