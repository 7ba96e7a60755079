"""Chrome traces in: our own exports, and ``torch.profiler`` traces of any engine (SGLang's,
vLLM's, transformers' ``generate``), as runs of the record schema.

A trace of our own (``record.chrome_trace``) comes back as the runs it was written from. A
profiler trace becomes one run:

- **GPU lanes**: every CUDA stream that ran a kernel, memcpy or memset (one lane per stream);
- **CPU lanes**: every host thread that launched GPU work, with its top-level events;
- **steps**: ``ProfilerStep#N`` ranges where the trace has them; otherwise one step per CUDA
  graph launch; otherwise one per launch of the *step marker*, the kernel that runs once per
  forward at the most regular pace (the embedding lookup, the lm_head GEMM, the sampler...);
  each GPU event belongs to the step in which it was launched.

The metrics are ``record.metrics``' own, so a production engine's idle gaps are measured exactly
like ours; what a trace cannot tell (tokens, the scheduler's own phases) is said in the run's
``notes``. Bounded in size, depth, lanes and spans: a hostile file gets a clear error.

Standard library only: no torch needed to read a trace.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
import statistics
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from record.files import DEFAULT_MAX_BYTES, FileTooLarge, read_bounded
from record.metrics import compute_metrics
from record.recorder import Span
from record.run_record import run_dict

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}  # old kineto: Memcpy
HOST_CATEGORIES = {"cpu_op", "user_annotation", "python_function", "cuda_runtime",
                   "cuda_driver", "ac2g_host"}
MAX_PHASE_CHARS = 80
MAX_LANES = 64              # GPU streams + CPU threads in one import
MAX_SPANS = 150_000         # spans kept for drawing (the metrics use every event)
NO_GPU_MESSAGE = ("no GPU kernel, memcpy or memset events: was the profiler run with "
                  "ProfilerActivity.CUDA?")
_STEP_NAME = re.compile(r"ProfilerStep#(\d{1,12})")
_GRAPH_LAUNCH = ("cudaGraphLaunch", "cuGraphLaunch")
MARKER_MAX_CV = 0.35        # a step marker's launches must come at a steady pace


class TraceImportError(ValueError):
    """A trace that cannot be imported; the message says why, for a human."""


# ---- bytes -> events --------------------------------------------------------------------------

def _read_limited(source: bytes | str | os.PathLike[str], max_bytes: int) -> bytes:
    """The trace's bytes, gunzipped if needed, refusing anything over ``max_bytes``."""
    try:
        return read_bounded(source, max_bytes, what="trace")
    except FileTooLarge as error:
        raise TraceImportError(f"{error}; profile fewer steps (e.g. a shorter torch.profiler "
                               "schedule) and try again") from None
    except OSError as error:
        raise TraceImportError(f"cannot read trace file: {error}") from None
    except ValueError as error:
        raise TraceImportError(str(error)) from None


def _parse_events(data: bytes) -> list[Any]:
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise TraceImportError("not a JSON trace (nor gzip-compressed JSON): the file is not "
                               "text") from None
    except json.JSONDecodeError as error:
        raise TraceImportError(f"not a JSON trace (nor gzip-compressed JSON): {error.msg} at "
                               f"line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise TraceImportError("the JSON nests deeper than any trace does") from None
    if isinstance(doc, list):  # the Chrome trace "JSON array" format: events only
        return doc
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise TraceImportError('JSON without "traceEvents": not a Chrome trace such as '
                               "torch.profiler's export_chrome_trace writes")
    if not isinstance(doc["traceEvents"], list):
        raise TraceImportError('"traceEvents" is not a list of events')
    return doc["traceEvents"]


# ---- events -> one pass over them -------------------------------------------------------------

@dataclass(slots=True)
class _Event:
    name: str
    cat: str
    thread: tuple[Hashable, Hashable]     # (pid, tid), made hashable
    ts: float
    dur: float
    args: dict

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _key(value: Any) -> Hashable:
    """A pid or tid as a dict key: kineto writes numbers or strings; a file may write anything."""
    return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) \
        else json.dumps(value, sort_keys=True, default=str)[:64]


