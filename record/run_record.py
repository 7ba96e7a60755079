"""The run record (schema 1): everything a run produced, as one JSON document.

A record is what travels between the engine, the CLI's ``--json`` file, the bundled H200 runs and
the UI: ``{"schema": 1, "env": {...}, "config": {...}, "runs": [run, ...]}``. The viz code draws
records, never engine objects, so a live run, a recorded GPU run and an imported production trace
take the same path to the screen. ``validate_record`` is the single gate every record passes on
its way in (load) and out (make, save), so the UI can trust every key it reads.

The layout, lanes, phases and metric formulas are documented in docs/run_record.md.
Standard library only.
"""

from __future__ import annotations

import datetime
import gzip
import json
import math
import os
import platform
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from record.metrics import METRIC_KEYS
from record.timeline import GPU_LANES, Span

SCHEMA = 1
ENV_KEYS = ("device_name", "torch_version", "python_version", "platform", "date")
RUN_KEYS = ("mode", "label", "lanes", "gpu_lanes", "metrics", "spans", "outputs")
SPAN_KEYS = ("lane", "phase", "step", "start_us", "end_us")
OUTPUT_KEYS = ("token_ids", "text", "finish_reason")


class RecordError(ValueError):
    """A document that is not a valid schema-1 run record; the message says where and why."""


# ---- making ---------------------------------------------------------------------------------

def default_env(**given: Any) -> dict[str, Any]:
    """The environment keys the standard library knows, overridden by ``given``.

    ``device_name`` and ``torch_version`` must come from the caller (this module never imports
    torch).
    """
    env = {
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    env.update(given)
    return env


def _normalize_run(run: Mapping[str, Any]) -> dict[str, Any]:
    """Span objects become dicts; a missing label is the mode; missing lanes are the used ones."""
    out = dict(run)
    out["spans"] = [s.to_dict() if isinstance(s, Span) else dict(s) for s in run.get("spans", [])]
    out.setdefault("label", run.get("mode"))
    if "lanes" not in out:
        out["lanes"] = list(dict.fromkeys(s["lane"] for s in out["spans"]))
    if "gpu_lanes" not in out:
        out["gpu_lanes"] = [lane for lane in out["lanes"] if lane in GPU_LANES]
    return out


def make_record(env: Mapping[str, Any], config: Mapping[str, Any],
                runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A validated schema-1 record. ``env`` is completed by ``default_env``."""
    record = {
        "schema": SCHEMA,
        "env": default_env(**env),
        "config": dict(config),
        "runs": [_normalize_run(run) for run in runs],
    }
    return validate_record(record)


# ---- validating -----------------------------------------------------------------------------

def _require(d: Any, keys: Sequence[str], where: str) -> None:
    if not isinstance(d, dict):
        raise RecordError(f"{where}: expected an object, got {type(d).__name__}")
    missing = [k for k in keys if k not in d]
    if missing:
        raise RecordError(f"{where}: missing key(s) {', '.join(map(repr, missing))}")


def _check(ok: bool, where: str, message: str) -> None:
    if not ok:
        raise RecordError(f"{where}: {message}")


def _is_number(value: Any) -> bool:
    # bool is an int in Python, but True is not a time; NaN/inf are not valid JSON.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _validate_span(span: Any, where: str) -> None:
    _require(span, SPAN_KEYS, where)
    _check(isinstance(span["lane"], str) and isinstance(span["phase"], str), where,
           "lane and phase must be strings")
    _check(isinstance(span["step"], int), where, "step must be an integer")
    _check(_is_number(span["start_us"]) and _is_number(span["end_us"]), where,
           "start_us and end_us must be finite numbers")
    _check(span["end_us"] >= span["start_us"], where, "end_us is before start_us")


def _validate_output(output: Any, where: str) -> None:
    _require(output, OUTPUT_KEYS, where)
    _check(isinstance(output["token_ids"], list), where, "token_ids must be a list")
    for key in ("arrival_us", "first_token_us", "finish_us"):
        value = output.get(key)
        _check(value is None or _is_number(value), where, f"{key} must be a number or null")


def _validate_run(run: Any, where: str) -> None:
    _require(run, RUN_KEYS, where)
    _check(isinstance(run["mode"], str), where, "mode must be a string")
    for key in ("lanes", "gpu_lanes", "spans", "outputs"):
        _check(isinstance(run[key], list), where, f"{key} must be a list")
    _require(run["metrics"], METRIC_KEYS, f"{where}.metrics")
    for key, value in run["metrics"].items():
        _check(value is None or _is_number(value), f"{where}.metrics",
               f"{key} must be a finite number or null")
    for i, span in enumerate(run["spans"]):
        _validate_span(span, f"{where}.spans[{i}]")
    for i, output in enumerate(run["outputs"]):
        _validate_output(output, f"{where}.outputs[{i}]")


def validate_record(d: Any) -> dict[str, Any]:
    """Return ``d`` unchanged if it is a valid schema-1 record; raise ``RecordError`` if not."""
    _require(d, ("schema",), "record")
    _check(d["schema"] == SCHEMA, "record",
           f"schema {d['schema']!r} is not supported (this code reads schema {SCHEMA})")
    _require(d, ("env", "config", "runs"), "record")
    _require(d["env"], ENV_KEYS, "record.env")
    _check(isinstance(d["config"], dict), "record.config", "expected an object")
    _check(isinstance(d["runs"], list), "record.runs", "expected a list")
    for i, run in enumerate(d["runs"]):
        _validate_run(run, f"record.runs[{i}]")
    return d


# ---- files ----------------------------------------------------------------------------------

def save_record(record: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Validate and write ``record`` as JSON (gzip if the name ends in .gz), atomically."""
    validate_record(record)
    data = json.dumps(record, allow_nan=False, separators=(",", ":")).encode()
    path = Path(path)
    # Write aside and rename, so a reader (the UI) never sees half a file.
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    partial.replace(path)
    return path


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a record (plain or gzip JSON, whatever the name says)."""
    try:
        data = Path(path).read_bytes()
        if data.startswith(b"\x1f\x8b"):
            data = gzip.decompress(data)
        doc = json.loads(data)
    except (OSError, EOFError, zlib.error) as error:  # unreadable file or a broken gzip stream
        raise RecordError(f"cannot read record {os.fspath(path)!r}: {error}") from error
    except ValueError as error:  # JSON and Unicode decoding errors are both ValueErrors
        raise RecordError(f"{os.fspath(path)!r} is not a JSON run record: {error}") from error
    return validate_record(doc)
