"""Chrome traces out: a run record as a trace for Perfetto (https://ui.perfetto.dev) or chrome://tracing.

Each run becomes one *process* and each lane one *thread* (track), with the span's step, batch
size, token count and request ids in ``args``, so the picture the UI draws can be inspected
there too. ``record.profiler_import`` reads such a file back (and torch.profiler's own traces).

Standard library only.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from record.timeline import Span


def _span_dict(span: Span | Mapping[str, Any]) -> dict[str, Any]:
    return span.to_dict() if isinstance(span, Span) else dict(span)


def _run_lanes(run: Mapping[str, Any], spans: list[dict[str, Any]]) -> list[str]:
    """The run's lanes in their declared order, then any lane only the spans mention."""
    lanes = list(run.get("lanes") or [])
    for span in spans:
        if span["lane"] not in lanes:
            lanes.append(span["lane"])
    return lanes


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _run_events(run: Mapping[str, Any], pid: int) -> list[dict[str, Any]]:
    spans = [_span_dict(s) for s in run.get("spans", [])]
    lanes = _run_lanes(run, spans)
    tids = {lane: i + 1 for i, lane in enumerate(lanes)}
    name = str(run.get("label") or run.get("mode") or f"run {pid}")
    events = [_metadata("process_name", pid, 0, {"name": name}),
              _metadata("process_sort_index", pid, 0, {"sort_index": pid})]
    for lane, tid in tids.items():
        # One named thread per lane is what makes Perfetto draw one track per lane, in this order.
        events.append(_metadata("thread_name", pid, tid, {"name": lane}))
        events.append(_metadata("thread_sort_index", pid, tid, {"sort_index": tid}))
    for span in spans:
        events.append({
            "name": span["phase"], "cat": span["lane"], "ph": "X", "pid": pid,
            "tid": tids[span["lane"]], "ts": span["start_us"],
            "dur": max(0.0, span["end_us"] - span["start_us"]),
            "args": {key: span.get(key) for key in ("step", "batch_size", "num_tokens", "req_ids")},
        })
    return events


def to_chrome_trace(run: Mapping[str, Any], pid: int = 1) -> dict[str, Any]:
    """One run as a Chrome trace dict: one process, one thread (track) per lane, times in µs."""
    return {"traceEvents": _run_events(run, pid), "displayTimeUnit": "ms"}


def write_chrome_trace(record: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write every run of a record as one process each (named by label or mode). ``.gz`` zips."""
    events: list[dict[str, Any]] = []
    for i, run in enumerate(record.get("runs", [])):
        events.extend(_run_events(run, pid=i + 1))
    data = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}).encode()
    path = Path(path)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path