def _finite(value: Any) -> float | None:
    """A finite float from a number or numeric string (real traces have both); else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _number(value: Any) -> float | None:
    """``_finite`` with a fast path for the JSON floats and ints nearly every event has."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        return float(value)
    return _finite(value)


def _short(name: Any) -> str:
    name = " ".join(str(name)[:4 * MAX_PHASE_CHARS].split())
    return name if len(name) <= MAX_PHASE_CHARS else name[:MAX_PHASE_CHARS - 3] + "..."


class _Trace:
    """The parts of a profiler trace this import needs, collected in one pass."""

    def __init__(self, events: list[Any]) -> None:
        self.gpu: list[_Event] = []
        self.host: list[_Event] = []
        self.launches: dict[Hashable, _Event] = {}           # correlation id -> launch call
        self.flow_starts: dict[Hashable, float] = {}           # "ac2g" flow id -> host time
        self.flow_ends: dict[tuple, Hashable] = {}             # (thread, ts) -> flow id
        self.process_names: dict[Hashable, list[str]] = defaultdict(list)
        self.thread_names: dict[tuple, str] = {}
        for event in events:
            if isinstance(event, dict):
                self._add(event)

    def _add(self, event: dict) -> None:
        ph = event.get("ph", "X")
        if ph == "X":                              # most events: the fast path first
            self._add_complete(event)
            return
        cat = str(event.get("cat", "")).lower()
        thread = (_key(event.get("pid")), _key(event.get("tid")))
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if ph == "M":
            label = args.get("name") or args.get("labels")
            if event.get("name") == "thread_name" and label:
                self.thread_names[thread] = _short(label)
            elif event.get("name") in ("process_name", "process_labels") and label:
                self.process_names[thread[0]].append(_short(label))
            return
        if ph in ("s", "f") and cat == "ac2g":   # flow arrows: launch (s) -> kernel (f)
            ts = _finite(event.get("ts"))
            if ts is not None and isinstance(event.get("id"), (int, str)):
                if ph == "s":
                    self.flow_starts[event["id"]] = ts
                else:
                    self.flow_ends[(thread, ts)] = event["id"]

    def _add_complete(self, event: dict) -> None:
        """A complete ("X") event: GPU work, a host event, or nothing this import reads."""
        cat = event.get("cat", "")
        cat = cat.lower() if type(cat) is str else str(cat).lower()
        gpu = cat in GPU_CATEGORIES
        name = event.get("name", "")
        name = name if type(name) is str else str(name)
        if not gpu and cat not in HOST_CATEGORIES and not _STEP_NAME.fullmatch(name):
            return                                 # neither GPU work nor a host event we read
        ts, dur = _number(event.get("ts")), _number(event.get("dur"))
        if ts is None or dur is None or dur < 0:
            return
        pid, tid = event.get("pid"), event.get("tid")
        thread = (pid if type(pid) is int else _key(pid), tid if type(tid) is int else _key(tid))
        args = event.get("args")
        item = _Event(name, cat, thread, ts, dur, args if type(args) is dict else {})
        if gpu:
            self.gpu.append(item)
            return
        self.host.append(item)
        correlation = item.args.get("correlation")
        if cat in ("cuda_runtime", "cuda_driver") and isinstance(correlation, (int, str)):
            self.launches[correlation] = item

    def launch_of(self, event: _Event) -> _Event | None:
        """The host call that launched a GPU event (its correlation id, else its flow arrow)."""
        correlation = event.args.get("correlation")
        if isinstance(correlation, (int, str)) and correlation in self.launches:
            return self.launches[correlation]
        flow = self.flow_ends.get((event.thread, event.ts))
        if flow is not None and flow in self.flow_starts:
            return _Event("launch", "cuda_runtime", ("?", "?"), self.flow_starts[flow], 0.0, {})
        return None


# ---- lanes ------------------------------------------------------------------------------------

