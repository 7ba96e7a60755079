"""Records on screen: draw one (whatever its source), offer it for download, list recorded runs.

A live run, a recorded GPU run and an uploaded trace or record all become a schema-1 record, and
``shown`` turns any record into the main view. Two files (or one beside the record on screen)
become one record (``side_by_side``). A file that cannot be shown leaves the view and says why.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.components.plot import PlotData

import texts
import viz
from record.imported.given_file import MAX_SHOWN_RUNS, NotATrace, side_by_side
from record.run_record import config_of, has_memory
from record.schema import Loop, RecordDict, RunDict
from record.window import step_range
from ui import parsing, same_work
from ui.i18n import lang_of
from ui.inputs import is_whole
from ui.same_work import RECORDED_DIR
from ui.status import Said, render_said, said
from ui.view import MainView, Update, plot
from viz.headline import look_for_key

DOWNLOAD_DIR = Path(tempfile.gettempdir()) / "overlap-demo"
MAX_DOWNLOAD_DIR_BYTES = 400 * 2**20   # exported records and traces kept for download, in all


def write_downloads(record: RecordDict,
                    trace: Path | None = None) -> tuple[str | None, str | None]:
    """The record as JSON and as a Chrome trace, in the temp dir Gradio serves files from;
    ``trace``: the Chrome trace the record was imported from, offered as it is."""
    from record.chrome_trace import write_chrome_trace

    DOWNLOAD_DIR.mkdir(parents=True, exist_ok=True)
    _trim_downloads()
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    record_path = DOWNLOAD_DIR / f"run-record-{stamp}.json"
    record_path.write_text(json.dumps(record, separators=(",", ":")))
    if trace is not None:
        return str(record_path), str(trace)
    trace_path = DOWNLOAD_DIR / f"chrome-trace-{stamp}.json"
    try:
        write_chrome_trace(record, trace_path)
    except (OSError, ValueError, KeyError):
        return str(record_path), None
    return str(record_path), str(trace_path)


def _trim_downloads() -> None:
    """Keep the download folder small: files older than an hour go, then the oldest until the
    folder is under ``MAX_DOWNLOAD_DIR_BYTES``."""
    files = []
    for path in DOWNLOAD_DIR.glob("*.json"):
        with contextlib.suppress(OSError):
            stat = path.stat()
            files.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in files)
    for mtime, size, path in sorted(files):          # the oldest first
        if total <= MAX_DOWNLOAD_DIR_BYTES and time.time() - mtime <= 3600:
            break
        path.unlink(missing_ok=True)
        total -= size


def default_window(runs: list[RunDict]) -> tuple[int, int]:
    """Steps 20-25 when the runs are that long, else a few steps from the middle of the steps
    they all have; for a torch.profiler window (kernel lanes), the steps it covers less its
    edges (where the profiler's start and stop fall)."""
    profiled = [s["step"] for run in runs[:1] for s in run.get("spans", [])
                if str(s.get("lane", "")).startswith("kernels") and s.get("step", -1) >= 0]
    if profiled:
        low, high = min(profiled), max(profiled)
        return (low + 1, high - 1) if high - low >= 3 else (low, high)
    ranges = [step_range(run) for run in runs] or [(0, 0)]
    first, last = max(r[0] for r in ranges), min(r[1] for r in ranges)
    if first > last:              # runs with no step in common (two traces): the first run's
        first, last = ranges[0]
    start = 20 if first <= 20 and last >= 25 else first + (last - first) // 3
    return start, min(last, start + 5)


def file_update(path: str | None) -> Update:
    return gr.update(value=path, interactive=path is not None)


def shown(spec: Said | None, record: RecordDict | None, lang: str,
          files: tuple[str | None, str | None] = (None, None)) -> MainView:
    """The whole main view for ``record`` under the status ``spec`` (None clears the charts); a
    run the machine's load disturbed gets the quiet recording of its work beside it."""
    status_html = render_said(spec, lang)
    if not record or not record.get("runs"):
        empty = plot(viz.side_by_side_figure([], lang=lang))
        return MainView(status=status_html, headline="",
                        timeline=gr.update(value=empty, visible=True),
                        live=gr.update(value="", visible=False), zoomed=empty,
                        memory=gr.update(visible=False), metrics="", texts="",
                        record=None, said=spec, download_record=file_update(None),
                        download_trace=file_update(None), shown_lang=lang,
                        look_for=texts.t(lang, "timeline_help"))
    runs = record["runs"]
    first, last = default_window(runs)
    quiet = same_work.quiet_recording(record)
    beside = gr.update(value=same_work.recording_payload(quiet[1], quiet[0], lang), visible=True) \
        if quiet else gr.update(value="", visible=False)
    chart = plot(viz.side_by_side_figure(runs, lang=lang))
    return MainView(status=status_html,
                    headline=viz.headline_html(record, lang, quiet[0] if quiet else None),
                    timeline=gr.update(value=chart, visible=True), live=beside,
                    zoomed=plot(viz.side_by_side_figure(runs, window=(first, last), lang=lang)),
                    memory=memory_view(runs, lang), metrics=viz.metrics_html(runs, lang),
                    texts=viz.texts_html(runs, lang),
                    first_step=first, last_step=last, record=record, said=spec,
                    download_record=file_update(files[0]), download_trace=file_update(files[1]),
                    shown_lang=lang, look_for=texts.t(lang, look_for_key(record)))


def memory_view(runs: list[RunDict], lang: str) -> Update:
    """The KV-memory chart, shown only for runs that recorded their pages."""
    if not any(has_memory(run) for run in runs):
        return gr.update(visible=False)
    return gr.update(value=plot(viz.memory_figure(runs, lang)), visible=True)


def show_recorded(name: str | None, lang_choice: str) -> tuple:
    """Draw one bundled record, labelled with the hardware and date it was recorded on."""
    lang = lang_of(lang_choice)
    if not name:
        spec = said("no_recorded")
        return MainView(status=render_said(spec, lang), said=spec).values()
    return _show_file(RECORDED_DIR / Path(name).name, lang, recorded=True).values()


def show_same_work(name: str | None, lang_choice: str) -> tuple:
    """Every engine's loops on ``name``'s workload (``ui.same_work``), side by side on one time
    axis."""
    lang = lang_of(lang_choice)
    files = same_work.same_work(name)
    if not files:
        spec = said("recorded_same_work_none")
        return MainView(status=render_said(spec, lang), said=spec).values()
    loaded = [(parsing.parse(RECORDED_DIR / file), file) for file in files]
    record, _ = side_by_side(loaded, most=sum(len(r["runs"]) for r, _ in loaded))
    # The engines' names as text keys: the line is said again in another language on a switch.
    engines = [f"engine_{r['env'].get('engine', 'ours')}" for r, _ in loaded]
    spec = said("status_same_work", "ok", engines=len(files), names_keys=engines,
                where=viz.record_where(loaded[0][0]))
    return shown(spec, record, lang, write_downloads(record)).values()


def show_upload(paths: str | Path | list[str] | None, beside: bool, on_screen: RecordDict | None,
                lang_choice: str) -> tuple:
    """Draw uploaded torch.profiler traces or run records like a live run: one alone, two (or a
    file beside the record on screen, ``beside``) side by side on one time axis."""
    if not paths:
        return MainView().values()
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    lang = lang_of(lang_choice)
    beside = bool(beside and on_screen and on_screen["runs"])
    if len(files) == 1 and not beside:
        return _show_file(files[0], lang, recorded=False).values()
    loaded: list[tuple[RecordDict, str]] = []
    for path in files:
        view = _load_or_say(path, lang)
        if isinstance(view, MainView):            # this file cannot be shown: say why
            return view.values()
        loaded.append((view, path.name))
    shown_names = [_named(record, name) for record, name in loaded]
    if beside and on_screen:
        loaded.insert(0, (on_screen, viz.record_where(on_screen) or "on screen"))
    record, dropped = side_by_side(loaded)
    spec = said("status_beside" if beside else "status_imported_two", "ok",
                notes=("status_dropped",) if dropped else (), names=" · ".join(shown_names),
                most=MAX_SHOWN_RUNS)
    return shown(spec, record, lang, write_downloads(record)).values()


def _named(record: RecordDict, name: str) -> str:
    where = viz.record_where(record)           # no words: the line is said again on a switch
    return f"{name} ({where})" if where else name


def _load_or_say(path: Path, lang: str) -> RecordDict | MainView:
    """The file's record, or the view that says why it cannot be shown (the charts stay)."""
    try:
        return parsing.parse(path)
    except NotATrace as error:       # an image, an archive, an empty file: said in words
        spec = said("status_not_a_trace", "error", name=path.name, what_key=f"file_{error.kind}")
    except Exception as error:  # noqa: BLE001 - a bad file must give a message, not a traceback
        # A reason a person can act on is said in the status itself, in the reader's language.
        key = "status_broken_gzip" if "broken gzip" in str(error) else "status_cannot_show"
        spec = said(key, "error", detail=str(error), name=path.name)
    return MainView(status=render_said(spec, lang), said=spec)


def _show_file(path: Path, lang: str, recorded: bool) -> MainView:
    record = _load_or_say(path, lang)
    if isinstance(record, MainView):
        return record
    where = viz.record_where(record)       # who made it is said apart, as text keys (a switch)
    if recorded:
        notes, values = _settings(record)
        maker = viz.record_maker(record)
        if "engine_key" in maker:
            notes = ("status_recorded_by_code" if "code_key" in maker
                     else "status_recorded_by", *notes)
        spec = said("status_recorded", "ok", notes=notes, where=where or path.name,
                    folded=_peer_section(record, values), **values, **maker)
    elif where:
        spec = said("status_imported", "ok", name=path.name, where=where)
    else:                    # a trace that names no device, torch or date
        spec = said("status_imported_unlabelled", "ok", name=path.name)
    imported = all(run["loop"] == Loop.IMPORTED for run in record["runs"])
    files = write_downloads(record, trace=path if imported and not recorded else None)
    return shown(spec, record, lang, files)


PEER_SECTIONS = {"mini-sglang": ("peer_title", "peer_section"),   # (title, text) keys
                 "sglang": ("peer_title_sglang", "peer_section_sglang")}


def _peer_section(record: RecordDict, values: dict[str, Any]) -> tuple[str, str] | None:
    """For a record of another engine's own loops (``studies/peers``): its section, one click
    away, with what the record measured and what the recorder hooked into it cost. Fills
    ``values``."""
    engine = record["env"].get("engine")
    if engine not in PEER_SECTIONS:
        return None
    runs = {run["loop"]: run["metrics"] for run in record["runs"]}
    serial, overlap = runs.get(Loop.NORMAL) or {}, runs.get(Loop.OVERLAP) or {}
    cpu_us = serial.get("t_cpu_us")
    if not (serial.get("steady_step_us") and overlap.get("steady_step_us")
            and serial.get("t_fwd_us")) or cpu_us is None:
        return None
    hook = {note.get("loop"): note.get("cost_pct") for note in record.get("notes") or []
            if note.get("key") == "hook_cost"}
    step_ms, fwd_ms, cpu_ms = (round(us / 1000, 2) for us in (serial["steady_step_us"],
                                                             serial["t_fwd_us"], cpu_us))
    # The terms add up to the step as printed; what the forward and the CPU work leave out (or
    # what of the CPU work ran under the forward) is said as a term of its own.
    rest_ms = round(step_ms - fwd_ms - cpu_ms, 2)
    terms = ("peer_terms_sum" if rest_ms == 0 else
             "peer_terms_waited" if rest_ms > 0 else "peer_terms_overlapped")
    values.update(step_ms=step_ms, fwd_ms=fwd_ms, cpu_ms=cpu_ms, rest_ms=abs(rest_ms),
                  terms_key=terms,
                  busy_a=100 * (serial.get("steady_busy_frac") or 0.0),
                  busy_b=100 * (overlap.get("steady_busy_frac") or 0.0),
                  step_b_ms=overlap["steady_step_us"] / 1000,
                  gain=serial["steady_step_us"] / overlap["steady_step_us"],
                  hook_a=float(hook.get(Loop.NORMAL) or 0.0),
                  hook_b=float(hook.get(Loop.OVERLAP) or 0.0))
    return PEER_SECTIONS[engine]


def _settings(record: RecordDict) -> tuple[tuple[str, ...], dict[str, Any]]:
    """What a recording of our engine was run with (model, batch, graphs, extra CPU work, result
    copy, KV pool, shared prompt), as status notes and their values."""
    config = config_of(record)
    if config is None:
        return (), {}
    extra = dict.fromkeys(run["extra_cpu_us"] for run in record["runs"]) or {0: None}
    notes = ["status_settings"]
    values: dict[str, Any] = {
        "model": config.model, "batch": config.max_batch_size,
        "graphs_key": "detail_graphs" if config.cuda_graph else "detail_eager",
        "extra": " / ".join(str(us) for us in extra)}
    if config.result_copy_stream in ("copy", "engine", "scheduler"):
        notes.append("status_settings_copy")
        values["copy_key"] = f"lane_{config.result_copy_stream}_stream"
    if config.num_pages:
        notes.append("status_settings_kv")
        values["kv_pages"] = config.num_pages
    if config.shared_prefix:
        notes.append("status_settings_prefix")
        values["prefix"] = config.shared_prefix
    return tuple(notes), values


def zoom_steps(record: RecordDict | None, first: object, last: object,
               lang_choice: str) -> tuple[PlotData, object, object]:
    """The step window (the Zoom button): the figure, and the step boxes set to the steps drawn
    (a window past every run's ends is cut, and the chart says so). A bad window gets a message
    in the page's language, and the boxes keep what was typed."""
    lang = lang_of(lang_choice)
    if not record or not record.get("runs"):
        return plot(viz.side_by_side_figure([], lang=lang)), gr.update(), gr.update()
    if not (is_whole(first) and is_whole(last)):
        return plot(viz.message_figure(texts.t(lang, "zoom_need_steps"))), gr.update(), gr.update()
    window = (int(first), int(last))
    ranges = [step_range(run) for run in record["runs"]]
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    if window[0] > window[1]:
        said = texts.t(lang, "zoom_order").format(first=window[0], last=window[1])
        return plot(viz.message_figure(said)), gr.update(), gr.update()
    if window[1] < low or window[0] > high:
        said = texts.t(lang, "zoom_outside").format(first=window[0], last=window[1], low=low,
                                                   high=high)
        return plot(viz.message_figure(said)), gr.update(), gr.update()
    drawn = (max(window[0], low), min(window[1], high))
    note = texts.t(lang, "zoom_cut").format(low=low, high=high) if drawn != window else ""
    return (plot(viz.side_by_side_figure(record["runs"], window=drawn, lang=lang, note=note)),
            drawn[0], drawn[1])


def list_recorded(lang_choice: str = "English", chosen: str | None = None) -> Update:
    """Choices for the recorded-runs dropdown, labelled in the page's language with who made
    each record, on what and when; ``chosen`` stays chosen (a language switch relabels)."""
    lang = lang_of(lang_choice)
    choices = []
    for path in sorted(RECORDED_DIR.glob("*.json")):
        label = path.stem
        try:
            if path.stat().st_size < 50 * 2**20:
                where = viz.record_label(json.loads(path.read_text()), lang)
                label = f"{path.stem}: {where}" if where else path.stem
        except (OSError, ValueError):
            pass  # unreadable: listed by name; choosing it shows the error
        choices.append((label, path.name))
    return gr.update(choices=choices,
                     value=chosen if chosen in {name for _, name in choices} else None,
                     info=None if choices else texts.t(lang, "no_recorded"))
