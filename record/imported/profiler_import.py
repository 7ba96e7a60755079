"""Chrome traces in: our own exports come back as their runs; a ``torch.profiler`` trace of any
engine becomes one run, a GPU lane per CUDA stream and a CPU lane per host thread that launched
work, each GPU event in the step that launched it. The metrics are ``record.metrics``' own, so
another engine's idle gaps are measured exactly like ours; what a trace cannot tell is in its
``notes``."""

from __future__ import annotations

import bisect
import os
import re
from collections import defaultdict
from collections.abc import Hashable
from pathlib import Path

from record.bounded_read import DEFAULT_MAX_BYTES
from record.imported import host_phases, imported, trace_loop
from record.imported.host_phases import SGLANG_STEP
from record.imported.profiler_events import (  # noqa: F401 - the limits and error said from here too
    MAX_PHASE_CHARS,
    STEP_NAME,
    Event,
    Trace,
    TraceImportError,
    finite_number,
    parse_events,
    read_limited,
    short_name,
)
from record.imported.trace_loop import Note
from record.imported.trace_steps import GRAPH_LAUNCH, Steps, find_steps
from record.metrics import compute_metrics
from record.recorder import Span
from record.run_record import run_dict
from record.schema import Loop, Metrics, Phase, RecordDict, RunDict

MAX_LANES = 64              # GPU streams + CPU threads in one import
MAX_SPANS = 150_000         # spans kept for drawing (the metrics use every event)
NO_GPU_MESSAGE = ("no GPU kernel, memcpy or memset events: was the profiler run with "
                  "ProfilerActivity.CUDA?")


# ---- lanes ------------------------------------------------------------------------------------

def _gpu_lanes(trace: Trace) -> dict[tuple, str]:
    """One lane per CUDA stream, labelled like "GPU 0 stream 7"."""
    first: dict[tuple, Event] = {}
    for event in trace.gpu:
        first.setdefault(event.thread, event)
    names: dict[tuple, str] = {}
    taken: set[str] = set()
    for thread in sorted(first, key=lambda t: (str(t[0]), _sortable(t[1]))):
        args = first[thread].args
        # Kineto names the GPU's process "GPU 0"; else use the kernel's device argument.
        device = next((p for p in trace.process_names.get(thread[0], []) if "GPU" in p), None)
        if device is None:
            device = f"GPU {args['device']}" if isinstance(args.get("device"), int) \
                else f"pid {thread[0]}"
        stream = trace.thread_names.get(thread) or f"stream {args.get('stream', thread[1])}"
        name = short_name(f"{device} {stream}")
        if name in taken:                 # two streams with one label must not merge
            name = short_name(f"{name} (pid {thread[0]} tid {thread[1]})")
        taken.add(name)
        names[thread] = name
    return names


def _sortable(value: Hashable) -> tuple[int, float, str]:
    number = finite_number(value)
    return (0, number, "") if number is not None else (1, 0.0, str(value))


def _cpu_lanes(trace: Trace, launching: set[tuple]) -> dict[tuple, str]:
    """One lane per host thread that launched GPU work (or marked steps)."""
    marked = {e.thread for e in trace.host
              if STEP_NAME.fullmatch(e.name) or SGLANG_STEP.fullmatch(e.name)}
    names = {}
    for thread in sorted(launching | marked, key=lambda t: (str(t[0]), _sortable(t[1]))):
        label = trace.thread_names.get(thread) or f"thread {thread[1]}"
        names[thread] = short_name(f"CPU {label}")
    return names


def _phase_step(steps: Steps, phase: host_phases.HostPhase) -> int:
    """The step a host phase belongs to: the one it launches (where steps start at launches), the
    one whose result it processed (SGLang), else the one running when it began."""
    if steps.how in ("graph_launch", "marker") and phase.role in (Phase.RECEIVE, Phase.SCHEDULE,
                                                                   Phase.LAUNCH):
        i = bisect.bisect_left(steps.starts, phase.start)
        return steps.numbers[i] if i < len(steps.numbers) else -1
    if phase.role in (Phase.PROCESS_LAST, Phase.WAIT) \
            and (processed := steps.processed_by(phase.start)) is not None:
        return processed
    return steps.at(phase.start)


def _phase_span(lane: str, step: int, phase: host_phases.HostPhase) -> Span:
    """A host phase as a span; SGLang's forward mark gives its batch size and tokens."""
    span = Span(lane, short_name(phase.name), step, phase.start, phase.end)
    if (mark := SGLANG_STEP.fullmatch(phase.name)) is not None:
        span.batch_size = int(mark.group("bs"))
        span.num_tokens = int(mark.group("toks") or 0)
    return span


# ---- the run ----------------------------------------------------------------------------------