def _gpu_lanes(trace: _Trace) -> dict[tuple, str]:
    """One lane per CUDA stream, labelled like "GPU 0 stream 7" (linear in the streams)."""
    first: dict[tuple, _Event] = {}
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
        name = _short(f"{device} {stream}")
        if name in taken:                 # two streams with one label must not merge
            name = _short(f"{name} (pid {thread[0]} tid {thread[1]})")
        taken.add(name)
        names[thread] = name
    return names


def _sortable(value: Hashable) -> tuple[int, float, str]:
    number = _finite(value)
    return (0, number, "") if number is not None else (1, 0.0, str(value))


def _cpu_lanes(trace: _Trace, launching: set[tuple]) -> dict[tuple, str]:
    """One lane per host thread that launched GPU work (or marked steps)."""
    marked = {e.thread for e in trace.host if _STEP_NAME.fullmatch(e.name)}
    names = {}
    for thread in sorted(launching | marked, key=lambda t: (str(t[0]), _sortable(t[1]))):
        label = trace.thread_names.get(thread) or f"thread {thread[1]}"
        names[thread] = _short(f"CPU {label}")
    return names


def _top_level(events: list[_Event]) -> list[_Event]:
    """A thread's outermost events (those no earlier event of the thread contains)."""
    out, end = [], -math.inf
    for event in sorted(events, key=lambda e: (e.ts, -e.dur)):
        if event.ts >= end:               # starts after the current outermost one has ended
            out.append(event)
            end = event.end
    return out


# ---- steps ------------------------------------------------------------------------------------

@dataclass
class _Steps:
    """Step boundaries on the host clock: step ``numbers[i]`` starts at ``starts[i]``."""

    starts: list[float]
    numbers: list[int]
    how: str                           # "profiler_step" | "graph_launch" | "marker" | "none"
    marker: str = ""
    ends: list[float] | None = None    # ProfilerStep ranges end; other steps run to the next

    def at(self, t: float) -> int:
        """The step running at host time ``t`` (-1 before the first, or outside every range)."""
        i = bisect.bisect_right(self.starts, t) - 1
        if i < 0 or (self.ends is not None and t > self.ends[i]):
            return -1
        return self.numbers[i]


def _find_steps(trace: _Trace, launch_times: dict[int, float]) -> _Steps:
    annotated = sorted((e.ts, int(m.group(1)), e.end) for e in trace.host
                       if (m := _STEP_NAME.fullmatch(e.name)))
    if annotated:
        return _Steps([t for t, _, _ in annotated], [n for _, n, _ in annotated],
                      "profiler_step", ends=[end for _, _, end in annotated])
    graphs = sorted(e.ts for e in trace.host if e.name in _GRAPH_LAUNCH)
    if len(graphs) >= 3:
        return _Steps(graphs, list(range(1, len(graphs) + 1)), "graph_launch")
    marker = _step_marker(trace, launch_times)
    if marker is not None:
        name, times = marker
        return _Steps(times, list(range(1, len(times) + 1)), "marker", _short(name))
    return _Steps([], [], "none")


def _step_marker(trace: _Trace, launch_times: dict[int, float]) -> tuple[str, list[float]] | None:
    """The kernel that runs once per forward: of the kernels launched at a steady pace (their
    launch intervals vary by less than ``MARKER_MAX_CV``), the one launched least often."""
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


# ---- the run ----------------------------------------------------------------------------------

