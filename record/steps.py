"""The spans of one step the article talks about: forward(Bn), its upload and result copy, and the
CPU work under it (process_last(Bn-1) in the overlap loop; nothing in the normal loop)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from record.metrics import idle_gaps
from record.run_record import loop_of
from record.schema import ENGINE_LOOPS, FORWARD_PHASES, Lane, Loop, Phase, RunDict, SpanDict
from record.window import gpu_lanes, joined_gap_us

NEXT_PHASES = (Phase.RECEIVE, Phase.SCHEDULE, Phase.LAUNCH)   # B(n+1)'s CPU work, before its forward


def loop_kind(run: RunDict) -> Loop:
    """One of the engine's loops, or ``Loop.OTHER`` (an imported trace, say)."""
    loop = loop_of(run)[0]
    return loop if loop in ENGINE_LOOPS else Loop.OTHER


def _find(spans: list[SpanDict], lane: str | None, phases: tuple[str, ...],
          step: int) -> SpanDict | None:
    """The longest span of ``step`` with one of ``phases`` (on ``lane``, or any lane if None)."""
    found = [s for s in spans if s.get("step") == step and s["phase"] in phases
             and (lane is None or s["lane"] == lane)]
    return max(found, key=lambda s: s["end_us"] - s["start_us"]) if found else None


def overlap_us(a: SpanDict, b: SpanDict) -> float:
    return max(0.0, min(a["end_us"], b["end_us"]) - max(a["start_us"], b["start_us"]))


class StepParts(TypedDict):
    """The spans of one step the article talks about (``step_parts``); None: not recorded."""

    forward: SpanDict | None
    upload: SpanDict | None
    copy: SpanDict | None
    wait: SpanDict | None
    process: SpanDict | None
    hidden: list[SpanDict]
    then: list[SpanDict]


def step_parts(run: RunDict, step: int) -> StepParts:
    """The spans of step ``step``: forward, upload, copy, the CPU's wait and process_last of Bn,
    ``hidden`` (process_last spans under forward(Bn)) and, in the overlap loop, ``then``
    (B(n+1)'s receive, schedule and launch under forward(Bn))."""
    spans = run.get("spans", [])
    parts: StepParts = {
        "forward": _find(spans, Lane.ENGINE_STREAM, FORWARD_PHASES, step),
        "upload": _find(spans, Lane.SCHEDULER_STREAM, (Phase.UPLOAD,), step),
        "copy": _find(spans, None, (Phase.COPY,), step),
        "wait": _find(spans, Lane.CPU, (Phase.WAIT,), step),
        "process": _find(spans, Lane.CPU, (Phase.PROCESS_LAST,), step),
        "hidden": [],
        "then": [],
    }
    forward, kind = parts["forward"], loop_kind(run)
    if forward is None:
        return parts
    if kind == Loop.OVERLAP:
        previous = _find(spans, Lane.CPU, (Phase.PROCESS_LAST,), step - 1)
        parts["hidden"] = [previous] if previous else []
        parts["then"] = [s for s in spans if s["lane"] == Lane.CPU and s.get("step") == step + 1
                         and s["phase"] in NEXT_PHASES and overlap_us(s, forward) > 0]
    elif kind != Loop.NORMAL:
        parts["hidden"] = [s for s in spans if s["lane"] == Lane.CPU
                           and s["phase"] == Phase.PROCESS_LAST
                           and s.get("step") != step and overlap_us(s, forward) > 0]
    return parts


def copy_placement(run: RunDict, env: Mapping[str, object] | None = None) -> str:
    """Where the run's result copies ran (``result_copy_stream``'s names), or ``"in_order"`` (a
    CPU device process)."""
    lanes = {s["lane"] for s in run.get("spans", []) if s["phase"] == Phase.COPY}
    if Lane.COPY_STREAM in lanes:
        return "copy"
    if Lane.ENGINE_STREAM in lanes:
        return "engine"
    if str((env or {}).get("device_kind", "")).startswith("cpu"):
        return "in_order"
    return "scheduler" if Lane.SCHEDULER_STREAM in lanes else "engine"


HIDDEN_ROLES = ("hidden", "then")   # role-name prefixes of the CPU work under forward(Bn)


def hidden_roles(parts: StepParts) -> dict[str, SpanDict]:
    under = (("hidden", parts["hidden"]), ("then", parts["then"]))     # HIDDEN_ROLES' order
    return {f"{kind}{i}": span for kind, spans in under for i, span in enumerate(spans)}


def is_hidden_role(role: str) -> bool:
    return role.startswith(HIDDEN_ROLES)


def idle_after(run: RunDict, forward: SpanDict, step: int) -> float:
    """GPU idle µs between the end of forward(Bn) and the start of the next forward."""
    spans = run.get("spans", [])
    following = [s["start_us"] for s in spans if s["lane"] == Lane.ENGINE_STREAM
                 and s["phase"] in FORWARD_PHASES and s.get("step", -1) > step]
    if not following:
        return 0.0
    gaps = idle_gaps(spans, gpu_lanes(run), (forward["end_us"], min(following)), joined_gap_us(run))
    return sum(b - a for a, b in gaps)
