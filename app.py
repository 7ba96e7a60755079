"""Gradio UI: run the engine with the normal and the overlap loop and watch both timelines.

Glue only. Controls become an ``EngineConfig`` and ``SamplingParams``; the engine runs in a worker
thread while this handler redraws its ``Timeline`` every ~0.4 s; the finished run becomes a
schema-1 record, and ``viz`` draws records. Recorded GPU runs (``assets/recorded/*.json``) and
uploaded torch.profiler traces become records too, so all three take one path to the screen.

The engine is imported lazily (torch is slow to import), built once per configuration and kept,
and used by one run at a time per device: the run event has ``concurrency_limit=1`` and a lock,
so several browsers queue instead of sharing an engine mid-run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import gradio as gr

import viz

try:  # Hugging Face ZeroGPU: GPU work must run inside a spaces.GPU function.
    import spaces
except ImportError:
    spaces = None

RECORDED_DIR = Path(__file__).resolve().parent / "assets" / "recorded"
DOWNLOAD_DIR = Path(tempfile.gettempdir()) / "overlap-demo"
MAX_UPLOAD_BYTES = 200 * 2**20
REFRESH_S = 0.4
MODELS = [  # (value, display name, real weights?)
    ("bundled", "bundled", True),
    ("smollm2-135m-shape", "SmolLM2-135M shape", False),
    ("qwen2.5-0.5b-shape", "Qwen2.5-0.5B shape", False),
    ("qwen2.5-1.5b-shape", "Qwen2.5-1.5B shape", False),
]
MODES = ("both", "normal", "overlap")
DEVICES = [("auto", "auto"), ("CPU", "cpu"), ("CUDA", "cuda")]
DEFAULT_PROMPTS = (
    "Once upon a time, in a small village by the sea, there lived an old baker who\n"
    "The quick brown fox jumps over the lazy dog, and then the dog decides to\n"
    "Explain in simple words why a scheduler might read each new token one step late:\n"
    "Here is a short story about a robot that learned to keep its workshop busy:"
)
DEFAULTS = {"requests": 16, "batch": 16, "prompt_len": 24, "max_new": 48, "temperature": 0.0,
            "extra_cpu": 4000}
LIMITS = {  # control: (min, max); checked again here because a typed number can be anything
    "requests": (1, 64), "batch": (1, 64), "prompt_len": (1, 256), "max_new": (1, 256),
    "temperature": (0.0, 2.0), "extra_cpu": (0, 20000),
}

_engines: dict[str, tuple[tuple, Any]] = {}          # device -> (config key, Engine)
_device_locks = {"cpu": threading.Lock(), "cuda": threading.Lock()}


# ---- helpers ----------------------------------------------------------------------------------

def _validate(**values: Any) -> dict[str, Any]:
    """Numbers within LIMITS (as ints where they count things), or ValueError for a person."""
    checked = {}
    for name, value in values.items():
        low, high = LIMITS[name]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise ValueError(f"{name.replace('_', ' ')} is empty: enter a number in {low}..{high}")
        if not low <= value <= high:
            raise ValueError(f"{name.replace('_', ' ')} must be in {low}..{high}, got {value}")
        checked[name] = float(value) if isinstance(low, float) else int(value)
    return checked


def make_prompts(text: str, count: int, words: int) -> list[str]:
    """``count`` prompts of ``words`` words: the given lines, cycled, repeated or cut to length."""
    lines = [line.split() for line in (text or "").splitlines() if line.strip()]
    lines = lines or [line.split() for line in DEFAULT_PROMPTS.splitlines()]
    prompts = []
    for i in range(count):
        base = lines[i % len(lines)]
        prompts.append(" ".join((base * (words // len(base) + 1))[:words]))
    return prompts


def _token_prompts(engine: Any, prompts: list[str], words: int) -> list[Any]:
    """Models without a tokenizer (random-weight presets) take token ids: ``words`` per prompt."""
    if getattr(engine, "tokenizer", True) is not None:
        return prompts
    vocab = engine.spec.vocab_size
    return [[(i * 7919 + j * 104729) % (vocab - 16) + 8 for j in range(words)]
            for i in range(len(prompts))]


def _engine_kwargs(model: str, device: str, values: dict[str, Any], cuda_graph: bool) -> dict:
    return {"model": model, "device": device, "max_batch_size": values["batch"],
            "cuda_graph": bool(cuda_graph) and device == "cuda",
            "extra_cpu_us": values["extra_cpu"], "seed": 0,
            "max_seq_len": 2 * values["prompt_len"] + values["max_new"] + 64}


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch  # lazy: slow to import, and only needed once someone presses Run

    return "cuda" if torch.cuda.is_available() else "cpu"


def _engine_for(config_kwargs: dict[str, Any]) -> Any:
    """The cached engine for this configuration; a different one on the device replaces it."""
    from engine import Engine, EngineConfig

    config = EngineConfig(**config_kwargs)
    key = tuple(sorted(config_kwargs.items()))
    cached = _engines.get(config.device)
    if cached and cached[0] == key:
        return cached[1]
    if cached:
        _engines.pop(config.device)
        cached[1].close()
    engine = Engine(config)
    _engines[config.device] = (key, engine)
    return engine


def _live_run(mode: str, timeline: Any) -> dict[str, Any]:
    """A run dict of the spans recorded so far (no metrics yet: viz measures what it draws)."""
    from engine.timeline import GPU_LANES, LANES

    return {"mode": mode, "label": mode, "lanes": list(LANES),
            "gpu_lanes": list(GPU_LANES), "metrics": {},
            "spans": [span.to_dict() for span in timeline.snapshot()], "outputs": []}


def _write_downloads(record: dict[str, Any]) -> tuple[str | None, str | None]:
    """The record as JSON and as a Chrome trace, in the temp dir Gradio serves files from."""
    from engine.trace import write_chrome_trace

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


def _default_window(runs: list[dict[str, Any]]) -> tuple[int, int]:
    """Steps 20-25 when the run is that long, else a few steps from its middle."""
    first, last = viz.step_range(runs[0]) if runs else (0, 0)
    start = 20 if last >= 25 else first + (last - first) // 3
    return start, min(last, start + 5)


def _status(text: str, kind: str = "info") -> str:
    return f'<div class="status status-{kind}">{text}</div>'


def _progress_bar(fraction: float, text: str) -> str:
    percent = max(0.0, min(100.0, 100.0 * fraction))
    return (_status(text, "running") + f'<div class="bar"><div style="width:{percent:.0f}%">'
            "</div></div>")


def _file(path: str | None) -> Any:
    return gr.update(value=path, interactive=path is not None)


def _shown(status: str, record: dict[str, Any] | None, lang: str,
           files: tuple[str | None, str | None] = (None, None)) -> tuple:
    """Every output of a view, in OUTPUTS order; ``record=None`` clears the charts."""
    if not record or not record.get("runs"):
        empty = viz.side_by_side_figure([], lang=lang)
        return (status, empty, empty, "", "", gr.update(), gr.update(), None,
                _file(None), _file(None))
    runs = record["runs"]
    first, last = _default_window(runs)
    return (status, viz.side_by_side_figure(runs, lang=lang),
            viz.side_by_side_figure(runs, window=(first, last), lang=lang),
            viz.metrics_html(runs, lang), viz.texts_html(runs, lang), first, last, record,
            _file(files[0]), _file(files[1]))


def _progress(status: Any, figure: Any = None) -> tuple:
    """Outputs while a run is in progress: the status, maybe the live timeline, nothing else."""
    return (status, gr.update() if figure is None else figure, *(gr.update(),) * 8)


def _model_choices(lang: str) -> list[tuple[str, str]]:
    return [(f"{name}: {viz.t(lang, 'model_real' if real else 'model_random')}", value)
            for value, name, real in MODELS]


def _mode_choices(lang: str) -> list[tuple[str, str]]:
    return [(viz.t(lang, f"mode_{mode}"), mode) for mode in MODES]


def _lang(choice: str) -> str:
    return "zh" if choice == viz.LANGUAGES["zh"] else "en"


# ---- handlers ---------------------------------------------------------------------------------

def run_live(mode, device, model, requests, batch, prompt_len, prompts_text, max_new,
             temperature, cuda_graph, extra_cpu, lang_choice):
    """Run the engine (both loops for "both"), yielding redrawn timelines while it works."""
    lang = _lang(lang_choice)
    try:
        values = _validate(requests=requests, batch=batch, prompt_len=prompt_len,
                           max_new=max_new, temperature=temperature, extra_cpu=extra_cpu)
        device = _resolve_device(device)
    except ValueError as error:
        gr.Warning(str(error))
        yield _shown(_status(str(error), "error"), None, lang)
        return
    modes = ["normal", "overlap"] if mode == "both" else [mode]
    prompts = make_prompts(prompts_text, values["requests"], values["prompt_len"])
    finished: list[dict[str, Any]] = []
    lock = _device_locks.setdefault(device, threading.Lock())
    try:
        if not lock.acquire(blocking=False):  # the start-up warm-up still builds the engine
            yield _progress(_progress_bar(0.0, viz.t(lang, "status_waiting")))
            lock.acquire()
        try:
            preparing = viz.t(lang, "status_preparing").format(device=device.upper())
            yield (_progress_bar(0.0, preparing), gr.update(),  # clear the last run's results
                   viz.message_figure(viz.t(lang, "zoom_after_run")), "", "", gr.update(),
                   gr.update(), None, _file(None), _file(None))
            engine = _engine_for(_engine_kwargs(model, device, values, cuda_graph))
            prompts = _token_prompts(engine, prompts, values["prompt_len"])
            for run_mode in modes:
                yield from _run_one(engine, run_mode, prompts, values, finished, lang,
                                    len(modes))
            record = _make_record(engine, finished, values, mode)
        finally:
            lock.release()
        files = _write_downloads(record)
    except Exception as error:  # noqa: BLE001 - any failure must reach the user, not kill the page
        message = viz.t(lang, "status_failed").format(error=f"{type(error).__name__}: {error}")
        gr.Warning(message)
        yield _shown(_status(message, "error"), None, lang)
        return
    tokens = record["runs"][-1]["metrics"].get("output_tokens", 0)
    device_detail = str(record["runs"][-1].get("label", "")).partition(" (")[2].rstrip(")")
    where = viz.record_label(record) + (f" ({device_detail})" if device_detail else "")
    done = viz.t(lang, "status_done").format(requests=len(prompts), tokens=f"{tokens:.0f}",
                                             where=where)
    yield _shown(_status(done, "ok"), record, lang, files)


def _run_one(engine: Any, mode: str, prompts: list[str], values: dict[str, Any],
             finished: list[dict[str, Any]], lang: str, total_runs: int):
    """Run one loop in a worker thread, yield live views, append its run dict to ``finished``."""
    from engine import SamplingParams
    from engine.timeline import Timeline

    params = SamplingParams(max_new_tokens=values["max_new"], temperature=values["temperature"])
    timeline, box = Timeline(), {}

    def work() -> None:
        try:
            box["result"] = engine.generate(prompts, params, overlap=mode == "overlap",
                                            timeline=timeline)
        except BaseException as error:  # noqa: BLE001 - handed back to the UI thread below
            box["error"] = error

    worker = threading.Thread(target=work, name=f"engine-{mode}", daemon=True)
    worker.start()
    expected = math.ceil(len(prompts) / values["batch"]) * (values["max_new"] + 1)
    started = time.perf_counter()
    try:
        while worker.is_alive():
            worker.join(REFRESH_S)
            live = _live_run(mode, timeline)
            step = viz.step_range(live)[1]
            text = viz.t(lang, "status_running").format(
                mode=mode, step=step, expected=expected, seconds=time.perf_counter() - started)
            fraction = (len(finished) + min(step / expected, 1.0)) / total_runs
            yield _progress(_progress_bar(fraction, text),
                            viz.side_by_side_figure(finished + [live], lang=lang))
    finally:
        worker.join()  # never hand the device to the next user while this run still uses it
    if "error" in box:
        raise box["error"]
    finished.append(box["result"].to_run_dict())


def _make_record(engine: Any, runs: list[dict[str, Any]], values: dict[str, Any],
                 mode: str) -> dict[str, Any]:
    from engine.record import make_record

    config = {**engine.config_dict(), "requests": values["requests"],
              "prompt_len_words": values["prompt_len"], "max_new_tokens": values["max_new"],
              "temperature": values["temperature"], "mode": mode}
    return make_record(engine.env_info(), config, runs)


def show_recorded(name: str | None, lang_choice: str):
    """Draw one bundled record, labelled with the hardware and date it was recorded on."""
    lang = _lang(lang_choice)
    if not name:
        return _shown(_status(viz.t(lang, "no_recorded")), None, lang)
    return _show_file(RECORDED_DIR / Path(name).name, lang, recorded=True)


def show_upload(path: str | None, lang_choice: str):
    """Draw an uploaded torch.profiler trace or run record like a live run."""
    if not path:
        return _progress(gr.update())
    return _show_file(Path(path), _lang(lang_choice), recorded=False)


def _show_file(path: Path, lang: str, recorded: bool):
    try:
        record = _load_any(path)
        files = _write_downloads(record)
    except Exception as error:  # noqa: BLE001 - a bad file must give a message, not a traceback
        message = viz.t(lang, "status_cannot_show").format(name=path.name, error=error)
        gr.Warning(message)
        return _shown(_status(message, "error"), None, lang)
    where = viz.record_label(record)
    text = (viz.t(lang, "status_recorded").format(where=where) if recorded else
            viz.t(lang, "status_imported").format(name=path.name, where=where))
    return _shown(_status(text, "ok"), record, lang, files)


def _load_any(path: Path) -> dict[str, Any]:
    """A run record as it is; anything else is read as a torch.profiler trace."""
    from engine.record import load_record, make_record
    from engine.trace import TraceImportError, import_profiler_trace

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
    lang = _lang(lang_choice)
    if not record:
        return viz.side_by_side_figure([], lang=lang)
    window = (int(first or 0), int(last or 0))
    return viz.side_by_side_figure(record["runs"], window=window, lang=lang)


def switch_language(lang_choice: str, record: dict[str, Any] | None, first: float | None,
                    last: float | None):
    """Every text on the page in the chosen language, and the charts redrawn with it."""
    lang = _lang(lang_choice)
    texts = [gr.update(value=viz.t(lang, key)) for key in MARKDOWN_KEYS]
    labels = [gr.update(label=viz.t(lang, key)) for key in LABEL_KEYS]
    labels[0]["choices"] = _mode_choices(lang)    # LABEL_KEYS starts with the mode and the
    labels[2]["choices"] = _model_choices(lang)   # model, whose choices are words too
    timeline, _, metrics_html, texts_html = _shown(gr.update(), record, lang)[1:5]
    zoomed = zoom(record, first, last, lang_choice)
    return (*texts, *labels, gr.update(value=viz.t(lang, "ctl_run")),
            gr.update(value=viz.t(lang, "ctl_zoom")), gr.update(label=viz.t(lang, "dl_record")),
            gr.update(label=viz.t(lang, "dl_trace")), timeline, zoomed, metrics_html, texts_html)


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


def check_cuda() -> Any:
    """Enable the CUDA-graphs box only where CUDA exists (or ZeroGPU will provide it)."""
    if spaces is not None:
        return gr.update(interactive=True)
    try:
        import torch

        available = torch.cuda.is_available()
    except ImportError:
        available = False
    return gr.update(interactive=available)


def prewarm() -> None:
    """Build the default engine in the background, so the first Run starts drawing at once."""
    try:
        device = _resolve_device("auto")
        with _device_locks.setdefault(device, threading.Lock()):
            _engine_for(_engine_kwargs("bundled", device, DEFAULTS, False))
    except Exception as error:  # noqa: BLE001 - a failed warm-up is retried, visibly, by Run
        print(f"prewarm skipped: {type(error).__name__}: {error}", flush=True)


run_handler = spaces.GPU(duration=120)(run_live) if spaces is not None else run_live

# ---- layout -----------------------------------------------------------------------------------

CSS = """
.status {padding: 8px 12px; border-radius: 6px; font-size: 14px;}
.status-error {background: rgba(214,39,40,.12); border-left: 4px solid #d62728;}
.status-ok {background: rgba(49,163,84,.12); border-left: 4px solid #31a354;}
.status-running, .status-info {background: rgba(49,130,189,.10); border-left: 4px solid #3182bd;}
.bar {height: 6px; background: rgba(128,128,128,.2); border-radius: 3px; margin-top: 4px;}
.bar > div {height: 6px; background: #3182bd; border-radius: 3px; transition: width .3s;}
#explain {font-size: 13.5px;}
"""
MARKDOWN_KEYS = ["title", "intro", "timeline_help", "zoom_help", "metrics_help",
                 "recorded_help", "upload_help"]
LABEL_KEYS = ["ctl_mode", "ctl_device", "ctl_model", "ctl_requests", "ctl_batch",
              "ctl_prompt_len", "ctl_prompts", "ctl_max_new", "ctl_temperature",
              "ctl_cuda_graph", "ctl_extra_cpu", "ctl_first_step", "ctl_last_step",
              "ctl_recorded", "ctl_upload", "tab_live", "tab_recorded", "tab_upload",
              "ctl_prompts"]

def _slider(name: str, label_key: str, step: float, scale: int | None = None) -> gr.Slider:
    low, high = LIMITS[name]
    return gr.Slider(low, high, DEFAULTS[name], step=step, label=viz.t("en", label_key),
                     elem_id=name.replace("_", "-"), scale=scale)


with gr.Blocks(title="Overlap scheduling, live") as demo:
    en = "en"
    record_state = gr.State(None)
    with gr.Row(equal_height=False):
        with gr.Column(scale=5):
            title_md = gr.Markdown(viz.t(en, "title"))
        language = gr.Radio(list(viz.LANGUAGES.values()), value=viz.LANGUAGES["en"],
                            show_label=False, scale=1, min_width=220, elem_id="language")
    intro_md = gr.Markdown(viz.t(en, "intro"))
    with gr.Tabs():
        with gr.Tab(viz.t(en, "tab_live"), elem_id="tab-live") as tab_live:
            with gr.Row():
                mode = gr.Radio(_mode_choices(en), value="both", label=viz.t(en, "ctl_mode"),
                                elem_id="mode")
                device = gr.Radio(DEVICES, value="auto", label=viz.t(en, "ctl_device"),
                                  elem_id="device")
                model = gr.Dropdown(_model_choices(en), value="bundled", elem_id="model",
                                    label=viz.t(en, "ctl_model"))
            with gr.Row():
                requests = gr.Number(DEFAULTS["requests"], precision=0, elem_id="requests",
                                     label=viz.t(en, "ctl_requests"))
                batch = _slider("batch", "ctl_batch", 1)
                prompt_len = _slider("prompt_len", "ctl_prompt_len", 1)
                max_new = _slider("max_new", "ctl_max_new", 1)
            with gr.Row():
                temperature = _slider("temperature", "ctl_temperature", 0.05)
                extra_cpu = _slider("extra_cpu", "ctl_extra_cpu", 250, scale=2)
                cuda_graph = gr.Checkbox(False, label=viz.t(en, "ctl_cuda_graph"),
                                         interactive=False, elem_id="cuda-graph")
            with gr.Accordion(viz.t(en, "ctl_prompts"), open=False) as prompts_box:
                prompts_text = gr.Textbox(DEFAULT_PROMPTS, lines=4, show_label=False,
                                          label=viz.t(en, "ctl_prompts"), elem_id="prompts")
            run_button = gr.Button(viz.t(en, "ctl_run"), variant="primary", elem_id="run")
        with gr.Tab(viz.t(en, "tab_recorded"), elem_id="tab-recorded") as tab_recorded:
            recorded_md = gr.Markdown(viz.t(en, "recorded_help"))
            recorded = gr.Dropdown([], label=viz.t(en, "ctl_recorded"), elem_id="recorded")
        with gr.Tab(viz.t(en, "tab_upload"), elem_id="tab-upload") as tab_upload:
            upload_md = gr.Markdown(viz.t(en, "upload_help"))
            upload = gr.File(file_types=[".json", ".gz"], label=viz.t(en, "ctl_upload"),
                             elem_id="upload")
    status = gr.HTML(_status(viz.t(en, "no_runs")), elem_id="status")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            timeline = gr.Plot(viz.side_by_side_figure([]), show_label=False,
                               elem_id="timeline")
            with gr.Row():
                first_step = gr.Number(20, precision=0, label=viz.t(en, "ctl_first_step"),
                                       elem_id="first-step", min_width=100)
                last_step = gr.Number(25, precision=0, label=viz.t(en, "ctl_last_step"),
                                      elem_id="last-step", min_width=100)
                zoom_button = gr.Button(viz.t(en, "ctl_zoom"), elem_id="zoom")
            zoom_md = gr.Markdown(viz.t(en, "zoom_help"))
            zoomed = gr.Plot(viz.side_by_side_figure([]), show_label=False, elem_id="zoomed")
        with gr.Column(scale=1, min_width=280, elem_id="explain"):
            timeline_md = gr.Markdown(viz.t(en, "timeline_help"))
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            metrics = gr.HTML(elem_id="metrics")
            texts = gr.HTML(elem_id="texts")
        with gr.Column(scale=1, min_width=280):
            metrics_md = gr.Markdown(viz.t(en, "metrics_help"))
            download_record = gr.DownloadButton(viz.t(en, "dl_record"), interactive=False,
                                                elem_id="download-record")
            download_trace = gr.DownloadButton(viz.t(en, "dl_trace"), interactive=False,
                                               elem_id="download-trace")

    # ---- events -----------------------------------------------------------------------------
    OUTPUTS = [status, timeline, zoomed, metrics, texts, first_step, last_step, record_state,
               download_record, download_trace]
    run_button.click(run_handler, [mode, device, model, requests, batch, prompt_len,
                                   prompts_text, max_new, temperature, cuda_graph, extra_cpu,
                                   language], OUTPUTS,
                     concurrency_limit=1, concurrency_id="engine", show_progress="minimal",
                     show_progress_on=[status])
    recorded.input(show_recorded, [recorded, language], OUTPUTS, show_progress_on=[status])
    upload.upload(show_upload, [upload, language], OUTPUTS, concurrency_limit=2,
                  show_progress_on=[status])
    zoom_button.click(zoom, [record_state, first_step, last_step, language], zoomed)
    language.change(switch_language, [language, record_state, first_step, last_step],
                    [title_md, intro_md, timeline_md, zoom_md, metrics_md, recorded_md, upload_md,
                     mode, device, model, requests, batch, prompt_len, prompts_text, max_new,
                     temperature, cuda_graph, extra_cpu, first_step, last_step, recorded, upload,
                     tab_live, tab_recorded, tab_upload, prompts_box, run_button, zoom_button,
                     download_record, download_trace, timeline, zoomed, metrics, texts],
                    show_progress="hidden")
    demo.load(list_recorded, None, recorded, show_progress="hidden")
    demo.load(check_cuda, None, cuda_graph, show_progress="hidden")


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the overlap-scheduling demo.")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to serve on (default: $GRADIO_SERVER_NAME or 127.0.0.1)")
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                        help="port to serve on (default: $GRADIO_SERVER_PORT or 7860)")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="do not build the default engine in the background at start")
    args = parser.parse_args()
    # The engine starts its CPU device process with multiprocessing "spawn", which re-runs the
    # main script in the child. The child needs none of this UI (importing gradio there doubled
    # the engine's start-up time on a 2-core machine), so hide the script from spawn: the child
    # imports only the engine modules its target function lives in.
    sys.modules["__main__"].__dict__.pop("__file__", None)
    demo.queue(default_concurrency_limit=4)
    demo.launch(server_name=args.host, server_port=args.port, css=CSS,
                max_file_size=MAX_UPLOAD_BYTES, theme=gr.themes.Soft(), footer_links=["api"],
                prevent_thread_lock=True)
    if not args.no_prewarm and spaces is None:  # on ZeroGPU the GPU exists only inside a run
        threading.Thread(target=prewarm, name="prewarm", daemon=True).start()
    demo.block_thread()


if __name__ == "__main__":
    main()
