"""Lag one (and lag k) on the timeline: which forwards ran for a request that had already stopped.
Found from the spans alone: the stop was read in the ``process_last`` span that lists the request
and holds its ``finish_us``; the extra steps are the later ones whose batch still lists it."""

from __future__ import annotations

from typing import TypedDict

from record.schema import Phase, RunDict

BATCH_PHASES = (Phase.SCHEDULE, Phase.LAUNCH, Phase.DECODE, Phase.PREFILL)


class LagMark(TypedDict):

    request: int
    stop_step: int
    stop_us: float
    extra_steps: list[int]
    wasted_steps: int


def step_requests(run: RunDict) -> dict[int, set[int]]:
    """step -> the request ids its batch served."""
    served: dict[int, set[int]] = {}
    for span in run.get("spans", []):
        if span.get("phase") in BATCH_PHASES and span.get("req_ids"):
            served.setdefault(int(span.get("step", -1)), set()).update(span["req_ids"])
    return served


def _stop_step(run: RunDict, request: int, finish_us: float) -> int | None:
    """The step whose ``process_last`` read this request's stop token (contains ``finish_us``)."""
    best = None
    for span in run.get("spans", []):
        if span.get("phase") != Phase.PROCESS_LAST or request not in span.get("req_ids", []):
            continue
        if span["start_us"] <= finish_us <= span["end_us"] + 1.0:
            return int(span["step"])
        if span["start_us"] <= finish_us and (best is None or span["start_us"] > best[0]):
            best = (span["start_us"], int(span["step"]))
    return best[1] if best else None


def lag_marks(run: RunDict) -> list[LagMark]:
    """One mark per request that stopped on a stop token and still ran extra forwards."""
    served = step_requests(run)
    marks = []
    for request, out in enumerate(run.get("outputs") or []):
        wasted = int(out.get("wasted_steps") or 0)
        finish_us = out.get("finish_us")
        if out.get("finish_reason") != "stop" or wasted <= 0 or finish_us is None:
            continue
        stop_step = _stop_step(run, request, float(finish_us))
        if stop_step is None:
            continue
        extra = sorted(step for step, rids in served.items()
                       if step > stop_step and request in rids)[:wasted]
        marks.append(LagMark(request=request, stop_step=stop_step, stop_us=float(finish_us),
                             extra_steps=extra, wasted_steps=wasted))
    return marks


def extra_steps(marks: list[LagMark]) -> dict[int, list[tuple[int, int, int]]]:
    """step -> [(request, stop step, which extra step of that request: 1, 2, ...)]."""
    by_step: dict[int, list[tuple[int, int, int]]] = {}
    for mark in marks:
        for nth, step in enumerate(mark["extra_steps"], start=1):
            by_step.setdefault(step, []).append((mark["request"], mark["stop_step"], nth))
    return by_step
