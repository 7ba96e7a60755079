"""Reading a Chrome / torch.profiler trace: its bytes (bounded), its events, and one pass that keeps
what the import needs (``Trace``). Hostile input gets a ``TraceImportError`` for a human."""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from record.bounded_read import FileTooLarge, read_bounded

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}  # old kineto: Memcpy
HOST_CATEGORIES = {"cpu_op", "user_annotation", "python_function", "cuda_runtime",
                   "cuda_driver", "ac2g_host"}
MAX_PHASE_CHARS = 80
STEP_NAME = re.compile(r"ProfilerStep#(\d{1,12})")


class TraceImportError(ValueError):
    """A trace that cannot be imported; the message says why, for a human."""


# ---- bytes -> events --------------------------------------------------------------------------

def read_limited(source: bytes | str | os.PathLike[str], max_bytes: int) -> bytes:
    try:
        return read_bounded(source, max_bytes, what="trace")
    except FileTooLarge as error:
        raise TraceImportError(f"{error}; profile fewer steps (e.g. a shorter torch.profiler "
                               "schedule) and try again") from None
    except OSError as error:
        raise TraceImportError(f"cannot read trace file: {error}") from None
    except ValueError as error:
        raise TraceImportError(str(error)) from None


def parse_events(data: bytes) -> list[object]:
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
class Event:
    name: str
    cat: str
    thread: tuple[Hashable, Hashable]     # (pid, tid), made hashable
    ts: float
    dur: float
    args: dict

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _key(value: object) -> Hashable:
    """A pid or tid as a dict key (a file may write anything)."""
    return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) \
        else json.dumps(value, sort_keys=True, default=str)[:64]


def finite_number(value: Any) -> float | None:
    """A finite float from a number or numeric string (real traces have both); else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def short_name(name: object) -> str:
    name = " ".join(str(name)[:4 * MAX_PHASE_CHARS].split())
    return name if len(name) <= MAX_PHASE_CHARS else name[:MAX_PHASE_CHARS - 3] + "..."


class Trace:
    """The parts of a profiler trace this import needs, collected in one pass."""

    def __init__(self, events: Sequence[object]) -> None:
        self.gpu: list[Event] = []
        self.host: list[Event] = []
        self.launches: dict[Hashable, Event] = {}           # correlation id -> launch call
        self.flow_starts: dict[Hashable, float] = {}           # "ac2g" flow id -> host time
        self.flow_ends: dict[tuple, Hashable] = {}             # (thread, ts) -> flow id
        self.process_names: dict[Hashable, list[str]] = defaultdict(list)
        self.thread_names: dict[tuple, str] = {}
        for event in events:
            if isinstance(event, dict):
                self._add(event)

    def _add(self, event: dict) -> None:
        ph = event.get("ph", "X")
        if ph == "X":
            self._add_complete(event)
            return
        cat = str(event.get("cat", "")).lower()
        thread = (_key(event.get("pid")), _key(event.get("tid")))
        args = event.get("args")
        if not isinstance(args, dict):
            args = {}
        if ph == "M":
            label = args.get("name") or args.get("labels")
            if event.get("name") == "thread_name" and label:
                self.thread_names[thread] = short_name(label)
            elif event.get("name") in ("process_name", "process_labels") and label:
                self.process_names[thread[0]].append(short_name(label))
            return
        if ph in ("s", "f") and cat == "ac2g":   # flow arrows: launch (s) -> kernel (f)
            ts = finite_number(event.get("ts"))
            if ts is not None and isinstance(event.get("id"), (int, str)):
                if ph == "s":
                    self.flow_starts[event["id"]] = ts
                else:
                    self.flow_ends[(thread, ts)] = event["id"]

    def _add_complete(self, event: dict) -> None:
        cat = str(event.get("cat", "")).lower()
        gpu = cat in GPU_CATEGORIES
        name = str(event.get("name", ""))
        if not gpu and cat not in HOST_CATEGORIES and not STEP_NAME.fullmatch(name):
            return                                 # neither GPU work nor a host event we read
        ts, dur = event.get("ts"), event.get("dur")
        if type(ts) is not float or type(dur) is not float or ts - ts or dur - dur:
            ts, dur = finite_number(ts), finite_number(dur)   # ints, strings, inf, NaN
            if ts is None or dur is None:
                return
        if dur < 0:
            return
        thread = (_key(event.get("pid")), _key(event.get("tid")))
        args = event.get("args")
        item = Event(name, cat, thread, ts, dur, args if type(args) is dict else {})
        if gpu:
            self.gpu.append(item)
            return
        self.host.append(item)
        if cat == "cuda_runtime" or cat == "cuda_driver":
            correlation = item.args.get("correlation")
            if isinstance(correlation, (int, str)):
                self.launches[correlation] = item

    def launch_of(self, event: Event) -> Event | None:
        """The host call that launched a GPU event (its correlation id, else its flow arrow)."""
        correlation = event.args.get("correlation")
        if isinstance(correlation, (int, str)) and correlation in self.launches:
            return self.launches[correlation]
        flow = self.flow_ends.get((event.thread, event.ts))
        if flow is not None and flow in self.flow_starts:
            return Event("launch", "cuda_runtime", ("?", "?"), self.flow_starts[flow], 0.0, {})
        return None
