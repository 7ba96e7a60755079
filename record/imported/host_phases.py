"""The host's phases in an imported trace, where the trace names them (the scheduler's functions as
``python_function`` events, and ``record_function`` / ``user_annotation`` ranges), each given its
role in the article's loop and so its colour. The functions are those each engine's loop calls
once a step (Mini-SGLang's, SGLang's and vLLM's schedulers; their paths are in
``docs/citations.md``). Other ranges are phases with no role. Where a thread names no phase, its
outermost ops show (``host_ops``)."""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from record.imported import trace_loop
from record.imported.profiler_events import Event, Trace, short_name
from record.recorder import Span
from record.schema import Phase

ROLES = (Phase.RECEIVE, Phase.SCHEDULE, Phase.LAUNCH, Phase.PROCESS_LAST)
_FUNCTIONS: dict[str, dict[str, Phase]] = {
    "minisgl/": {"receive_msg": Phase.RECEIVE, "offline_receive_msg": Phase.RECEIVE,
                 "_process_one_msg": Phase.RECEIVE, "_schedule_next_batch": Phase.SCHEDULE,
                 "_prepare_batch": Phase.SCHEDULE, "_forward": Phase.LAUNCH,
                 "_process_last_data": Phase.PROCESS_LAST},
    "sglang/": {"recv_requests": Phase.RECEIVE, "process_input_requests": Phase.RECEIVE,
                "get_next_batch_to_run": Phase.SCHEDULE, "run_batch": Phase.LAUNCH,
                "process_batch_result": Phase.PROCESS_LAST},
    "vllm/": {"schedule": Phase.SCHEDULE, "execute_model": Phase.LAUNCH,
              "update_from_output": Phase.PROCESS_LAST},
}
SGLANG_RANGES = {"scheduler.recv_requests": Phase.RECEIVE,      # in the order its loop calls them
                 "scheduler.process_input_requests": Phase.RECEIVE,
                 "scheduler.get_next_batch_to_run": Phase.SCHEDULE,
                 "scheduler.run_batch": Phase.LAUNCH,
                 "copy_result_to_cpu": Phase.LAUNCH,   # enqueues the copy on the copy stream
                 "scheduler.process_batch_result": Phase.PROCESS_LAST}
_RANGES = {"gpu_model_runner: preprocess": Phase.SCHEDULE,
           "gpu_model_runner: forward": Phase.LAUNCH,
           "gpu_model_runner: postprocess": Phase.PROCESS_LAST, **SGLANG_RANGES}
# SGLang's mark of one forward: step[DECODE bs=16], step[EXTEND bs=4 toks=2048], step[MIXED bs=8]
SGLANG_STEP = re.compile(r"step\[(?P<mode>[A-Z_]{1,40}) bs=(?P<bs>\d{1,9})"
                         r"(?: toks=(?P<toks>\d{1,12}))?\]")
SGLANG_LAUNCH = "scheduler.run_batch"
_WAITS_INSIDE = {"scheduler.process_batch_result", "process_batch_result"}   # SGLang's
WAIT_JOIN_US = 5.0          # waits closer than this are one
_PY_NAME = re.compile(r"(?P<file>.{0,400}?)\(\d{1,9}\): (?P<func>[\w.<>]{1,200})")
_STEP = re.compile(r"ProfilerStep#\d{1,12}")


@dataclass
class HostPhase:
    """One named phase of the host: its name as the trace gives it, its role (None: unknown)."""

    name: str
    role: str | None
    start: float
    end: float


def phase_of(name: str, cat: str) -> tuple[str, str | None] | None:
    """(phase name, role) when a host event is a named phase (a python function only when it is
    one of the scheduler functions above, in that engine's package), else None."""
    if cat == "python_function":
        match = _PY_NAME.fullmatch(name)
        if match is None:
            return None
        path, func = match.group("file").replace("\\", "/"), match.group("func")
        for package, functions in _FUNCTIONS.items():
            if func in functions and package in path and not (
                    package == "sglang/" and "minisgl/" in path):
                return func, functions[func]
        return None
    if cat == "user_annotation" and not _STEP.fullmatch(name) \
            and not SGLANG_STEP.fullmatch(name):
        return name, _RANGES.get(name)
    return None


def phases(events: Sequence[tuple[str, str, float, float]],
           waits: Sequence[tuple[str, float, float]] = ()) -> list[HostPhase]:
    """The phases to draw on one thread's lane from its (name, category, start, end) events: the
    outermost named ones (giving way to inner ones of other roles), SGLang's step marks inside
    its ``scheduler.run_batch`` and its GPU ``waits`` inside ``process_batch_result``."""
    named = sorted((HostPhase(*found, start, end) for name, cat, start, end in events
                    if (found := phase_of(name, cat)) is not None),
                   key=lambda p: (p.start, -p.end))
    marks = [HostPhase(name, Phase.LAUNCH, start, end) for name, cat, start, end in events
             if cat == "user_annotation" and SGLANG_STEP.fullmatch(name)]
    held = _joined(sorted(waits, key=lambda w: w[1]))
    out = []
    for phase in _outermost(named):
        inner = marks if phase.name == SGLANG_LAUNCH else held if phase.name in _WAITS_INSIDE \
            else []
        out += _carve(phase, [p for p in inner if phase.start <= p.start and p.end <= phase.end])
    return out


