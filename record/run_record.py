"""The run record (schema 1, docs/run_record.md): everything a run produced, as one JSON document.
``validate_record`` is the gate every record passes in and out; a record of our runs carries a
``record.schema.RunConfig`` (``config_of``)."""

from __future__ import annotations

import datetime
import gzip
import json
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from record.bounded_read import DEFAULT_MAX_BYTES, read_bounded
from record.metrics import METRIC_KEYS
from record.recorder import Span
from record.schema import (
    BASE_LANES,
    GPU_LANES,
    OURS,
    RECORD_LOOPS,
    Loop,
    Metrics,
    OutputDict,
    RecordDict,
    RunConfig,
    RunDict,
    SpanDict,
    is_number,
    is_whole,
    loop_label,
)

SCHEMA = 1
MAX_RUNS = 16               # a record's structure is bounded too, not only its bytes
MAX_LANES = 256             # per run
MAX_SPANS = 2_000_000       # in the whole record
MAX_DECODE_STEPS = 64       # k of a run, at most
ENV_KEYS = ("device_name", "torch_version", "python_version", "platform", "date")
RUN_KEYS = ("loop", "decode_steps", "extra_cpu_us", "label", "lanes", "gpu_lanes", "metrics",
            "spans", "outputs")
SPAN_KEYS = ("lane", "phase", "step", "start_us", "end_us")
OUTPUT_KEYS = ("token_ids", "text", "finish_reason")


class RecordError(ValueError):
    """A document that is not a valid schema-1 run record; the message says where and why."""


# ---- making ---------------------------------------------------------------------------------

def run_dict(loop: str, decode_steps: int, label: str, spans: Sequence[Span | SpanDict],
             metrics: Mapping[str, object] | None = None, outputs: Sequence[OutputDict] = (),
             lanes: Sequence[str] = BASE_LANES, gpu_lanes: Sequence[str] = GPU_LANES) -> RunDict:
    """One run of a record, the only place a run dict is built (a finished run, or the partial run a
    live view draws); a run with extra CPU work sets its ``extra_cpu_us``."""
    return {"loop": str(loop), "decode_steps": int(decode_steps), "extra_cpu_us": 0,
            "label": label,
            "lanes": [str(lane) for lane in lanes], "gpu_lanes": [str(lane) for lane in gpu_lanes],
            "metrics": cast(Metrics, dict(metrics or {})),    # its own keys kept too
            "spans": [span_dict(s) for s in spans],
            "outputs": [OutputDict(**o) for o in outputs]}


def span_dict(span: Span | SpanDict) -> SpanDict:
    return span.to_dict() if isinstance(span, Span) else span.copy()


def loop_of(run: Mapping[str, object]) -> tuple[Loop, int]:
    """(loop, k) of a run; a loop this code does not know is ``Loop.OTHER``."""
    loop, k = run["loop"], run["decode_steps"]
    return (Loop(loop) if isinstance(loop, str) and loop in RECORD_LOOPS else Loop.OTHER,
            k if isinstance(k, int) else 1)


def make_record(env: Mapping[str, object], config: RunConfig | Mapping[str, object],
                runs: Sequence[Mapping[str, object]]) -> RecordDict:
    """A validated schema-1 record. Ours are made in one place, ``engine.run``, with a
    ``RunConfig``; another engine's record or an imported trace brings a config of its own."""
    record = {
        "schema": SCHEMA,
        "env": {"python_version": platform.python_version(), "platform": platform.platform(),
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                **env},
        "config": config.to_dict() if isinstance(config, RunConfig) else dict(config),
        "runs": [_completed(run) for run in runs],
    }
    return validate_record(record)


def _completed(run: Mapping[str, Any]) -> dict[str, Any]:
    """Spans as dicts; a missing label or lanes filled in."""
    out = dict(run)
    out["spans"] = [span_dict(s) for s in run.get("spans", [])]
    if "loop" in out and "decode_steps" in out:
        out.setdefault("label", loop_label(out["loop"], out["decode_steps"]))
    if "lanes" not in out:
        out["lanes"] = list(dict.fromkeys(s["lane"] for s in out["spans"]))
    if "gpu_lanes" not in out:
        out["gpu_lanes"] = [lane for lane in out["lanes"] if lane in GPU_LANES]
    return out