def import_profiler_trace(source: bytes | str | os.PathLike[str],
                          max_bytes: int = DEFAULT_MAX_BYTES) -> RunDict:
    """A torch.profiler Chrome trace (a path, or its bytes) as one run dict."""
    label = f"imported: {Path(source).name}" if isinstance(source, (str, os.PathLike)) \
        else "imported"
    return _profiler_run(parse_events(read_limited(source, max_bytes)), label)


def _profiler_run(events: list[object], label: str) -> RunDict:
    trace = Trace(events)
    if not trace.gpu:
        raise TraceImportError(NO_GPU_MESSAGE)
    launches = {i: trace.launch_of(e) for i, e in enumerate(trace.gpu)}
    launch_times = {i: call.ts for i, call in launches.items() if call is not None}
    gpu_names = _gpu_lanes(trace)
    by_thread: dict[tuple, list[Event]] = defaultdict(list)
    for event in trace.host:
        if not STEP_NAME.fullmatch(event.name):
            by_thread[event.thread].append(event)
    waits = host_phases.gpu_waits(trace, launches)
    named = {thread: found for thread, host_events in by_thread.items()
             if (found := host_phases.phases([(e.name, e.cat, e.ts, e.end)
                                              for e in host_events], waits.get(thread, ())))}
    launching = {call.thread for call in launches.values() if call is not None} - {("?", "?")}
    cpu_names = _cpu_lanes(trace, launching | set(named))
    if len(gpu_names) + len(cpu_names) > MAX_LANES:
        raise TraceImportError(f"the trace has {len(gpu_names)} GPU streams and "
                               f"{len(cpu_names)} launching threads; this page draws at most "
                               f"{MAX_LANES} lanes")
    steps = find_steps(trace, launch_times)
    work = [trace_loop.GpuWork(e.ts, e.end, e.thread, launch_times.get(i),
                               (call := launches[i]) is None or call.name not in GRAPH_LAUNCH)
            for i, e in enumerate(trace.gpu)]
    join, measured = trace_loop.launch_latency_us(work)
    spans = [Span(gpu_names[e.thread], short_name(e.name),
                  steps.at(launch_times.get(i, e.ts)), e.ts, e.end)
             for i, e in enumerate(trace.gpu)]
    roles: dict[str, str] = {}
    for thread, lane in cpu_names.items():
        phases = named.get(thread, [])     # the host's phases, where the trace names them
        for phase in phases:
            spans.append(_phase_span(lane, _phase_step(steps, phase), phase))
            if phase.role:            # plain strings in a record (record.schema)
                roles[short_name(phase.name)] = str(phase.role)
        # Between them, its outermost ops and runtime calls (python functions are the stack
        # above them: the outermost would be the whole loop).
        between = host_phases.outside(host_phases.top_level(
            [e for e in by_thread.get(thread, []) if e.cat != "python_function"]), phases)
        spans += host_phases.host_ops(between, lane, steps.at, join, waits.get(thread, []))
    seen = _loop_seen(trace, work, steps, named, join)
    t0 = min([s.start_us for s in spans] + steps.starts[:1])    # the first step starts at 0
    for span in spans:
        span.start_us -= t0
        span.end_us -= t0
    spans.sort(key=lambda s: (s.start_us, s.lane))
    gpu_lanes = list(gpu_names.values())
    metrics = compute_metrics(spans, [], gpu_lanes=gpu_lanes, join_us=join)   # every span
    if len(spans) > MAX_SPANS:
        spans = _thin(spans)
    run = run_dict(Loop.IMPORTED, 1, label, spans, metrics,
                   lanes=list(cpu_names.values()) + gpu_lanes, gpu_lanes=gpu_lanes)
    extra = imported(run)
    extra["joined_gap_us"] = round(join, 3)
    extra["step_starts"] = [[n, round(ts - t0, 3)] for n, ts in zip(steps.numbers, steps.starts)]
    extra["loop_seen"] = seen
    if roles:
        extra["phase_roles"] = roles
    extra["notes"] = _notes(steps, metrics, bool(cpu_names), seen, join, measured, roles)
    return run


def _loop_seen(trace: Trace, work: list[trace_loop.GpuWork], steps: Steps,
               named: dict[tuple, list[host_phases.HostPhase]],
               join: float) -> trace_loop.LoopSeen:
    """``trace_loop.loop_seen`` over this trace (launching left out: it runs beside the GPU in
    every loop), and the profiler's host events per step."""
    calls = [e for e in trace.host if e.cat in ("cuda_runtime", "cuda_driver")]
    blocking = [(e.ts, e.end) for e in calls if any(word in e.name for word in trace_loop.BLOCKING)]
    # A host that polls (queries an event until it is done) waits as one that blocks does.
    blocking += trace_loop.polls([(e.ts, e.end) for e in calls
                                  if any(word in e.name for word in trace_loop.POLLING)])
    host_work = [(p.start, p.end) for found in named.values() for p in found
                 if p.role not in (None, Phase.LAUNCH, Phase.WAIT)]
    seen = trace_loop.loop_seen(work, blocking, steps.starts, host_work, join)
    times = sorted(e.ts for e in trace.host)
    seen["events_per_step"] = round(trace_loop.events_per_step(times, steps.starts), 1)
    return seen