def import_profiler_trace(source: bytes | str | os.PathLike[str],
                          max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """A torch.profiler Chrome trace (a path, or its bytes; JSON or .gz) as one run dict.

    Raises ``TraceImportError`` for files over ``max_bytes`` (also after unzipping), text that
    is not JSON, JSON that is not a trace, traces without GPU events, and too many lanes.
    """
    label = f"imported: {Path(source).name}" if isinstance(source, (str, os.PathLike)) \
        else "imported"
    return _profiler_run(_parse_events(_read_limited(source, max_bytes)), label)


def _profiler_run(events: list[Any], label: str) -> dict[str, Any]:
    trace = _Trace(events)
    if not trace.gpu:
        raise TraceImportError(NO_GPU_MESSAGE)
    launches = {i: trace.launch_of(e) for i, e in enumerate(trace.gpu)}
    launch_times = {i: call.ts for i, call in launches.items() if call is not None}
    gpu_names = _gpu_lanes(trace)
    launching = {call.thread for call in launches.values() if call is not None} - {("?", "?")}
    cpu_names = _cpu_lanes(trace, launching)
    if len(gpu_names) + len(cpu_names) > MAX_LANES:
        raise TraceImportError(f"the trace has {len(gpu_names)} GPU streams and "
                               f"{len(cpu_names)} launching threads; this page draws at most "
                               f"{MAX_LANES} lanes")
    steps = _find_steps(trace, launch_times)
    spans = [Span(gpu_names[e.thread], _short(e.name),
                  steps.at(launch_times.get(i, e.ts)), e.ts, e.end)
             for i, e in enumerate(trace.gpu)]
    by_thread: dict[tuple, list[_Event]] = defaultdict(list)
    for event in trace.host:
        if event.thread in cpu_names and not _STEP_NAME.fullmatch(event.name):
            by_thread[event.thread].append(event)
    for thread, host_events in by_thread.items():
        spans += [Span(cpu_names[thread], _short(e.name), steps.at(e.ts), e.ts, e.end)
                  for e in _top_level(host_events)]
    t0 = min([s.start_us for s in spans] + steps.starts[:1])    # the first step starts at 0
    for span in spans:
        span.start_us -= t0
        span.end_us -= t0
    spans.sort(key=lambda s: (s.start_us, s.lane))
    gpu_lanes = list(gpu_names.values())
    metrics = compute_metrics(spans, [], gpu_lanes=gpu_lanes)      # every span, before thinning
    if len(spans) > MAX_SPANS:
        spans = _thin(spans)
    run = run_dict("imported", 1, label, spans, metrics,
                   lanes=list(cpu_names.values()) + gpu_lanes, gpu_lanes=gpu_lanes)
    run["notes"] = _notes(steps, metrics, bool(cpu_names))
    return run


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


def _notes(steps: _Steps, metrics: dict[str, Any], cpu_lanes: bool) -> list[dict[str, Any]]:
    """What the import found and what a trace cannot tell, as text keys with values (viz says
    them in the reader's language)."""
    notes = [{"key": f"note_steps_{steps.how}", "steps": len(steps.numbers),
              "marker": steps.marker}]
    if steps.how != "none" and metrics.get("t_fwd_us"):
        notes.append({"key": "note_terms_from_gaps"})
    if not cpu_lanes:
        notes.append({"key": "note_no_cpu_lanes"})
    notes.append({"key": "note_no_tokens"})
    return notes


def import_trace(data: bytes, name: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A trace's runs (ours come back as the runs they were written from, any other as one)
    and what it says about where it was made."""
    from record.chrome_trace import read_own_trace, trace_env

    doc_events = _parse_events(data)
    own = read_own_trace(doc_events)
    if own:
        return own, trace_env(doc_events)
    run = _profiler_run(doc_events, f"imported: {name}")
    run["source"] = name
    return [run], _kineto_env(data)


def _kineto_env(data: bytes) -> dict[str, str]:
    """torch.profiler writes the GPU's name in ``deviceProperties`` (the document's head)."""
    match = re.search(rb'"deviceProperties"\s*:\s*\[\s*\{[^}]*?"name"\s*:\s*"([^"]{1,80})"',
                      data[:1 << 20])
    return {"device_name": match.group(1).decode("utf-8", "replace")} if match else {}


def record_from_trace(data: bytes, name: str, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """A trace's bytes (already read and unzipped) as a schema-1 record."""
    from record.run_record import make_record

    del max_bytes                                    # the caller bounded the bytes already
    try:
        runs, found = import_trace(data, name)
    except TraceImportError as error:
        raise ValueError(f"not a torch.profiler trace or run record: {error}") from None
    env = {"device_name": "unknown", "torch_version": "unknown", "date": "unknown", **found}
    return make_record(env, {"source": name}, runs)