def is_ours(record: Mapping[str, object]) -> bool:
    """Whether ``record`` holds our engine's runs (``env["engine"]``), not runs side by side from
    several files (each naming its ``source``)."""
    env, runs = record.get("env"), record.get("runs")
    return (isinstance(env, dict) and env.get("engine") == OURS
            and not any(isinstance(run, dict) and "source" in run
                        for run in (runs if isinstance(runs, list) else ())))


def config_of(record: Mapping[str, object]) -> RunConfig | None:
    """The typed config of a record of our runs; None for any other record."""
    return RunConfig.from_dict(record.get("config")) if is_ours(record) else None


# ---- validating -----------------------------------------------------------------------------

def _require(d: object, keys: Sequence[str], where: str) -> None:
    if not isinstance(d, dict):
        raise RecordError(f"{where}: expected an object, got {type(d).__name__}")
    missing = [k for k in keys if k not in d]
    if missing:
        raise RecordError(f"{where}: missing key(s) {', '.join(map(repr, missing))}")


def _check(ok: bool, where: str, message: str) -> None:
    if not ok:
        raise RecordError(f"{where}: {message}")


def _validate_span(span: Any, where: str) -> None:
    _require(span, SPAN_KEYS, where)
    _check(isinstance(span["lane"], str) and isinstance(span["phase"], str), where,
           "lane and phase must be strings")
    _check(isinstance(span["step"], int), where, "step must be an integer")
    _check(is_number(span["start_us"]) and is_number(span["end_us"]), where,
           "start_us and end_us must be finite numbers")
    _check(span["end_us"] >= span["start_us"], where, "end_us is before start_us")
    for key in ("batch_size", "num_tokens"):
        _check(is_whole(span.get(key, 0)), where, f"{key} must be an integer")
    _check(isinstance(span.get("req_ids", []), list) and all(
        is_whole(r) for r in span.get("req_ids", [])), where, "req_ids must be integers")


def _validate_output(output: Any, where: str) -> None:
    _require(output, OUTPUT_KEYS, where)
    _check(isinstance(output["token_ids"], list) and all(is_whole(t) for t in
                                                          output["token_ids"]),
           where, "token_ids must be a list of integers")
    _check(isinstance(output["text"], str) and isinstance(output["finish_reason"], str), where,
           "text and finish_reason must be strings")
    for key in ("arrival_us", "first_token_us", "finish_us"):
        value = output.get(key)
        _check(value is None or is_number(value), where, f"{key} must be a number or null")
    for key in ("prompt_tokens", "wasted_steps"):
        value = output.get(key)
        _check(value is None or is_whole(value), where, f"{key} must be an integer or null")


def memory_problem(memory: object) -> str | None:
    """What is wrong with a run's KV-memory trace (``record.schema.MemoryTrace``); None: nothing."""
    if not isinstance(memory, dict):
        return f"expected an object, got {type(memory).__name__}"
    total = memory.get("total_pages")
    if not (is_number(total) and total > 0):
        return f"total_pages must be a positive number, got {total!r}"
    for key, width, what in (("steps", 5, "(step, time, used, cached, free)"),
                             ("retractions", 3, "(step, time, request)")):
        rows = memory.get(key) or []
        if not isinstance(rows, list):
            return f"{key} must be a list"
        for i, row in enumerate(rows):
            if not (isinstance(row, (list, tuple)) and len(row) >= width
                    and all(is_number(v) for v in row[:width])):
                return f"{key}[{i}] must be {width} finite numbers {what}, got {row!r}"[:300]
    return None


def has_memory(run: RunDict) -> bool:
    """Whether ``run`` carries a well-formed memory trace with at least one step."""
    memory = run.get("memory")
    return (isinstance(memory, dict) and memory_problem(memory) is None
            and bool(memory.get("steps")))


