"""A run cut to steps: its GPU lanes, time range, step range and step windows."""

from __future__ import annotations

from dataclasses import dataclass

from record.metrics import active_windows, busy_fraction, idle_gaps, step_extents
from record.schema import (
    FORWARD_PHASES,
    GPU_LANES,
    Lane,
    Metrics,
    RunDict,
    SpanDict,
    WindowDict,
    is_number,
)

Interval = tuple[float, float]


def gpu_lanes(run: RunDict) -> list[str]:
    """The run's GPU lanes (an imported trace names its own), else ``record.schema.GPU_LANES``."""
    lanes = run.get("gpu_lanes")
    return list(lanes) if lanes is not None else list(GPU_LANES)


def joined_gap_us(run: RunDict) -> float:
    """Gaps between GPU spans shorter than this count as busy: an imported kernel-level trace's
    launch latency (no host could fill a shorter gap); 0 for runs of ours."""
    value = run.get("joined_gap_us")
    return float(value) if is_number(value) and 0 < value < 1e6 else 0.0


def time_range(spans: list[SpanDict]) -> Interval:
    if not spans:
        return (0.0, 0.0)
    return (min(s["start_us"] for s in spans), max(s["end_us"] for s in spans))


def local_stats(run: RunDict) -> Metrics:
    """Idle, gaps, busy and steps over the view's own time range (a window, a run in progress)."""
    spans = run.get("spans", [])
    lanes = gpu_lanes(run)
    window = None
    if "window" in run:
        window = (run["window"]["t_start_us"], run["window"]["t_end_us"])
    join = joined_gap_us(run)
    gaps = idle_gaps(spans, lanes, window, join)
    t_start, t_end = window or time_range([s for s in spans if s["lane"] in lanes])
    steps = {s["step"] for s in spans if s.get("step", -1) >= 0}
    return {
        "idle_us_total": sum(b - a for a, b in gaps),
        "idle_gap_count": len(gaps),
        "gpu_busy_frac": busy_fraction(spans, lanes, window, join),
        "steps": len(steps),
        "span_us": t_end - t_start,
    }


def step_range(run: RunDict) -> tuple[int, int]:
    """(first, last) step number of the run's forwards (the loop's last pass stamps a ``receive``
    with a step that never ran); any step without forwards; (0, 0) for none."""
    spans = run.get("spans", [])
    steps = [s["step"] for s in spans if s.get("step", -1) >= 0
             and s["lane"] == Lane.ENGINE_STREAM and s["phase"] in FORWARD_PHASES]
    steps = steps or [s["step"] for s in spans if s.get("step", -1) >= 0]
    return (min(steps), max(steps)) if steps else (0, 0)


@dataclass(frozen=True)
class RunSteps:
    """Where each step lies in time, and the steps in the order they started (worked out once
    for a view that cuts one run several times)."""

    extents: dict[int, Interval]
    order: list[int]


def run_steps(run: RunDict) -> RunSteps:
    extents = step_extents(run.get("spans", []), tuple(gpu_lanes(run)))
    return RunSteps(extents, sorted(extents, key=lambda step: extents[step][0]))


def window_run(run: RunDict, first_step: int, last_step: int,
               steps: RunSteps | None = None) -> RunDict:
    """A copy of ``run`` cut to the time its steps first_step..last_step took (a step lasts from
    its forward's start to the next one's, so n steps hold n forwards in every loop), with the
    window's own ``metrics``."""
    if first_step > last_step:
        first_step, last_step = last_step, first_step
    spans = run.get("spans", [])
    steps = steps or run_steps(run)
    extents, order = steps.extents, steps.order
    if order:
        first_step = min(max(first_step, min(order)), max(order))
        last_step = min(max(last_step, min(order)), max(order))
    chosen = [step for step in order if first_step <= step <= last_step]
    run_start, run_end = time_range(spans)
    if chosen:
        i, j = order.index(chosen[0]), order.index(chosen[-1])
        t_start = run_start if i == 0 else extents[chosen[0]][0]
        t_end = run_end if j == len(order) - 1 else extents[order[j + 1]][0]
    else:                          # no forward among those steps: the time their spans took
        t_start, t_end = time_range([s for s in spans
                                     if first_step <= s.get("step", -1) <= last_step])
    clipped: list[SpanDict] = [{**s, "start_us": max(s["start_us"], t_start),
                                "end_us": min(s["end_us"], t_end)}
                               for s in spans if s["end_us"] > t_start and s["start_us"] < t_end]
    windowed: RunDict = {**run, "spans": clipped, "metrics": {}}
    windowed.pop("outputs", None)          # a window has no outputs: they span the whole run
    windowed["window"] = WindowDict(first_step=first_step, last_step=last_step,
                                    forwards=len(chosen), t_start_us=t_start, t_end_us=t_end,
                                    active=active_windows(run.get("outputs") or []))
    windowed["metrics"] = local_stats(windowed)
    return windowed
