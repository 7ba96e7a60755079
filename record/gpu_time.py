"""What a view says about a run's GPU time: idle gaps, busy over all stream lanes and over the
engine stream alone, and the time with no request in the system. Where that time is more than a
sliver (``QUIET_SHOWN``), gaps and busy count only the time with requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from record.metrics import active_windows, busy_fraction, idle_gaps, outside, within
from record.schema import Lane, RunDict, SpanDict
from record.window import gpu_lanes, joined_gap_us, time_range

Interval = tuple[float, float]
QUIET_SHOWN = 0.02     # below this share of the view without requests, nothing is set apart


@dataclass
class GpuTime:
    gaps: list[Interval] = field(default_factory=list)     # GPU idle (while requests were in)
    quiet: list[Interval] = field(default_factory=list)    # no request in the system at all
    idle_us: float = 0.0
    gap_count: int = 0
    busy_both: float | None = None      # GPU lanes together (all stream lanes, for our runs)
    busy_engine: float | None = None    # the engine stream alone; None: no such lane
    active_share: float | None = None   # share of the view with requests in it, where cut


def _length(intervals: list[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def gpu_time(run: RunDict) -> GpuTime:
    """The GPU time of a run, a step window (``record.window.window_run``) or a run in progress."""
    spans = run.get("spans", [])
    lanes = gpu_lanes(run)
    join = joined_gap_us(run)      # an imported trace: gaps between kernels shorter than a launch
    if "window" in run:
        view: Interval = (run["window"]["t_start_us"], run["window"]["t_end_us"])
        active = within(run["window"].get("active", []), [view])
    else:
        view = time_range([s for s in spans if s["lane"] in lanes])
        active = active_windows(run.get("outputs") or [])
    if active and "window" not in run:      # a request may arrive before the first upload,
        view = (min(view[0], active[0][0]), max(view[1], active[-1][1]))   # finish after
    gaps = idle_gaps(spans, lanes, view, join)
    has_engine = Lane.ENGINE_STREAM in lanes and any(s["lane"] == Lane.ENGINE_STREAM for s in spans)
    length = view[1] - view[0]
    # "No request in the system": GPU idle time outside every request's life (a forward still
    # running after a request finished is work in flight, not such time).
    quiet = outside(gaps, active) if active else []
    if quiet and length > 0 and _length(quiet) > QUIET_SHOWN * length:
        return _cut(spans, view, gaps, active, quiet, has_engine)
    if active and "window" not in run:      # nothing set apart: the GPU lanes' own extent
        view = time_range([s for s in spans if s["lane"] in lanes])
        gaps = idle_gaps(spans, lanes, view, join)
    metrics = run.get("metrics") or {}
    if "window" not in run and "idle_us_total" in metrics:       # a whole run: its metrics
        return GpuTime(gaps, [], float(metrics["idle_us_total"]),
                       int(metrics.get("idle_gap_count") or 0), metrics.get("gpu_busy_frac"),
                       metrics.get("engine_busy_frac") if has_engine else None)
    return GpuTime(gaps, [], _length(gaps), len(gaps), busy_fraction(spans, lanes, view, join),
                   busy_fraction(spans, [Lane.ENGINE_STREAM], view) if has_engine else None)


def _cut(spans: list[SpanDict], view: Interval, gaps: list[Interval],
         active: list[Interval], quiet: list[Interval], has_engine: bool) -> GpuTime:
    """Idle and busy counted only while work was in flight (the view less ``quiet``)."""
    counted = (view[1] - view[0]) - _length(quiet)
    idle = within(gaps, active)
    engine_busy = None
    if has_engine:
        engine_idle = outside(idle_gaps(spans, [Lane.ENGINE_STREAM], view), quiet)
        engine_busy = 1.0 - _length(engine_idle) / counted
    return GpuTime(idle, quiet, _length(idle), len(idle), 1.0 - _length(idle) / counted,
                   engine_busy, counted / (view[1] - view[0]))
