"""The steps of an imported trace, and one step as the step-through shows it. ``find_steps`` takes,
in this order: SGLang's own ``step[...]`` marks; ``ProfilerStep#N`` ranges; one step per CUDA graph
launch; one per launch of the *step marker*, the kernel launched once per forward at the most
regular pace."""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TypedDict

from record.imported import imported
from record.imported.host_phases import SGLANG_STEP
from record.imported.profiler_events import STEP_NAME, Event, Trace, short_name
from record.metrics import union_intervals
from record.schema import RunDict
from record.window import gpu_lanes, joined_gap_us

GRAPH_LAUNCH = ("cudaGraphLaunch", "cuGraphLaunch")
MARKER_MAX_CV = 0.35        # a step marker's launches must come at a steady pace
PREFILL_SHARE = 0.5         # GPU work before the first marked step, of a step's: a forward
# SGLang's loop iteration opens with the first of these it calls (scheduler.py, event_loop_*)
_SGLANG_OPENERS = ("scheduler.recv_requests", "scheduler.process_input_requests",
                   "scheduler.get_next_batch_to_run")
_SGLANG_PROCESS = "scheduler.process_batch_result"
_SGLANG_COPY = "copy_result_to_cpu"


@dataclass
class Steps:
    """Step boundaries on the host clock: step ``numbers[i]`` starts at ``starts[i]``."""

    starts: list[float]
    numbers: list[int]
    how: str               # "sglang" | "profiler_step" | "graph_launch" | "marker" | "none"
    marker: str = ""
    ends: list[float] | None = None    # ProfilerStep ranges end; other steps run to the next
    names: list[str] = field(default_factory=list)     # SGLang's name of each step's forward
    processed: list[tuple[float, float, int]] = field(default_factory=list)
    # SGLang's process_batch_result ranges: (start, end, the step whose result it processed)
    overlap_marked: bool = False       # SGLang marked its overlap loop (copy_result_to_cpu)
    prefill: bool = False              # a forward before the first marked step became step 1

    def at(self, t: float) -> int:
        """The step running at host time ``t`` (-1: none)."""
        i = bisect.bisect_right(self.starts, t) - 1
        if i < 0 or (self.ends is not None and t > self.ends[i]):
            return -1
        return self.numbers[i]

    def processed_by(self, t: float) -> int | None:
        """The step whose result the process_batch_result running at ``t`` processed (None: none
        runs then; -1: launched before the trace)."""
        i = bisect.bisect_right(self.processed, (t, math.inf, 0)) - 1
        if i < 0 or t > self.processed[i][1]:
            return None
        return self.processed[i][2]


def find_steps(trace: Trace, launch_times: dict[int, float]) -> Steps:
    sglang = _sglang_steps(trace)
    if sglang is not None:
        return sglang
    annotated = sorted((e.ts, int(m.group(1)), e.end) for e in trace.host
                       if (m := STEP_NAME.fullmatch(e.name)))
    if annotated:
        return Steps([t for t, _, _ in annotated], [n for _, n, _ in annotated],
                     "profiler_step", ends=[end for _, _, end in annotated])
    graphs = sorted(e.ts for e in trace.host if e.name in GRAPH_LAUNCH)
    if len(graphs) >= 3:
        return _with_prefill(trace, launch_times, Steps(graphs, [], "graph_launch"))
    marker = _step_marker(trace, launch_times)
    if marker is not None:
        name, times = marker
        return _with_prefill(trace, launch_times, Steps(times, [], "marker", short_name(name)))
    return Steps([], [], "none")


def _sglang_steps(trace: Trace) -> Steps | None:
    """Steps from SGLang's ``step[...]`` marks, each beginning where its loop iteration began."""
    marks = [e for e in trace.host if e.cat == "user_annotation" and SGLANG_STEP.fullmatch(e.name)]
    if not marks:
        return None
    thread = Counter(e.thread for e in marks).most_common(1)[0][0]
    ranges: dict[str, list[Event]] = defaultdict(list)
    for event in trace.host:
        if event.thread == thread and event.cat == "user_annotation":
            ranges[event.name].append(event)
    openers = next((sorted(e.ts for e in ranges[name]) for name in _SGLANG_OPENERS
                    if ranges.get(name)), [])
    launches = sorted((e.ts, e.end) for e in ranges.get("scheduler.run_batch", []))
    starts, names, previous = [], [], -math.inf
    for mark in sorted((e for e in marks if e.thread == thread), key=lambda e: e.ts):
        i = bisect.bisect_right(launches, (mark.ts, math.inf)) - 1
        begin = launches[i][0] if i >= 0 and launches[i][1] >= mark.end else mark.ts
        j = bisect.bisect_right(openers, begin) - 1       # the iteration's first phase
        start = openers[j] if j >= 0 and openers[j] > previous else begin
        if start <= previous:          # a second mark in one iteration (speculative decoding)
            start = begin if begin > previous else mark.ts
        starts.append(start)
        names.append(mark.name)
        previous = start
    steps = Steps(starts, list(range(1, len(starts) + 1)), "sglang", names=names,
                  overlap_marked=bool(ranges.get(_SGLANG_COPY)))
    steps.processed = _processed(steps, openers, ranges.get(_SGLANG_PROCESS, []))
    return steps