def _thin(spans: list[Span]) -> list[Span]:
    """Fewer spans to draw: merge same-lane neighbours of a step closer than a widening gap."""
    eps = 1.0
    while len(spans) > MAX_SPANS:
        merged: list[Span] = []
        last: dict[str, Span] = {}
        for span in sorted(spans, key=lambda s: (s.lane, s.start_us)):
            prev = last.get(span.lane)
            if prev is not None and prev.step == span.step and span.start_us - prev.end_us <= eps:
                prev.end_us = max(prev.end_us, span.end_us)
                prev.phase = prev.phase if prev.phase == span.phase else "kernels (merged)"
                continue
            merged.append(span)
            last[span.lane] = span
        spans, eps = sorted(merged, key=lambda s: (s.start_us, s.lane)), eps * 4
    return spans


def _notes(steps: Steps, metrics: Metrics, cpu_lanes: bool, seen: trace_loop.LoopSeen,
           join: float, measured: bool, roles: dict[str, str]) -> list[Note]:
    """What the import found and what a trace cannot tell, as text keys with values."""
    if steps.how == "sglang":
        notes = _sglang_notes(steps, roles)
    else:
        notes = [{"key": f"note_steps_{steps.how}", "steps": len(steps.numbers),
                  "marker": steps.marker}]
    if steps.prefill:
        notes.append({"key": "note_steps_prefill"})
    if steps.how != "none" and metrics.get("t_fwd_us"):
        notes.append({"key": "note_terms_from_gaps"})
    notes += trace_loop.loop_notes(seen)
    notes.append({"key": "note_joined" if measured else "note_joined_fixed",
                  "join": f"{join:.1f}"})
    if roles and steps.how != "sglang":
        notes.append({"key": "note_phases", "phases": ", ".join(sorted(roles))})
    if not cpu_lanes:
        notes.append({"key": "note_no_cpu_lanes"})
    if seen.get("events_per_step"):
        notes.append({"key": "note_profiler_cost", "events": f"{seen['events_per_step']:,.0f}"})
    notes.append({"key": "note_no_tokens"})
    return notes


def _sglang_notes(steps: Steps, roles: dict[str, str]) -> list[Note]:
    """What SGLang's own annotations gave: its steps by mode, its phases, waits and overlap."""
    sizes: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for name in steps.names:
        if (mark := SGLANG_STEP.fullmatch(name)) is not None:
            for key in ("bs", "toks"):
                if mark.group(key) is not None:
                    sizes[mark.group("mode")][key].append(int(mark.group(key)))
    modes = ", ".join(f"{len(found['bs'])} × {mode} ("
                      + ", ".join(f"{key}={_span(values)}" for key, values in found.items()) + ")"
                      for mode, found in sizes.items())
    notes: list[Note] = [{"key": "note_sglang_steps", "steps": len(steps.numbers),
                          "modes": modes}]
    phases = [name for name in host_phases.SGLANG_RANGES if name in roles]
    if phases:
        waits = sorted({call for name, role in roles.items() if role == Phase.WAIT
                        for call in name.removeprefix("wait: ").split(" + ")})
        notes.append({"key": "note_sglang_phases", "phases": ", ".join(phases),
                      "waits": ", ".join(waits) or "–"})
    if steps.overlap_marked:
        notes.append({"key": "note_sglang_overlap"})
    return notes


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}–{high}"


def import_trace(data: bytes, name: str) -> tuple[list[RunDict], dict[str, str]]:
    """A trace's runs and what it says about where it was made."""
    from record.chrome_trace import read_own_trace, trace_env

    doc_events = parse_events(data)
    own = read_own_trace(doc_events)
    if own:
        return own, trace_env(doc_events)
    run = _profiler_run(doc_events, f"imported: {name}")
    imported(run)["source"] = name
    return [run], _kineto_env(data)


def _kineto_env(data: bytes) -> dict[str, str]:
    """torch.profiler writes the GPU's name in ``deviceProperties`` (the document's head)."""
    match = re.search(rb'"deviceProperties"\s*:\s*\[\s*\{[^}]*?"name"\s*:\s*"([^"]{1,80})"',
                      data[:1 << 20])
    return {"device_name": match.group(1).decode("utf-8", "replace")} if match else {}


def record_from_trace(data: bytes, name: str) -> RecordDict:
    """A trace's bytes (already read, bounded and unzipped) as a schema-1 record."""
    from record.run_record import make_record

    try:
        runs, found = import_trace(data, name)
    except TraceImportError as error:
        raise ValueError(f"not a torch.profiler trace or run record: {error}") from None
    env = {"device_name": "unknown", "torch_version": "unknown", "date": "unknown", **found}
    return make_record(env, {"source": name}, runs)