def _validate_run(run: Any, where: str) -> None:
    _require(run, RUN_KEYS, where)
    _check(isinstance(run["loop"], str) and isinstance(run["label"], str), where,
           "loop and label must be strings")
    _check(is_whole(run["decode_steps"]) and 1 <= run["decode_steps"] <= MAX_DECODE_STEPS,
           where, f"decode_steps must be an integer in 1..{MAX_DECODE_STEPS}")
    _check(is_whole(run["extra_cpu_us"]) and run["extra_cpu_us"] >= 0, where,
           "extra_cpu_us must be a whole number of µs, 0 or more")
    for key in ("lanes", "gpu_lanes", "spans", "outputs"):
        _check(isinstance(run[key], list), where, f"{key} must be a list")
    _check(len(run["lanes"]) <= MAX_LANES, where, f"{len(run['lanes'])} lanes; at most "
           f"{MAX_LANES} are read")
    _require(run["metrics"], METRIC_KEYS, f"{where}.metrics")
    for key, value in run["metrics"].items():
        _check(value is None or is_number(value), f"{where}.metrics",
               f"{key} must be a finite number or null")
    for i, span in enumerate(run["spans"]):
        _validate_span(span, f"{where}.spans[{i}]")
    for i, output in enumerate(run["outputs"]):
        _validate_output(output, f"{where}.outputs[{i}]")
    if run.get("memory") is not None:
        problem = memory_problem(run["memory"])
        _check(problem is None, f"{where}.memory", problem or "")


def validate_record(d: Any) -> RecordDict:
    """``d`` if it is a valid schema-1 record; ``RecordError`` if not."""
    _require(d, ("schema",), "record")
    _check(d["schema"] == SCHEMA, "record",
           f"schema {d['schema']!r} is not supported (this code reads schema {SCHEMA})")
    _require(d, ("env", "config", "runs"), "record")
    _require(d["env"], ENV_KEYS, "record.env")
    _check(isinstance(d["config"], dict), "record.config", "expected an object")
    try:
        config_of(d)
    except ValueError as error:
        raise RecordError(f"record.config: {error}") from None
    _check(isinstance(d["runs"], list), "record.runs", "expected a list")
    _check(len(d["runs"]) <= MAX_RUNS, "record.runs", f"{len(d['runs'])} runs; at most "
           f"{MAX_RUNS} are read")
    spans = sum(len(run["spans"]) for run in d["runs"]
                if isinstance(run, dict) and isinstance(run.get("spans"), list))
    _check(spans <= MAX_SPANS, "record.runs", f"{spans} spans; at most {MAX_SPANS} are read")
    for i, run in enumerate(d["runs"]):
        _validate_run(run, f"record.runs[{i}]")
    return cast(RecordDict, d)      # every key the schema names was checked above


# ---- files ----------------------------------------------------------------------------------

def save_record(record: Mapping[str, object], path: str | os.PathLike[str]) -> Path:
    """Validate and write ``record`` as JSON (gzip if the name ends in .gz), atomically."""
    validate_record(record)
    data = json.dumps(record, allow_nan=False, separators=(",", ":")).encode()
    path = Path(path)
    # Write aside and rename, so a reader (the UI) never sees half a file.
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    partial.replace(path)
    return path


def record_from_bytes(data: bytes, name: str = "record") -> RecordDict:
    """Parse and validate a record's JSON text (already read and unzipped)."""
    try:
        doc = json.loads(data)
    except ValueError as error:  # JSON and Unicode decoding errors are both ValueErrors
        raise RecordError(f"{name!r} is not a JSON run record: {error}") from error
    except RecursionError:
        raise RecordError(f"{name!r} nests deeper than any run record does") from None
    return validate_record(doc)


def load_record(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> RecordDict:
    """Read and validate a record (plain or gzip JSON), bounded in size."""
    try:
        data = read_bounded(path, max_bytes, what=f"record {os.fspath(path)!r}")
    except (OSError, ValueError) as error:      # unreadable, too large, or broken gzip
        raise RecordError(f"cannot read record {os.fspath(path)!r}: {error}") from error
    return record_from_bytes(data, os.fspath(path))
