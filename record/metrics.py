"""Metrics: pure functions of a run's spans and outputs, so a live run, a recorded run and an
imported trace are measured the same way. GPU *busy* is the **union** of the GPU lanes' intervals,
never the sum of their durations. The article's model per decode step: serial takes about
``T_fwd + T_cpu``, overlapped about their max, so the predicted speedup is ``sum / max``."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from record.recorder import Span
from record.schema import CPU_WORK_PHASES, FORWARD_PHASES, GPU_LANES, Lane, Metrics, Phase, SpanDict

Interval = tuple[float, float]
SpanLike = Span | SpanDict | Mapping[str, Any]
_T = TypeVar("_T")

# Batch metadata is not the forward's work even where an engine uploads it on its engine stream.
METADATA_PHASES = (Phase.UPLOAD,)

# The keys every run of a record carries (``compute_metrics`` gives them all).
METRIC_KEYS = (
    "tokens_per_s", "decode_tokens_per_s", "output_tokens", "wall_s", "steps",
    "gpu_busy_frac", "idle_us_total", "idle_gap_count", "mean_step_us", "mean_idle_per_step_us",
    "t_fwd_us", "t_cpu_us", "predicted_overlap_speedup",
    "ttft_ms_mean", "ttft_ms_p50", "tpot_ms_mean",
    "steady_step_us", "steady_busy_frac", "steady_steps", "steady_prefill_frac",
    "engine_busy_frac", "steady_engine_busy_frac", "decode_gap_us_p50", "active_busy_frac",
)


# ---- intervals ------------------------------------------------------------------------------

def union_intervals(intervals: Iterable[Interval], join_us: float = 0.0) -> list[Interval]:
    """Sorted, disjoint intervals (empty ones dropped); two less than ``join_us`` apart merge too
    (an imported trace's gaps between kernels, shorter than any launch, are not idleness)."""
    merged: list[list[float]] = []
    for start, end in sorted((float(s), float(e)) for s, e in intervals if e > s):
        if merged and start - merged[-1][1] <= join_us:   # overlapping, touching or joined
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _as_spans(spans: Iterable[SpanLike]) -> list[Span]:
    return [s if isinstance(s, Span) else Span.from_dict(s) for s in spans]


def _lane_intervals(spans: Iterable[SpanLike], lanes: Iterable[str]) -> list[Interval]:
    wanted = set(lanes)
    return [(s.start_us, s.end_us) if isinstance(s, Span) else (s["start_us"], s["end_us"])
            for s in spans if (s.lane if isinstance(s, Span) else s["lane"]) in wanted]


def _extent(intervals: Sequence[Interval]) -> Interval | None:
    if not intervals:
        return None
    return min(s for s, _ in intervals), max(e for _, e in intervals)


def _clip(intervals: Iterable[Interval], window: Interval) -> list[Interval]:
    lo, hi = window
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def _busy_and_window(spans: Iterable[SpanLike], lanes: Iterable[str], window: Interval | None,
                     join_us: float = 0.0) -> tuple[list[Interval], Interval | None]:
    intervals = _lane_intervals(spans, lanes)
    window = window if window is not None else _extent(intervals)
    if window is None:
        return [], None
    return union_intervals(_clip(intervals, window), join_us), window


def busy_fraction(spans: Iterable[SpanLike], lanes: Iterable[str],
                  window: Interval | None = None, join_us: float = 0.0) -> float:
    """Share of ``window`` (default: the lanes' extent) covered by the union of their spans."""
    busy, window = _busy_and_window(spans, lanes, window, join_us)
    if window is None or window[1] <= window[0]:
        return 0.0
    return sum(e - s for s, e in busy) / (window[1] - window[0])


def idle_gaps(spans: Iterable[SpanLike], lanes: Iterable[str],
              window: Interval | None = None, join_us: float = 0.0) -> list[Interval]:
    """The intervals of ``window`` where no lane in ``lanes`` has a span."""
    busy, window = _busy_and_window(spans, lanes, window, join_us)
    if window is None:
        return []
    gaps: list[Interval] = []
    cursor = window[0]
    for start, end in busy:
        if start > cursor:
            gaps.append((cursor, start))
        cursor = max(cursor, end)
    if window[1] > cursor:
        gaps.append((cursor, window[1]))
    return gaps


def _middle(items: Sequence[_T]) -> Sequence[_T] | None:
    """The middle of ``items``, a tenth left out at each end (fill and drain); None under five."""
    return items[int(len(items) * 0.1):int(len(items) * 0.9)] if len(items) >= 5 else None


def steady_window(spans: Iterable[SpanLike]) -> Interval | None:
    """The steady part of decode (``_middle`` of its forwards), so two loops compare over the same
    kind of steps; ``None`` with fewer than five decode forwards."""
    middle = _middle(sorted((s for s in _as_spans(spans)
                             if s.lane == Lane.ENGINE_STREAM and s.phase == Phase.DECODE),
                            key=lambda s: s.start_us))
    if middle is None:
        return None
    first, last = middle[0], middle[-1]
    return (first.start_us, last.end_us) if last.end_us > first.start_us else None


def steady_busy(spans: Iterable[SpanLike], lanes: Iterable[str] = GPU_LANES) -> float:
    """GPU busy over ``steady_window`` (over the whole run when there is no steady part)."""
    spans = _as_spans(spans)
    return busy_fraction(spans, lanes, window=steady_window(spans))


# ---- steps ----------------------------------------------------------------------------------

class _SpanRow:
    """A span dict's timing fields as attributes, read without building a ``Span`` (views are
    large)."""

    __slots__ = ("lane", "phase", "step", "start_us", "end_us")

    def __init__(self, d: Mapping[str, Any]) -> None:
        self.lane, self.phase, self.step = d["lane"], d["phase"], d.get("step", -1)
        self.start_us, self.end_us = d["start_us"], d["end_us"]


def step_extents(spans: Iterable[SpanLike],
                 gpu_lanes: Sequence[str] = GPU_LANES) -> dict[int, Interval]:
    """Per step: (start of its forward, end of its engine-stream work); a trace of another engine:
    its GPU work per step."""
    rows = [s if isinstance(s, Span) else _SpanRow(s) for s in spans]
    forward_steps = {s.step for s in rows
                     if s.lane == Lane.ENGINE_STREAM and s.phase in FORWARD_PHASES and s.step >= 0}
    if forward_steps:
        members = [s for s in rows if s.lane == Lane.ENGINE_STREAM and s.step in forward_steps]
        openers = [s for s in members if s.phase in FORWARD_PHASES]
    else:
        members = openers = [s for s in rows if s.lane in gpu_lanes and s.step >= 0]
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for s in openers:
        starts[s.step] = min(starts.get(s.step, s.start_us), s.start_us)
    for s in members:
        ends[s.step] = max(ends.get(s.step, s.end_us), s.end_us)
    return {step: (starts[step], ends[step]) for step in starts}


def _step_durations(extents: Mapping[int, Interval]) -> dict[int, float]:
    """A step lasts from its forward start to the next step's; the last one to its own end."""
    order = sorted(extents, key=lambda step: extents[step][0])
    durations: dict[int, float] = {}
    for i, step in enumerate(order):
        start, end = extents[step]
        stop = extents[order[i + 1]][0] if i + 1 < len(order) else end
        durations[step] = stop - start
    return durations


def _decode_tokens(spans: Sequence[Span]) -> dict[int, int]:
    tokens: dict[int, int] = defaultdict(int)
    for s in spans:
        if s.lane == Lane.ENGINE_STREAM and s.phase == Phase.DECODE and s.step >= 0:
            tokens[s.step] += s.batch_size
    return dict(tokens)


def _model_times(spans: Sequence[Span], decode_steps: Iterable[int]) -> tuple[float, float]:
    """Mean T_fwd (engine stream's union, uploads left out) and T_cpu per decode step."""
    steps = set(decode_steps)
    if not steps:
        return 0.0, 0.0
    engine: dict[int, list[Interval]] = defaultdict(list)
    cpu_work = 0.0
    for s in spans:
        if s.step not in steps:
            continue
        if s.lane == Lane.ENGINE_STREAM and s.phase not in METADATA_PHASES:
            engine[s.step].append((s.start_us, s.end_us))
        elif s.lane == Lane.CPU and s.phase in CPU_WORK_PHASES:
            cpu_work += s.end_us - s.start_us
    fwd = sum(e - s for iv in engine.values() for s, e in union_intervals(iv))
    return fwd / len(steps), cpu_work / len(steps)


def _middle_steps(durations: Mapping[int, float], spans: Sequence[Span],
                  gpu_lanes: Sequence[str]) -> tuple[list[int], Interval | None]:
    """The middle steps of a trace without our decode phases, and the time they cover."""
    extents = step_extents(spans, gpu_lanes)
    order = sorted(extents, key=lambda step: extents[step][0])
    middle = _middle(order)
    if middle is None:
        return order, None
    return list(middle), (extents[middle[0]][0], extents[middle[-1]][0] + durations[middle[-1]])


def _gap_terms(spans: Sequence[Span], gpu_lanes: Sequence[str], steps: Iterable[int],
               durations: Mapping[int, float], join_us: float = 0.0) -> tuple[float, float]:
    """A trace without scheduler phases, per step: the GPU's busy time and the rest of the step,
    the GPU waiting between forwards (not the host's work: the host also works while it runs)."""
    steps = [step for step in steps if step in durations]
    if not steps:
        return 0.0, 0.0
    wanted, lanes = set(steps), set(gpu_lanes)
    busy: dict[int, list[Interval]] = defaultdict(list)
    for s in spans:
        if s.step in wanted and s.lane in lanes:
            busy[s.step].append((s.start_us, s.end_us))
    fwd = [sum(e - s for s, e in union_intervals(busy[step], join_us)) for step in steps]
    gaps = [max(durations[step] - f, 0.0) for step, f in zip(steps, fwd)]
    return statistics.fmean(fwd), statistics.fmean(gaps)


def _steady_steps(spans: Sequence[Span], window: Interval | None) -> list[int]:
    return [s.step for s in spans if s.lane == Lane.ENGINE_STREAM and s.phase == Phase.DECODE
            and s.step >= 0 and (window is None or window[0] <= s.start_us <= window[1])]


def cpu_phase_times(spans: Iterable[SpanLike]) -> dict[str, float]:
    """The scheduler thread's µs per steady decode step, phase by phase (``wait`` too)."""
    spans = _as_spans(spans)
    steps = set(_steady_steps(spans, steady_window(spans)))
    if not steps:
        return {}
    total: dict[str, float] = defaultdict(float)
    for s in spans:
        if s.lane == Lane.CPU and s.step in steps:
            total[s.phase] += s.end_us - s.start_us
    return {phase: us / len(steps) for phase, us in total.items()}


def overlap_speedup(t_fwd_us: float, t_cpu_us: float, k: int = 1) -> float:
    """The article's model, (T_fwd + T_cpu) / max(T_fwd, T_cpu / k); 0.0 if 0/0."""
    slowest = max(t_fwd_us, t_cpu_us / k)
    return (t_fwd_us + t_cpu_us) / slowest if slowest > 0 else 0.0


# ---- requests -------------------------------------------------------------------------------

def _field(output: object, key: str) -> Any:
    return output.get(key) if isinstance(output, Mapping) else getattr(output, key, None)


def _latencies(outputs: Sequence[object]) -> tuple[list[float], list[float]]:
    ttft: list[float] = []
    tpot: list[float] = []
    for out in outputs:
        arrival, first, finish = (_field(out, k) for k in ("arrival_us", "first_token_us",
                                                           "finish_us"))
        n = len(_field(out, "token_ids") or [])
        if arrival is not None and first is not None:
            ttft.append((first - arrival) / 1000.0)
        if n > 1 and first is not None and finish is not None:
            tpot.append((finish - first) / (n - 1) / 1000.0)
    return ttft, tpot


def ttft_drift(outputs: Sequence[object]) -> float | None:
    """Whether a run kept up with its arrivals: the median TTFT of the last third of the requests
    over the first third's (about 1 when the queue holds). None under six timed requests."""
    timed = sorted((_field(o, "arrival_us"), _field(o, "first_token_us")) for o in outputs
                   if _field(o, "arrival_us") is not None
                   and _field(o, "first_token_us") is not None)
    third = len(timed) // 3
    if third < 2:
        return None
    early = statistics.median(first - arrival for arrival, first in timed[:third])
    late = statistics.median(first - arrival for arrival, first in timed[-third:])
    return late / early if early > 0 else None


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _mean_or_none(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else 0.0


def decode_gaps(spans: Iterable[SpanLike], window: Interval | None = None) -> list[float]:
    """The gaps between consecutive decode forwards that start inside ``window``."""
    forwards = sorted((s.start_us, s.end_us) for s in _as_spans(spans)
                       if s.lane == Lane.ENGINE_STREAM and s.phase == Phase.DECODE
                       and (window is None or window[0] <= s.start_us <= window[1]))
    return [max(b[0] - a[1], 0.0) for a, b in zip(forwards, forwards[1:])]


def active_windows(outputs: Sequence[object]) -> list[Interval]:
    """When requests were in the system: the union of their arrival-to-finish times."""
    lives = []
    for out in outputs:
        arrival, finish = _field(out, "arrival_us"), _field(out, "finish_us")
        if arrival is not None and finish is not None and finish > arrival:
            lives.append((float(arrival), float(finish)))
    return union_intervals(lives)


def within(intervals: Iterable[Interval], windows: Sequence[Interval]) -> list[Interval]:
    merged = union_intervals(windows)
    return [piece for w in merged for piece in _clip(intervals, w)]


def outside(intervals: Iterable[Interval], windows: Sequence[Interval]) -> list[Interval]:
    merged = union_intervals(windows)
    out: list[Interval] = []
    for start, end in intervals:
        cursor = start
        for lo, hi in merged:
            if hi <= cursor or lo >= end:
                continue
            if lo > cursor:
                out.append((cursor, lo))
            cursor = max(cursor, hi)
        if cursor < end:
            out.append((cursor, end))
    return out


def busy_while_active(spans: Iterable[SpanLike], lanes: Iterable[str],
                      outputs: Sequence[object]) -> float | None:
    """GPU busy counted only while a request was in the system or the GPU was busy (the time
    between a served session's clients left out). None without arrival and finish times."""
    windows = active_windows(outputs)
    if not windows:
        return None
    busy = union_intervals(_lane_intervals(spans, lanes))
    counted = union_intervals(windows + busy)
    total = sum(e - s for s, e in counted)
    return sum(e - s for s, e in busy) / total if total > 0 else None


# ---- the metrics dict -----------------------------------------------------------------------

def compute_metrics(spans: Iterable[SpanLike], outputs: Sequence[object],
                    gpu_lanes: Sequence[str] = GPU_LANES,
                    wall_us: float | None = None,
                    join_us: float = 0.0) -> Metrics:
    """All metrics of one run (``METRIC_KEYS``), never NaN: None where the run cannot tell, 0 where
    it can and there is nothing. T_fwd, T_cpu, the prediction and the measured step all come from
    the same steady decode steps. Another engine's trace has no CPU work: ``t_cpu_us`` is None,
    ``gpu_wait_us`` the GPU's wait between forwards."""
    spans = _as_spans(spans)
    if wall_us is None:
        extent = _extent([(s.start_us, s.end_us) for s in spans])
        wall_us = extent[1] - extent[0] if extent else 0.0
    output_tokens = sum(len(_field(o, "token_ids") or []) for o in outputs)

    durations = _step_durations(step_extents(spans, gpu_lanes))
    decode_tokens = {step: n for step, n in _decode_tokens(spans).items() if step in durations}
    decode_us = sum(durations[step] for step in decode_tokens)
    if decode_tokens:                   # our own runs: the scheduler's phases are recorded
        window = steady_window(spans)
        steady = [step for step in _steady_steps(spans, window) if step in decode_tokens]
        t_fwd, t_cpu = _model_times(spans, steady)
        gpu_wait: float | None = None
    else:                               # a trace of another engine: only the GPU's busy and idle
        steady, window = _middle_steps(durations, spans, gpu_lanes)
        t_fwd, gpu_wait = _gap_terms(spans, gpu_lanes, steady, durations, join_us)
        t_cpu = None

    gaps = idle_gaps(spans, gpu_lanes, join_us=join_us)
    idle_total = sum(e - s for s, e in gaps)
    ttft, tpot = _latencies(outputs)
    has_outputs = bool(outputs)
    engine = any(s.lane == Lane.ENGINE_STREAM for s in spans)
    forward_gaps = decode_gaps(spans, window)
    metrics: Metrics = {
        "tokens_per_s": _ratio(output_tokens, wall_us / 1e6) if has_outputs else None,
        "decode_tokens_per_s": _ratio(sum(decode_tokens.values()), decode_us / 1e6)
        if decode_tokens else None,
        "output_tokens": output_tokens if has_outputs else None,
        "wall_s": wall_us / 1e6,
        "steps": len(durations),
        "gpu_busy_frac": busy_fraction(spans, gpu_lanes, join_us=join_us),
        "idle_us_total": idle_total,
        "idle_gap_count": len(gaps),
        "mean_step_us": _mean(list(durations.values())),
        "mean_idle_per_step_us": _ratio(idle_total, len(durations)),
        "t_fwd_us": t_fwd,
        "t_cpu_us": t_cpu,
        "predicted_overlap_speedup": overlap_speedup(t_fwd, t_cpu) if t_cpu is not None
        else None,
        "ttft_ms_mean": _mean_or_none(ttft),
        "ttft_ms_p50": statistics.median(ttft) if ttft else None,
        "tpot_ms_mean": _mean_or_none(tpot),
        "steady_step_us": _mean([durations[step] for step in steady if step in durations]),
        "steady_busy_frac": busy_fraction(spans, gpu_lanes, window=window, join_us=join_us),
        "steady_steps": len(steady),
        "steady_prefill_frac": _prefill_share(spans, window),
        # Over the same window as gpu_busy_frac (the extent of all GPU lanes), so the two compare.
        "engine_busy_frac": busy_fraction(spans, [Lane.ENGINE_STREAM],
                                          window=_extent(_lane_intervals(spans, gpu_lanes)))
        if engine else None,
        "steady_engine_busy_frac": busy_fraction(spans, [Lane.ENGINE_STREAM], window=window)
        if engine else None,
        "decode_gap_us_p50": percentile(forward_gaps, 50) if forward_gaps else None,
        "active_busy_frac": busy_while_active(spans, gpu_lanes, outputs),
    }
    if gpu_wait is not None:
        metrics["gpu_wait_us"] = gpu_wait
    return metrics


def _prefill_share(spans: Sequence[Span], window: Interval | None) -> float:
    if window is None or window[1] <= window[0]:
        return 0.0
    prefill = [s for s in spans if s.lane == Lane.ENGINE_STREAM and s.phase == Phase.PREFILL]
    return busy_fraction(prefill, [Lane.ENGINE_STREAM], window)


def compare_runs(normal: Mapping[str, Any], overlap: Mapping[str, Any],
                 decode_steps: int = 1) -> dict[str, float | None]:
    """Overlap (or multi-step with k = ``decode_steps``) against the serial run, from two metrics
    dicts (or runs): predicted from the serial T_fwd and T_cpu, measured over steady steps, and
    whole-run tokens/s (None without outputs)."""
    normal = normal.get("metrics", normal)
    overlap = overlap.get("metrics", overlap)
    whole = None if None in (overlap["tokens_per_s"], normal["tokens_per_s"]) \
        else _ratio(overlap["tokens_per_s"], normal["tokens_per_s"])
    return {
        "measured_speedup": _ratio(normal["steady_step_us"], overlap["steady_step_us"]),
        "predicted_speedup": None if normal.get("t_cpu_us") is None
        else overlap_speedup(normal["t_fwd_us"], normal["t_cpu_us"], decode_steps),
        "whole_run_speedup": whole,
        "busy_gain": overlap["gpu_busy_frac"] - normal["gpu_busy_frac"],
        "idle_saved_us": normal["idle_us_total"] - overlap["idle_us_total"],
    }


# ---- serving latency: what serving benchmarks report, from the outputs alone ------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), interpolated as numpy's default; 0.0 with no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary(outputs: Sequence[object], wall_us: float | None = None) -> dict[str, float]:
    """TTFT, inter-token latency (pooled, as vLLM's benchmark), TPOT and end-to-end latency
    (mean, p50, p99, ms) of the completed requests, and their rate."""
    done = [o for o in outputs if _field(o, "finish_reason") in ("stop", "length")]
    ttft, tpot = _latencies(done)
    itl: list[float] = []
    e2e: list[float] = []
    for out in done:
        times = _field(out, "token_us") or []
        itl += [(b - a) / 1000.0 for a, b in zip(times, times[1:])]
        arrival, finish = _field(out, "arrival_us"), _field(out, "finish_us")
        if arrival is not None and finish is not None:
            e2e.append((finish - arrival) / 1000.0)
    summary: dict[str, float] = {}
    for name, values in (("ttft", ttft), ("itl", itl), ("tpot", tpot), ("e2e", e2e)):
        summary[f"{name}_ms_mean"] = _mean(values)
        summary[f"{name}_ms_p50"] = percentile(values, 50)
        summary[f"{name}_ms_p99"] = percentile(values, 99)
    if wall_us is None and done:
        wall_us = (max(_field(o, "finish_us") or 0.0 for o in done)
                   - min(_field(o, "arrival_us") or 0.0 for o in done))
    summary["requests_per_s"] = _ratio(len(done), (wall_us or 0.0) / 1e6)
    summary["completed_requests"] = len(done)
    return summary
