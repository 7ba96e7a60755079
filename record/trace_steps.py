"""One step of an imported trace, as the step-through shows it.

A trace of another engine has no forward span of ours: its step n is the GPU work launched in
that step (``record.profiler_import`` found the steps from ProfilerStep marks, graph launches
or a marker kernel, and stamped each kernel with the step it was launched in). ``trace_step``
measures that work (its extent, its busy time with gaps shorter than a launch joined, the wait
until the next step's GPU work), the part of it that ran after the host had begun the next step
(what an overlapped loop does), and the host's named phases in the step.
"""

from __future__ import annotations

from typing import Any

from record.metrics import union_intervals
from record.schema import RunDict
from record.window import gpu_lanes, joined_gap_us


def host_step_starts(run: RunDict) -> dict[int, float]:
    """Step number -> when the host began it (µs on the run's clock), as the import found."""
    starts = {}
    for pair in run.get("step_starts") or []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            starts[int(pair[0])] = float(pair[1])
    return starts


def trace_step(run: RunDict, step: int) -> dict[str, Any] | None:
    """Step ``step`` of an imported run: ``start``/``end`` of its GPU work, ``busy_us``,
    ``items`` (kernels, copies), ``step_us`` (to the next step's GPU work), ``wait_us`` (the
    GPU idle in it), ``late`` (the intervals of its GPU work after the host began the next
    step; ``next`` that step's number) and ``host`` (its named phases: name, role, µs).
    None where the step launched no GPU work."""
    spans = run.get("spans", [])
    lanes = set(gpu_lanes(run))
    work = [s for s in spans if s["lane"] in lanes and s.get("step") == step]
    if not work:
        return None
    firsts: dict[int, float] = {}
    for s in spans:
        if s["lane"] in lanes and s.get("step", -1) >= 0:
            firsts[s["step"]] = min(firsts.get(s["step"], s["start_us"]), s["start_us"])
    start, end = min(s["start_us"] for s in work), max(s["end_us"] for s in work)
    later = sorted(n for n in firsts if firsts[n] > start)
    stop = firsts[later[0]] if later else end
    busy = union_intervals([(s["start_us"], s["end_us"]) for s in work], joined_gap_us(run))
    busy_us = sum(b - a for a, b in busy)
    host = host_step_starts(run)
    following = sorted(n for n in host if n > step)
    late: list[tuple[float, float]] = []
    if following:
        begun = host[following[0]]
        late = [(max(a, begun), b) for a, b in busy if b > begun]
    roles = run.get("phase_roles") or {}
    named = [(s["phase"], roles[s["phase"]], s["end_us"] - s["start_us"]) for s in spans
             if s.get("step") == step and s["lane"] not in lanes and s["phase"] in roles]
    return {"start": start, "end": end, "busy_us": busy_us, "items": len(work),
            "step_us": max(stop - start, end - start), "wait_us": max(stop - start - busy_us, 0.0),
            "late": late, "next": following[0] if following else None, "host": named}
