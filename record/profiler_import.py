"""Chrome traces in: a ``torch.profiler`` Chrome trace (plain JSON or gzip, e.g. SGLang's or
vLLM's profiler output) becomes a run dict of the record schema. Every CUDA stream that ran a
kernel, memcpy or memset becomes a GPU lane; ``ProfilerStep#N`` and ``user_annotation`` ranges
become one ``cpu`` lane. The metrics are the same functions as for our own runs, so a production
engine's idle gaps are measured exactly like ours (token metrics are 0: a trace has no outputs).

Standard library only: no torch needed to read a trace.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from record.files import DEFAULT_MAX_BYTES, FileTooLarge, read_bounded
from record.metrics import compute_metrics
from record.run_record import run_dict
from record.timeline import Span

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}  # old kineto: Memcpy
CPU_CATEGORIES = {"user_annotation"}
MAX_PHASE_CHARS = 80
NO_GPU_MESSAGE = ("no GPU kernel, memcpy or memset events: was the profiler run with "
                  "ProfilerActivity.CUDA?")
_STEP_NAME = re.compile(r"ProfilerStep#(\d+)")


class TraceImportError(ValueError):
    """A trace that cannot be imported; the message says why, for a human."""


# ---- import: bytes -> events ----------------------------------------------------------------

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
    except UnicodeDecodeError as error:
        raise TraceImportError("not a JSON trace (nor gzip-compressed JSON): "
                               "the file is not text") from error
    except json.JSONDecodeError as error:
        raise TraceImportError(f"not a JSON trace (nor gzip-compressed JSON): {error.msg} at "
                               f"line {error.lineno} column {error.colno}") from error
    if isinstance(doc, list):  # the Chrome trace "JSON array" format: events only
        return doc
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise TraceImportError('JSON without "traceEvents": not a Chrome trace such as '
                               "torch.profiler's export_chrome_trace writes")
    if not isinstance(doc["traceEvents"], list):
        raise TraceImportError('"traceEvents" is not a list of events')
    return doc["traceEvents"]


# ---- import: events -> spans ----------------------------------------------------------------

def _number(value: Any) -> float | None:
    """A float from a number or numeric string (real traces have both); None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _order(key: Any) -> tuple[int, float, str]:
    """Sort numeric pids/tids numerically and the rest (kineto uses strings too) after them."""
    number = _number(key)
    return (0, number, "") if number is not None else (1, 0.0, str(key))


def _short(name: Any) -> str:
    name = " ".join(str(name).split())
    return name if len(name) <= MAX_PHASE_CHARS else name[:MAX_PHASE_CHARS - 3] + "..."


def _complete(event: Any) -> tuple[float, float] | None:
    """(ts, dur) of a complete event; B/E/i/f/s/M and events without times are not."""
    if not isinstance(event, dict) or event.get("ph", "X") != "X":
        return None
    ts, dur = _number(event.get("ts")), _number(event.get("dur"))
    if ts is None or dur is None or dur < 0:
        return None
    return ts, dur


class _Trace:
    """The parts of a profiler trace this import needs, collected in one pass."""

    def __init__(self, events: Iterable[Any]) -> None:
        self.gpu: list[dict[str, Any]] = []
        self.cpu: list[dict[str, Any]] = []
        self.launch_ts: dict[Any, float] = {}   # correlation id -> host time of the launch
        # Kineto's "ac2g" flow arrows link a launch (flow start) to its kernel (flow end).
        self.flow_starts: dict[Any, float] = {}                # flow id -> host time
        self.flow_ids: dict[tuple[Any, Any, float], Any] = {}  # flow end (pid, tid, ts) -> id
        self.process_names: dict[tuple[str, Any], str] = {}  # (process_name|labels, pid)
        self.thread_names: dict[tuple[Any, Any], str] = {}    # (pid, tid) -> "stream 7"
        for event in events:
            self._add(event)

    def _add(self, event: Any) -> None:
        if not isinstance(event, dict):
            return
        ph, cat = event.get("ph", "X"), str(event.get("cat", "")).lower()
        if ph == "M":
            self._add_metadata(event)
            return
        if ph in ("s", "f") and cat == "ac2g":  # other flows (e.g. fwdbwd) reuse the same ids
            self._add_flow(event, ph)
            return
        times = _complete(event)
        if times is None:
            return
        item = dict(event, ts=times[0], dur=times[1])
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if cat in GPU_CATEGORIES:
            self.gpu.append(item)
        elif cat in CPU_CATEGORIES or _STEP_NAME.fullmatch(str(event.get("name", ""))):
            self.cpu.append(item)
        elif "correlation" in args:  # cudaLaunchKernel & co: where (when) a kernel was launched
            self.launch_ts[args["correlation"]] = times[0]

    def _add_metadata(self, event: dict[str, Any]) -> None:
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        kind, pid = event.get("name"), event.get("pid")
        label = args.get("name") or args.get("labels")
        if kind == "thread_name" and label:
            self.thread_names[(pid, event.get("tid"))] = str(label)
        elif kind in ("process_name", "process_labels") and label:
            self.process_names[(kind, pid)] = str(label)

    def _add_flow(self, event: dict[str, Any], ph: str) -> None:
        ts = _number(event.get("ts"))
        if ts is None or "id" not in event:
            return
        if ph == "s":
            self.flow_starts[event["id"]] = ts
        else:
            self.flow_ids[(event.get("pid"), event.get("tid"), ts)] = event["id"]

    def launch_of(self, kernel: dict[str, Any]) -> float | None:
        """Host time at which a GPU event was launched: via its correlation id, else its flow."""
        args = kernel.get("args") if isinstance(kernel.get("args"), dict) else {}
        if args.get("correlation") in self.launch_ts:
            return self.launch_ts[args["correlation"]]
        flow = self.flow_ids.get((kernel.get("pid"), kernel.get("tid"), kernel["ts"]))
        return self.flow_starts.get(flow) if flow is not None else None


