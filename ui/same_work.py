"""Records of the same work: other engines' recordings of it, and a quiet machine's.

Records whose workloads match (``workload_of``: this project's loops, Mini-SGLang's and SGLang's)
are one comparison, which the recorded tab offers (``same_work``). A live run that a busy machine
disturbed is shown beside the bundled quiet recording of the same work (``quiet_recording``), and
a run waiting in line is shown it meanwhile (``recording_of``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr

import texts
import viz
from record.host_load import busiest
from record.run_record import config_of
from record.schema import RecordDict, RunConfig
from ui.i18n import lang_of
from ui.view import Update

if TYPE_CHECKING:
    from engine.scheduler_process.messages import LiveRunRequest

RECORDED_DIR = Path(__file__).resolve().parents[1] / "assets" / "recorded"
# What makes work "the same": ``RunConfig``'s names, which another engine's record uses too.
WORKLOAD = ("model", "max_batch_size", "prompt_tokens", "max_new_tokens")
ENGINE_ORDER = ("ours", "mini-sglang", "sglang")    # panels top to bottom


def workload_of(record: RecordDict) -> tuple | None:
    """The record's workload as a key (our engine's typed config, or the same names in another
    engine's), or None where its config does not say all of it."""
    config = config_of(record)
    values = asdict(config) if config is not None else record["config"]
    key = tuple(values.get(name) for name in WORKLOAD)
    return None if None in key else key


@dataclass(frozen=True)
class _Header:
    """What the comparisons need of a record file, read once per version of the file."""

    engine: str
    work: tuple | None          # ``workload_of``: engines compared on the same work
    quiet_work: tuple | None    # ``_live_work`` of a run no other program disturbed, else None


@lru_cache(maxsize=64)
def _read_header(path: Path, _mtime_ns: int, _size: int) -> _Header | None:
    """A record file's header (None: unreadable); the file's version is part of the key, so an
    edited file is read again."""
    try:
        record = json.loads(path.read_text())
        engine, work = str(record["env"].get("engine") or "ours"), workload_of(record)
    except (OSError, ValueError, KeyError, TypeError):
        return None                             # unreadable: not part of any comparison
    try:
        quiet = _live_work(record) if busiest(record["runs"]) is None else None
    except (KeyError, TypeError, AttributeError, ValueError):
        quiet = None                            # runs it cannot judge: never a quiet match
    return _Header(engine, work, quiet)


def _headers(folder: Path) -> dict[str, _Header]:
    """Each record file's header, by file name, in name order."""
    found: dict[str, _Header] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            stat = path.stat()
        except OSError:
            continue
        header = _read_header(path, stat.st_mtime_ns, stat.st_size)
        if header is not None:
            found[path.name] = header
    return found


def same_work(name: str | None, folder: Path = RECORDED_DIR) -> list[str]:
    """The records made on ``name``'s workload by each engine (one each, in ``ENGINE_ORDER``),
    ``name``'s own among them; empty where no other engine recorded that work."""
    headers = _headers(folder)
    if not name or name not in headers or headers[name].work is None:
        return []
    work = headers[name].work
    by_engine: dict[str, str] = {}
    for file, header in headers.items():
        if header.work == work and (header.engine not in by_engine or file == name):
            by_engine[header.engine] = file
    if len(by_engine) < 2:
        return []
    return [by_engine[e] for e in sorted(by_engine, key=lambda e: (
        ENGINE_ORDER.index(e) if e in ENGINE_ORDER else len(ENGINE_ORDER), e))]


def offer(name: str | None, lang_choice: str) -> Update:
    """The button under the recorded runs: shown where the record chosen has siblings of other
    engines, naming how many engines it would put side by side."""
    files = same_work(name)
    lang = lang_of(lang_choice)
    return gr.update(visible=bool(files),
                     value=texts.t(lang, "recorded_same_work").format(engines=len(files)))


# What makes a live run's work the same as a recording's: the page's controls (each loop's extra
# CPU work too) and the device.
LIVE_WORK = ("model", "max_batch_size", "requests", "prompt_words", "max_new_tokens",
             "temperature", "request_rate", "shared_prefix", "num_pages", "stop_tokens_from_probe")


def _live_work(record: RecordDict) -> tuple | None:
    """A page run's work as a key (None: not a run of the page's workload of words)."""
    config = config_of(record)
    if config is None or config.prompt_words is None:
        return None
    return _work_key(str(record["env"].get("device_kind")), config,
                     [run["extra_cpu_us"] for run in record["runs"]])


def request_work(request: LiveRunRequest, device_kind: str) -> tuple:
    """``_live_work`` of the record that ``request`` will make on a device of ``device_kind``."""
    from engine.run import run_config

    return _work_key(device_kind, run_config(request.engine, request.workload),
                     [spec.extra_cpu_us for spec in request.loops])


def _work_key(device_kind: str, config: RunConfig, extra_cpu_us: list[int]) -> tuple:
    return (device_kind, tuple(getattr(config, name) for name in LIVE_WORK),
            tuple(dict.fromkeys(extra_cpu_us)))


def quiet_recording(record: RecordDict | None) -> tuple[RecordDict, str] | None:
    """For a run the machine's load disturbed: the bundled quiet recording of its work on the
    same kind of device, cut to its loops, and its file's name (None: not disturbed, or none)."""
    try:
        if not record or busiest(record["runs"]) is None:
            return None
        want = _live_work(record)
        loops = [(run["loop"], run.get("decode_steps", 1)) for run in record["runs"]]
    except (KeyError, TypeError, ValueError):
        return None
    return recording_of(want, loops) if want is not None else None


def recording_of(want: tuple, loops: Sequence[tuple[str, int]]) -> tuple[RecordDict, str] | None:
    """The bundled quiet recording of the work ``want`` (``request_work``), cut to ``loops``
    ((loop, k) each), and its file's name; None where none is bundled."""
    for file, header in _headers(RECORDED_DIR).items():
        found = _recording(RECORDED_DIR / file) if header.quiet_work == want else None
        if found is None:
            continue
        runs = [run for run in found["runs"] if (run["loop"], run.get("decode_steps", 1)) in loops]
        if len(runs) == len(loops):
            return {**found, "runs": runs}, file
    return None


@lru_cache(maxsize=8)
def _recording(path: Path) -> RecordDict | None:
    """A bundled recording, read once (every visitor in line is shown it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


_PAYLOADS: dict[tuple, str] = {}        # (file, loops, language) -> the canvas's payload
_PAYLOADS_LOCK = threading.Lock()


def recording_payload(file: str, record: RecordDict, lang: str) -> str:
    """The canvas's payload of a recording (the line above it says it is one): the same for
    every visitor, made once."""
    key = (file, tuple((run["loop"], run.get("decode_steps", 1)) for run in record["runs"]), lang)
    with _PAYLOADS_LOCK:
        if key not in _PAYLOADS:
            if len(_PAYLOADS) >= 16:
                _PAYLOADS.clear()
            note = texts.t(lang, "recording_note").format(where=viz.record_where(record))
            _PAYLOADS[key] = viz.live_payload(record["runs"], lang, recording=note)
        return _PAYLOADS[key]