def _processed(steps: Steps, openers: list[float],
               processing: list[Event]) -> list[tuple[float, float, int]]:
    """Which step each ``process_batch_result`` processed: the oldest not yet processed among those
    launched by then (in the overlap loop, by the iteration before)."""
    queue: list[int] = []
    pushed, out = 0, []
    for event in sorted(processing, key=lambda e: e.ts):
        j = bisect.bisect_right(openers, event.ts) - 1
        opener = openers[j] if j >= 0 else event.ts       # where this iteration began
        while pushed < len(steps.starts) and (
                steps.starts[pushed] < opener or (not steps.overlap_marked
                                                  and steps.starts[pushed] <= event.ts)):
            queue.append(steps.numbers[pushed])
            pushed += 1
        out.append((event.ts, event.end, queue.pop(0) if queue else -1))
    return out


def _with_prefill(trace: Trace, launch_times: dict[int, float], steps: Steps) -> Steps:
    """``steps`` numbered from 1; GPU work launched before the first is a step of its own where it
    is a forward's worth (the prefill)."""
    first = steps.starts[0]
    busy: dict[int, list[tuple[float, float]]] = defaultdict(list)
    before: list[tuple[float, float, float]] = []
    for i, event in enumerate(trace.gpu):
        launch = launch_times.get(i)
        if launch is None:
            continue
        if launch < first:
            before.append((launch, event.ts, event.end))
        else:
            busy[bisect.bisect_right(steps.starts, launch) - 1].append((event.ts, event.end))
    per_step = {i: sum(b - a for a, b in union_intervals(found)) for i, found in busy.items()}
    prior = sum(b - a for a, b in union_intervals([(a, b) for _, a, b in before]))
    if before and per_step:
        typical = PREFILL_SHARE * statistics.median(per_step.values())
        if prior >= typical and per_step.get(len(steps.starts) - 1, 0.0) >= typical:
            steps.starts = [min(launch for launch, _, _ in before)] + steps.starts
            steps.prefill = True
    steps.numbers = list(range(1, len(steps.starts) + 1))
    return steps


def _step_marker(trace: Trace, launch_times: dict[int, float]) -> tuple[str, list[float]] | None:
    """The kernel that runs once per forward: of those launched at a steady pace, the rarest."""
    by_name: dict[str, list[float]] = defaultdict(list)
    for i, event in enumerate(trace.gpu):
        if event.cat == "kernel" and i in launch_times:
            by_name[event.name].append(launch_times[i])
    best = None
    for name, times in by_name.items():
        if len(times) < 3:
            continue
        times.sort()
        gaps = [b - a for a, b in zip(times, times[1:])]
        mean = statistics.fmean(gaps)
        if mean <= 0 or statistics.pstdev(gaps) / mean > MARKER_MAX_CV:
            continue
        if best is None or (len(times), name) < (len(best[1]), best[0]):
            best = (name, times)
    return best


# ---- one step, as the step-through shows it ---------------------------------------------------

class TraceStep(TypedDict):
    """One step of an imported run, as the step-through says it (µs on the run's clock)."""

    start: float                        # its GPU work's start and end
    end: float
    busy_us: float
    items: int                          # kernels, copies
    step_us: float                      # to the next step's GPU work
    wait_us: float                      # the GPU idle in it
    late: list[tuple[float, float]]     # its GPU work after the host began the next step
    next: int | None                    # that next step's number
    host: list[tuple[str, str, float]]  # its named host phases: name, role, µs


def trace_step(run: RunDict, step: int) -> TraceStep | None:
    """Step ``step`` of an imported run; None where the step launched no GPU work."""
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
    host = {int(pair[0]): float(pair[1]) for pair in imported(run).get("step_starts") or []
            if isinstance(pair, (list, tuple)) and len(pair) == 2}     # step -> the host began it
    following = sorted(n for n in host if n > step)
    late: list[tuple[float, float]] = []
    if following:
        begun = host[following[0]]
        late = [(max(a, begun), b) for a, b in busy if b > begun]
    roles = imported(run).get("phase_roles") or {}
    named: dict[str, float] = {}          # a phase drawn in pieces (a wait cut out) said once
    for s in spans:
        if s.get("step") == step and s["lane"] not in lanes and s["phase"] in roles:
            named[s["phase"]] = named.get(s["phase"], 0.0) + s["end_us"] - s["start_us"]
    return {"start": start, "end": end, "busy_us": busy_us, "items": len(work),
            "step_us": max(stop - start, end - start), "wait_us": max(stop - start - busy_us, 0.0),
            "late": late, "next": following[0] if following else None,
            "host": [(name, roles[name], us) for name, us in named.items()]}