def _joined(waits: Sequence[tuple[str, float, float]]) -> list[HostPhase]:
    """Waits as phases, calls less than ``WAIT_JOIN_US`` apart as one, named by them."""
    out: list[HostPhase] = []
    calls: list[str] = []
    for call, start, end in waits:
        if out and start - out[-1].end < WAIT_JOIN_US:
            out[-1].end = max(out[-1].end, end)
            if call not in calls:
                calls.append(call)
                out[-1].name += f" + {call}"
            continue
        calls = [call]
        out.append(HostPhase(f"wait: {call}", Phase.WAIT, start, end))
    return out


def _carve(outer: HostPhase, inner: list[HostPhase]) -> list[HostPhase]:
    """``outer`` in pieces around the ``inner`` phases inside it, and those between."""
    out, cursor = [], outer.start
    for phase in sorted(inner, key=lambda p: p.start):
        if phase.start < cursor:
            continue
        if phase.start > cursor:
            out.append(HostPhase(outer.name, outer.role, cursor, phase.start))
        out.append(phase)
        cursor = phase.end
    if cursor < outer.end or not out:
        out.append(HostPhase(outer.name, outer.role, cursor, outer.end))
    return out


def _outermost(named: list[HostPhase]) -> list[HostPhase]:
    out: list[HostPhase] = []
    i = 0
    while i < len(named):
        outer = named[i]
        j = i + 1
        inner = []
        while j < len(named) and named[j].start < outer.end:
            inner.append(named[j])
            j += 1
        roles = {p.role for p in inner if p.role is not None}
        if roles and roles != {outer.role}:
            out += _outermost(inner)           # drawn as the phases it holds
        else:
            out.append(outer)
        i = j
    return out


# ---- between the phases: the thread's ops, and its waits for the GPU ------------------------

def top_level(events: list[Event]) -> list[Event]:
    """A thread's outermost events."""
    out, end = [], -math.inf
    for event in sorted(events, key=lambda e: (e.ts, -e.dur)):
        if event.ts >= end:               # starts after the current outermost one has ended
            out.append(event)
            end = event.end
    return out


def outside(events: list[Event], phases: list[HostPhase]) -> list[Event]:
    """The events (sorted by start) that overlap none of the phases (sorted, disjoint)."""
    out, i = [], 0
    for event in events:
        while i < len(phases) and phases[i].end <= event.ts:
            i += 1
        if i == len(phases) or phases[i].start >= event.end:
            out.append(event)
    return out


def gpu_waits(trace: Trace, launches: dict[int, Event | None]) -> dict[tuple, list[tuple]]:
    """Per host thread, its calls that waited for the GPU, as (name, start, end): synchronising
    calls, synchronous or pageable copies, and polls."""
    pageable = {id(call) for i, call in launches.items()
                if call is not None and "Pageable" in trace.gpu[i].name}
    found: dict[tuple, list[tuple]] = defaultdict(list)
    queries: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for event in trace.host:
        if event.cat not in ("cuda_runtime", "cuda_driver"):
            continue
        copy = "Memcpy" in event.name
        if "Synchronize" in event.name or (copy and ("Async" not in event.name
                                                     or id(event) in pageable)):
            found[event.thread].append((event.name, event.ts, event.end))
        elif any(word in event.name for word in trace_loop.POLLING):
            queries[event.thread].append((event.ts, event.end))
    for thread, calls in queries.items():
        found[thread] += [("cudaEventQuery", a, b) for a, b in trace_loop.polls(calls)]
    return found


def host_ops(events: list[Event], lane: str, step_of: Callable[[float], int], join: float,
             waits: Sequence[tuple]) -> list[Span]:
    """A thread's outermost ops as spans on ``lane``, those of one step less than ``join`` apart
    drawn as one, named by its longest ("aten::linear +37"); an op that waited for the GPU stays
    a span of its own."""
    blocked = sorted((start, end) for _, start, end in waits)
    out: list[Span] = []
    longest: Event | None = None
    count = 0
    for event in events:
        i = bisect.bisect_left(blocked, (event.ts, -math.inf))
        waited = (i < len(blocked) and blocked[i][0] < event.end) or (
            i > 0 and blocked[i - 1][1] > event.ts)
        step = step_of(event.ts)
        last = out[-1] if out else None
        if last is not None and longest is not None and not waited and last.step == step \
                and event.ts - last.end_us < join:
            last.end_us = max(last.end_us, event.end)
            count += 1
            if event.dur > longest.dur:
                longest = event
            last.phase = short_name(f"{longest.name} +{count - 1}")
            continue
        out.append(Span(lane, short_name(event.name), step, event.ts, event.end))
        longest, count = (None, 0) if waited else (event, 1)
    return out