class _Steps:
    """ProfilerStep#N ranges on the host clock, for assigning events to steps."""

    def __init__(self, cpu_events: Iterable[dict[str, Any]]) -> None:
        ranges = []
        for event in cpu_events:
            match = _STEP_NAME.fullmatch(str(event.get("name", "")))
            if match:
                ranges.append((event["ts"], event["ts"] + event["dur"], int(match.group(1))))
        ranges.sort()
        self.ranges = ranges
        self.starts = [start for start, _, _ in ranges]

    def containing(self, t: float) -> int:
        """The step whose range contains host time ``t``; -1 if none."""
        i = bisect.bisect_right(self.starts, t) - 1
        return self.ranges[i][2] if i >= 0 and t <= self.ranges[i][1] else -1

    def latest_before(self, t: float) -> int:
        """The last step that began at or before ``t`` (a kernel runs after its launch); or -1."""
        i = bisect.bisect_right(self.starts, t) - 1
        return self.ranges[i][2] if i >= 0 else -1


def _gpu_lane_names(trace: _Trace) -> dict[tuple[Any, Any], str]:
    """One lane per (pid, tid), i.e. per CUDA stream, labelled like "GPU 0 stream 7"."""
    keys = sorted({(e.get("pid"), e.get("tid")) for e in trace.gpu},
                  key=lambda k: (_order(k[0]), _order(k[1])))
    samples = {(e.get("pid"), e.get("tid")): e.get("args") or {} for e in trace.gpu}
    names: dict[tuple[Any, Any], str] = {}
    for pid, tid in keys:
        args = samples[(pid, tid)] if isinstance(samples[(pid, tid)], dict) else {}
        process = [trace.process_names.get((kind, pid)) for kind in ("process_labels",
                                                                    "process_name")]
        # Kineto names the GPU's process "GPU 0" in one of the two; else use the kernel's device.
        device = next((p for p in process if p and "GPU" in p), None)
        if device is None:
            device = f"GPU {args['device']}" if "device" in args else (process[1] or f"pid {pid}")
        thread = trace.thread_names.get((pid, tid)) or f"stream {args.get('stream', tid)}"
        name = " ".join(f"{device} {thread}".split())
        if name in names.values():  # two streams with one label must not merge into one lane
            name = f"{name} (pid {pid} tid {tid})"
        names[(pid, tid)] = name
    return names


def _gpu_spans(trace: _Trace, steps: _Steps, lanes: Mapping[tuple[Any, Any], str]) -> list[Span]:
    spans = []
    for event in trace.gpu:
        launch = trace.launch_of(event)
        step = steps.containing(launch) if launch is not None else steps.latest_before(event["ts"])
        spans.append(Span(lanes[(event.get("pid"), event.get("tid"))], _short(event.get("name")),
                          step, event["ts"], event["ts"] + event["dur"]))
    return spans


def _cpu_spans(trace: _Trace, steps: _Steps) -> list[Span]:
    spans = []
    for event in trace.cpu:
        name = str(event.get("name", ""))
        match = _STEP_NAME.fullmatch(name)
        step = int(match.group(1)) if match else steps.containing(event["ts"])
        spans.append(Span("cpu", _short(name), step, event["ts"], event["ts"] + event["dur"]))
    return spans


def _shift_to_zero(spans: list[Span]) -> None:
    t0 = min(s.start_us for s in spans)
    for s in spans:
        s.start_us -= t0
        s.end_us -= t0


def import_profiler_trace(source: bytes | str | os.PathLike[str],
                          max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """A torch.profiler Chrome trace (a path, or its bytes; JSON or .gz) as a run dict.

    Raises ``TraceImportError`` for files over ``max_bytes`` (also after unzipping), text that
    is not JSON, JSON that is not a trace, and traces without GPU events.
    """
    trace = _Trace(_parse_events(_read_limited(source, max_bytes)))
    if not trace.gpu:
        raise TraceImportError(NO_GPU_MESSAGE)
    steps = _Steps(trace.cpu)
    lane_names = _gpu_lane_names(trace)
    gpu_lanes = list(lane_names.values())
    spans = _gpu_spans(trace, steps, lane_names) + _cpu_spans(trace, steps)
    _shift_to_zero(spans)
    spans.sort(key=lambda s: (s.start_us, s.lane))
    label = "imported"
    if isinstance(source, (str, os.PathLike)):
        label = f"imported: {Path(source).name}"
    lanes = (["cpu"] if trace.cpu else []) + gpu_lanes
    return run_dict("imported", 1, label, spans, compute_metrics(spans, [], gpu_lanes=gpu_lanes),
                    lanes=lanes, gpu_lanes=gpu_lanes)


def record_from_trace(data: bytes, name: str, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """A trace's bytes (already read and unzipped) as a schema-1 record of one run."""
    from record.run_record import make_record

    try:
        run = import_profiler_trace(data, max_bytes=max_bytes)
    except TraceImportError as error:
        raise ValueError(f"not a torch.profiler trace or run record: {error}") from None
    run["label"] = f"imported: {name}"
    env = {"device_name": "imported torch.profiler trace", "torch_version": "unknown"}
    return make_record(env, {"source": name}, [run])
