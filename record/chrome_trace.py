"""Chrome traces of our runs: out for Perfetto or chrome://tracing, and back in again. A run is a
*process*, a lane a *thread* (track); one metadata event per run (``RUN_METADATA``) carries what a
trace has no place for, so ``read_own_trace`` gives the same runs back."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from record.run_record import span_dict
from record.schema import GPU_LANES, LANES, RecordDict, RunDict, SpanDict, is_number, is_whole

RUN_METADATA = "overlap_demo_run"
TOKEN_METRICS = ("tokens_per_s", "output_tokens", "ttft_ms_mean", "ttft_ms_p50", "tpot_ms_mean",
                 "wasted_tokens")
SPAN_ARGS = ("step", "batch_size", "num_tokens", "req_ids")


def _metadata(name: str, pid: int, tid: int, args: dict[str, object]) -> dict[str, object]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _run_events(run: RunDict, pid: int,
                env: Mapping[str, object] | None = None) -> list[dict[str, object]]:
    spans = [span_dict(s) for s in run.get("spans", [])]
    lanes = list(dict.fromkeys([*(run.get("lanes") or []), *(s["lane"] for s in spans)]))
    tids = {lane: i + 1 for i, lane in enumerate(lanes)}
    name = str(run.get("label") or f"run {pid}")
    events = [_metadata("process_name", pid, 0, {"name": name}),
              _metadata("process_sort_index", pid, 0, {"sort_index": pid}),
              _metadata(RUN_METADATA, pid, 0, {
                  "loop": run["loop"], "decode_steps": run["decode_steps"],
                  "extra_cpu_us": run["extra_cpu_us"],
                  "label": name, "lanes": lanes, "gpu_lanes": list(run.get("gpu_lanes") or []),
                  "metrics": dict(run.get("metrics") or {}), "host": run.get("host") or {},
                  "env": {k: v for k, v in (env or {}).items()
                          if k in ("device_name", "torch_version", "date")}})]
    for lane, tid in tids.items():
        # One named thread per lane is what makes Perfetto draw one track per lane, in this order.
        events.append(_metadata("thread_name", pid, tid, {"name": lane}))
        events.append(_metadata("thread_sort_index", pid, tid, {"sort_index": tid}))
    for span in spans:
        events.append({
            "name": span["phase"], "cat": span["lane"], "ph": "X", "pid": pid,
            "tid": tids[span["lane"]], "ts": span["start_us"],
            "dur": max(0.0, span["end_us"] - span["start_us"]),
            "args": {key: span.get(key) for key in SPAN_ARGS},
        })
    return events


def to_chrome_trace(run: RunDict, pid: int = 1) -> dict[str, object]:
    """One run as a Chrome trace dict (times in µs)."""
    return {"traceEvents": _run_events(run, pid), "displayTimeUnit": "ms"}


def write_chrome_trace(record: RecordDict, path: str | os.PathLike[str]) -> Path:
    """Write every run of a record as one process each. ``.gz`` zips."""
    events: list[dict[str, object]] = []
    for i, run in enumerate(record.get("runs", [])):
        events.extend(_run_events(run, pid=i + 1, env=record.get("env")))
    data = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}).encode()
    path = Path(path)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def read_own_trace(events: Sequence[object]) -> list[RunDict] | None:
    """The runs of a trace this module wrote (``None`` if it is not one); every span-derived
    metric is measured again from the spans."""
    from record.metrics import compute_metrics
    from record.run_record import loop_of, run_dict

    meta = {e.get("pid"): e.get("args") or {} for e in events
            if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == RUN_METADATA}
    threads: dict[tuple[object, object], str] = {}
    processes: dict[object, str] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "M" or not isinstance(e.get("args"), dict):
            continue
        if e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str(e["args"].get("name", ""))
        elif e.get("name") == "process_name":
            processes[e.get("pid")] = str(e["args"].get("name", ""))
    ours = set(LANES)
    if not meta and not any(name in ours for name in threads.values()):
        return None                                   # somebody else's trace
    spans: dict[object, list[SpanDict]] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or (e.get("pid"), e.get("tid")) \
                not in threads:
            continue
        args = e.get("args")
        if not isinstance(args, dict):
            args = {}
        ts, dur = e.get("ts"), e.get("dur")
        if not (is_number(ts) and is_number(dur)) or dur < 0:
            continue
        spans.setdefault(e.get("pid"), []).append({
            "lane": threads[(e.get("pid"), e.get("tid"))], "phase": str(e.get("name", "")),
            "step": _whole(args.get("step"), -1), "start_us": float(ts),
            "end_us": float(ts + dur),
            "batch_size": _whole(args.get("batch_size"), 0),
            "num_tokens": _whole(args.get("num_tokens"), 0),
            "req_ids": [r for r in (args.get("req_ids") or []) if isinstance(r, int)]})
    runs = []
    for pid in sorted(spans, key=str):
        info = meta.get(pid, {})
        label = str(info.get("label") or processes.get(pid) or f"run {pid}")
        # Tracks without the run's metadata say no loop: one this code does not know.
        loop, k = loop_of({"loop": info.get("loop"), "decode_steps": _whole(
            info.get("decode_steps"), 1)})
        extra_us = _whole(info.get("extra_cpu_us"), 0)
        lanes = [str(x) for x in info.get("lanes") or []] or \
            list(dict.fromkeys(s["lane"] for s in spans[pid]))
        gpu = [str(x) for x in info.get("gpu_lanes") or []] or \
            [lane for lane in lanes if lane in GPU_LANES]
        given = {key: v for key, v in (info.get("metrics") or {}).items() if is_number(v)}
        wall = given.get("wall_s")
        measured = compute_metrics(spans[pid], [], gpu,
                                   wall_us=wall * 1e6 if wall and wall > 0 else None)
        # The token metrics come from outputs, which the trace does not carry.
        metrics = {**given, **measured, **{k: given[k] for k in TOKEN_METRICS if k in given}}
        run = run_dict(loop, k, label, spans[pid], metrics, lanes=lanes, gpu_lanes=gpu)
        run["extra_cpu_us"] = max(extra_us, 0)
        runs.append(run)
    return runs


def _whole(value: object, default: int) -> int:
    return value if is_whole(value) else default


def trace_env(events: Sequence[object]) -> dict[str, str]:
    """Where a trace was made, as far as our own metadata says."""
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == RUN_METADATA:
            env = (e.get("args") or {}).get("env") or {}
            return {k: str(v) for k, v in env.items() if isinstance(v, (str, int, float))}
    return {}
