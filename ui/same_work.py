"""Engines side by side: the recorded runs of one workload, made by different engines, on one
time axis.

``studies/peers/benchmark.py`` records this project's loops, Mini-SGLang's and SGLang's on the same work (the
same model shape, batch, prompt and output lengths). A record names its engine
(``env["engine"]``) and its workload (``config``); records whose workloads match are one
comparison. The recorded-runs tab offers it for the record chosen (``choices``) and draws it as
the import tab draws two files side by side (``record.imported.given_file.side_by_side``):
every loop of every engine on one time axis, one step window, each run's panel named by its
engine.

The same matching serves a live run that a busy machine disturbed (other programs took the
cores the loops were compared on): where a quiet machine's recording of the same page workload
is bundled, one click shows it (``quiet_match``), so a class on a busy laptop still sees what
the loops do. A run waiting its turn in line is shown the same recording meanwhile, before it has
run at all (``recording_for``: the recording of the work its request asks for).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr

import texts
import viz
from record.host_load import busiest
from record.imported.given_file import side_by_side
from record.run_record import config_of
from record.schema import RecordDict
from ui import parsing
from ui.i18n import lang_of
from ui.recorded_runs import RECORDED_DIR, shown, write_downloads
from ui.status import render_said, said
from ui.view import MainView, Update

if TYPE_CHECKING:
    from engine.scheduler_process.messages import LiveRunRequest

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
        header = _Header(str(record["env"].get("engine") or "ours"), workload_of(record), None)
    except (OSError, ValueError, KeyError, TypeError):
        return None                             # unreadable: not part of any comparison
    try:
        if busiest(record["runs"]) is None:
            return replace(header, quiet_work=_live_work(record))
    except (KeyError, TypeError, AttributeError, ValueError):
        pass                                    # runs it cannot judge: never a quiet match
    return header


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


def show(name: str | None, lang_choice: str) -> tuple:
    """Every engine's loops on ``name``'s workload, side by side on one time axis."""
    lang = lang_of(lang_choice)
    files = same_work(name)
    if not files:
        spec = said("recorded_same_work_none")
        return MainView(status=render_said(spec, lang), said=spec).values()
    loaded = [(parsing.parse(RECORDED_DIR / file), file) for file in files]
    record, _ = side_by_side(loaded, most=sum(len(r["runs"]) for r, _ in loaded))
    # The engines' names as text keys: the line is said again in another language on a switch.
    engines = [f"engine_{r['env'].get('engine', 'ours')}" for r, _ in loaded]
    where = viz.record_where(loaded[0][0])
    spec = said("status_same_work", "ok", engines=len(files), names_keys=engines, where=where)
    return shown(spec, record, lang, write_downloads(record)).values()


# What makes a live run's work the same as a recording's: the page's controls (each loop's extra
# CPU work too) and the device.
LIVE_WORK = ("model", "max_batch_size", "requests", "prompt_words", "max_new_tokens",
             "temperature", "request_rate", "shared_prefix", "num_pages")


def _live_work(record: RecordDict) -> tuple | None:
    """A page run's work as a key (None: not a run of the page's workload of words)."""
    config = config_of(record)
    if config is None or config.prompt_words is None:
        return None
    return (record["env"].get("device_kind"), tuple(getattr(config, name) for name in LIVE_WORK),
            tuple(dict.fromkeys(run["extra_cpu_us"] for run in record["runs"])))


def request_work(request: LiveRunRequest, device_kind: str) -> tuple:
    """``_live_work`` of the record that ``request`` will make on a device of ``device_kind``."""
    engine, work = request.engine, request.workload
    values = {"model": engine.model, "max_batch_size": engine.max_batch_size,
              "requests": work.requests, "prompt_words": work.prompt_words,
              "max_new_tokens": work.max_new_tokens, "temperature": work.temperature,
              "request_rate": work.request_rate, "shared_prefix": work.shared_prefix,
              "num_pages": engine.num_pages}
    return (device_kind, tuple(values[name] for name in LIVE_WORK),
            tuple(dict.fromkeys(spec.extra_cpu_us for spec in request.loops)))


def recording_for(request: LiveRunRequest, device_kind: str,
                  folder: Path = RECORDED_DIR) -> tuple[RecordDict, str] | None:
    """A bundled quiet recording of the work ``request`` asks for, on ``device_kind``: the
    record cut to the request's loops (each of them recorded, stop tokens picked the same way),
    and its file's name; None where none is bundled."""
    want = request_work(request, device_kind)
    loops = [(str(spec.loop), spec.decode_steps) for spec in request.loops]
    for file, header in _headers(folder).items():
        if header.quiet_work != want:
            continue
        record = _recording(folder / file)
        try:
            config = config_of(record) if record is not None else None
        except ValueError:
            config = None                           # malformed: never shown
        if record is None or config is None or \
                config.stop_tokens_from_probe != request.workload.stop_early:
            continue
        runs = [run for run in record["runs"]
                if (run["loop"], run.get("decode_steps", 1)) in loops]
        if len(runs) == len(loops):
            return {**record, "runs": runs}, file
    return None


@lru_cache(maxsize=8)
def _recording(path: Path) -> RecordDict | None:
    """A bundled recording, read once (every visitor in line is shown it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def quiet_match(record: RecordDict | None, folder: Path = RECORDED_DIR) -> str | None:
    """For a run the machine's load disturbed: a bundled recording of the same page workload on
    the same kind of device, made on a quiet machine (None: the run was not disturbed, or none
    is bundled)."""
    if not record or busiest(record["runs"]) is None:
        return None
    want = _live_work(record)
    if want is None:
        return None
    return next((file for file, header in _headers(folder).items()
                 if header.quiet_work == want), None)


def offer_quiet(record: RecordDict | None, lang_choice: str) -> Update:
    """The button under a disturbed run's status: shown where a quiet recording matches it."""
    found = quiet_match(record)
    return gr.update(visible=found is not None,
                     value=texts.t(lang_of(lang_choice), "quiet_recording"))


def show_quiet(record: RecordDict | None, lang_choice: str) -> tuple:
    """The quiet machine's recording of the disturbed run's workload, as the recorded tab shows
    it."""
    from ui.recorded_runs import show_recorded

    found = quiet_match(record)
    if found is None:
        lang = lang_of(lang_choice)
        spec = said("quiet_recording_none")
        return MainView(status=render_said(spec, lang), said=spec).values()
    return show_recorded(found, lang_choice)
