"""Records on screen: draw one (whatever its source), offer it for download, list recorded runs.

A live run, a recorded GPU run (``assets/recorded/*.json``) and an uploaded torch.profiler trace
all become a schema-1 record here, and ``shown`` turns any record into every output of the main
view, in ``OUTPUTS`` order (see app.py). An uploaded file is refused above ``MAX_UPLOAD_BYTES``.
"""

from __future__ import annotations

import gzip
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gradio as gr

import viz
from ui.common import ROOT, lang_of, status

RECORDED_DIR = ROOT / "assets" / "recorded"
DOWNLOAD_DIR = Path(tempfile.gettempdir()) / "overlap-demo"
MAX_UPLOAD_BYTES = 200 * 2**20


def write_downloads(record: dict[str, Any]) -> tuple[str | None, str | None]:
    """The record as JSON and as a Chrome trace, in the temp dir Gradio serves files from."""
    from record.chrome_trace import write_chrome_trace

    DOWNLOAD_DIR.mkdir(parents=True, exist_ok=True)
    for old in DOWNLOAD_DIR.glob("*.json"):  # keep the folder from growing without end
        if time.time() - old.stat().st_mtime > 3600:
            old.unlink(missing_ok=True)
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    record_path = DOWNLOAD_DIR / f"run-record-{stamp}.json"
    record_path.write_text(json.dumps(record))
    trace_path = DOWNLOAD_DIR / f"chrome-trace-{stamp}.json"
    try:
        write_chrome_trace(record, trace_path)
    except (OSError, ValueError, KeyError) as error:
        gr.Warning(f"Could not write the Chrome trace: {error}")
        return str(record_path), None
    return str(record_path), str(trace_path)


def default_window(runs: list[dict[str, Any]]) -> tuple[int, int]:
    """Steps 20-25 when the run is that long, else a few steps from its middle."""
    first, last = viz.step_range(runs[0]) if runs else (0, 0)
    start = 20 if last >= 25 else first + (last - first) // 3
    return start, min(last, start + 5)


def file_update(path: str | None) -> Any:
    return gr.update(value=path, interactive=path is not None)


def shown(status_html: str, record: dict[str, Any] | None, lang: str,
          files: tuple[str | None, str | None] = (None, None)) -> tuple:
    """Every output of the main view; ``record=None`` clears the charts."""
    if not record or not record.get("runs"):
        empty = viz.side_by_side_figure([], lang=lang)
        return (status_html, empty, empty, "", "", gr.update(), gr.update(), None,
                file_update(None), file_update(None))
    runs = record["runs"]
    first, last = default_window(runs)
    return (status_html, viz.side_by_side_figure(runs, lang=lang),
            viz.side_by_side_figure(runs, window=(first, last), lang=lang),
            viz.metrics_html(runs, lang), viz.texts_html(runs, lang), first, last, record,
            file_update(files[0]), file_update(files[1]))


def progress(status_html: Any, figure: Any = None) -> tuple:
    """Outputs while a run is in progress: the status, maybe the live timeline, nothing else."""
    return (status_html, gr.update() if figure is None else figure, *(gr.update(),) * 8)


def show_recorded(name: str | None, lang_choice: str):
    """Draw one bundled record, labelled with the hardware and date it was recorded on."""
    lang = lang_of(lang_choice)
    if not name:
        return shown(status(viz.t(lang, "no_recorded")), None, lang)
    return _show_file(RECORDED_DIR / Path(name).name, lang, recorded=True)


def show_upload(path: str | None, lang_choice: str):
    """Draw an uploaded torch.profiler trace or run record like a live run."""
    if not path:
        return progress(gr.update())
    return _show_file(Path(path), lang_of(lang_choice), recorded=False)


def _show_file(path: Path, lang: str, recorded: bool):
    try:
        record = load_any(path)
        files = write_downloads(record)
    except Exception as error:  # noqa: BLE001 - a bad file must give a message, not a traceback
        message = viz.t(lang, "status_cannot_show").format(name=path.name, error=error)
        gr.Warning(message)
        return shown(status(message, "error"), None, lang)
    where = viz.record_label(record)
    text = (viz.t(lang, "status_recorded").format(where=where) if recorded else
            viz.t(lang, "status_imported").format(name=path.name, where=where))
    return shown(status(text, "ok"), record, lang, files)


def load_any(path: Path) -> dict[str, Any]:
    """A run record as it is; anything else is read as a torch.profiler trace."""
    from record.profiler_import import TraceImportError, import_profiler_trace
    from record.run_record import load_record, make_record

    size = path.stat().st_size
    if size > MAX_UPLOAD_BYTES:
        raise ValueError(f"the file is {size / 2**20:.0f} MiB; the limit is "
                         f"{MAX_UPLOAD_BYTES / 2**20:.0f} MiB")
    with path.open("rb") as file:
        head = file.read(4096)
    if head.startswith(b"\x1f\x8b"):  # gzip: look at the start of what it holds
        with gzip.open(path, "rb") as file:
            head = file.read(4096)
    if head.lstrip().startswith(b"{") and b'"schema"' in head:
        return load_record(path)
    try:
        run = import_profiler_trace(path, max_bytes=MAX_UPLOAD_BYTES)
    except TraceImportError as error:
        raise ValueError(f"not a torch.profiler trace or run record: {error}") from None
    env = {"device_name": "imported torch.profiler trace", "torch_version": "unknown"}
    return make_record(env, {"source": path.name}, [run])


def zoom(record: dict[str, Any] | None, first: float | None, last: float | None,
         lang_choice: str):
    """Redraw the step window for the record on screen."""
    lang = lang_of(lang_choice)
    if not record:
        return viz.side_by_side_figure([], lang=lang)
    window = (int(first or 0), int(last or 0))
    return viz.side_by_side_figure(record["runs"], window=window, lang=lang)


def list_recorded() -> Any:
    """Choices for the recorded-runs dropdown, labelled with hardware and date."""
    choices = []
    for path in sorted(RECORDED_DIR.glob("*.json")):
        label = path.stem
        try:
            if path.stat().st_size < 50 * 2**20:
                label = f"{path.stem}: {viz.record_label(json.loads(path.read_text()))}"
        except (OSError, ValueError):
            pass  # unreadable: listed by name; choosing it shows the error
        choices.append((label, path.name))
    return gr.update(choices=choices, value=None,
                     info=None if choices else viz.t("en", "no_recorded"))
