"""Gradio UI: run the engine's scheduling loops and watch their timelines, step by step.

Glue only: the layout, and events wired to the handlers in ``ui/`` (live runs, records, the
step-through replay, the hazard lab). Every source of a run (a live run, a recorded GPU run, an
uploaded trace) becomes a schema-1 record and takes one path to the screen through ``viz``.
The engine never runs in this process: the scheduler process does that (``ui.common.scheduler``),
started in the background once the page is up, so the web server never holds the GIL the
scheduler needs.
"""

from __future__ import annotations

from ui import stopping

if __name__ == "__main__":     # before the slow imports: Ctrl-C is the app's from its first line
    stopping.take_signals()

import argparse
import functools
import os
import sys
import threading
from typing import Any

import gradio as gr

import texts
import viz
from record.schema import Loop
from ui import common, lab, latency_tab, live, parsing, presets, recorded_runs, replay
from ui.common import DEFAULTS, LIMITS, lang_of, loop_choices, model_choices
from ui.i18n import Translated
from ui.live_chart import live_chart
from ui.view import TYPED_SLIDER, MainView, plot, slider

if common.on_zero_gpu():  # Hugging Face ZeroGPU: GPU work must run inside a spaces.GPU call
    import spaces

    run_handler = spaces.GPU(duration=120)(live.run_live)
    lab_handler = spaces.GPU(duration=120)(lab.run_lab)
    safe_handler = spaces.GPU(duration=120)(lab.run_safe)
else:
    run_handler, lab_handler, safe_handler = live.run_live, lab.run_lab, lab.run_safe


def check_devices(lang_choice: str, wait: bool = True) -> tuple[Any, Any]:
    """CUDA is offered (device choice, graphs box) only where the scheduler process found a GPU
    (``wait``: for it to say so, on page load)."""
    lang = lang_of(lang_choice)
    cuda = common.cuda_seen()
    if not cuda and wait:
        try:
            cuda = common.scheduler().ready().cuda
        except Exception:  # noqa: BLE001 - no scheduler yet: say so when Run is pressed
            cuda = False
    info = None if cuda else texts.t(lang, "device_no_cuda")
    return (gr.update(choices=common.device_choices(lang, cuda), info=info,
                      label=texts.t(lang, "ctl_device")),
            gr.update(interactive=cuda, info=info, label=texts.t(lang, "ctl_cuda_graph")))


def switch_language(lang_choice: str, record: dict[str, Any] | None, spec: dict[str, Any] | None,
                    first: float | None, last: float | None):
    """Every text on the page in the chosen language, the status said again, the charts redrawn."""
    lang = lang_of(lang_choice)
    if record:
        view = recorded_runs.shown(spec, record, lang)
    else:
        empty = plot(viz.side_by_side_figure([], lang=lang))
        view = MainView(status=common.render_said(spec, lang), timeline=empty)
    zoomed = recorded_runs.zoom(record, first, last, lang_choice)
    return (*TR.updates(lang), view.status, view.timeline, zoomed, view.memory, view.metrics,
            view.texts, *check_devices(lang_choice, wait=False))


# ---- layout -----------------------------------------------------------------------------------

CSS = """
.status {padding: 8px 12px; border-radius: 6px; font-size: 14px;}
.status pre {white-space: pre-wrap; overflow-wrap: anywhere; max-height: 240px; overflow-y: auto;}
.status-error {background: rgba(214,39,40,.12); border-left: 4px solid #d62728;}
.status-ok {background: rgba(49,163,84,.12); border-left: 4px solid #31a354;}
.status-warn {background: rgba(253,174,107,.18); border-left: 4px solid #e6550d;}
.status-running, .status-info {background: rgba(49,130,189,.10); border-left: 4px solid #3182bd;}
.bar {height: 6px; background: rgba(128,128,128,.2); border-radius: 3px; margin-top: 4px;}
.bar > div {height: 6px; background: #3182bd; border-radius: 3px; transition: width .3s;}
#explain {font-size: 13.5px;}
#explain code, #metrics code {white-space: normal; overflow-wrap: anywhere;}
#step-caption {font-size: 14.5px; padding: 6px 12px; border-left: 4px solid #756bb1;
               background: rgba(117,107,177,.08); border-radius: 6px;}
#lab-result {font-size: 14px;}
.serving-scroll {overflow-x: auto;}
table.serving {border-collapse: collapse; font-size: 13px; white-space: nowrap;}
table.serving th, table.serving td {padding: 3px 10px; border-bottom: 1px solid rgba(128,128,128,.3);
                                     text-align: left;}
"""
TR = Translated()
RELAYOUT_JS = "() => { setTimeout(() => window.dispatchEvent(new Event('resize')), 60); }"
# A number typed into a slider's box stays as typed when the box loses focus. Gradio's slider
# clamps it to its range on blur, silently (999999 became 20000 and the run used that); the
# handlers check the value and say in the page's language what is wrong (ui.view.slider). A
# capture-phase listener runs before the box's own blur handler and stops it, for these sliders
# only; typing and Enter update the value as before.
KEEP_TYPED_JS = ("() => { document.addEventListener('blur', (e) => {"
                 " const box = e.target;"
                 " if (box instanceof HTMLInputElement && box.type === 'number'"
                 " && box.closest('.{cls}')) e.stopImmediatePropagation(); }, true); }")
STEP_JS = ("(s) => {{ const r = document.querySelector('#step input[type=range]');"
           " const lo = Number(r ? r.min : s), hi = Number(r ? r.max : s);"
           " return Math.min(Math.max(Number(s) + ({delta}), lo), hi); }}")


def _slider(name: str, key: str, step: float, scale: int | None = None) -> gr.Slider:
    low, high, _ = LIMITS[name]
    return TR.add(slider(low, high, DEFAULTS[name], step=step, label=texts.t("en", key),
                            elem_id=name.replace("_", "-"), scale=scale), key)


def _md(key: str, **kwargs: Any) -> gr.Markdown:
    return TR.add(gr.Markdown(texts.t("en", key), **kwargs), key, attr="value")


def _button(key: str, **kwargs: Any) -> gr.Button:
    return TR.add(gr.Button(texts.t("en", key), **kwargs), key, attr="value")


with gr.Blocks(title="Overlap scheduling, live") as demo:
    en = "en"
    record_state = gr.State(None)
    said_state = gr.State(None)
    lab_state = gr.State(None)
    with gr.Row(equal_height=False):
        with gr.Column(scale=5):
            _md("title")
        language = gr.Radio(list(texts.LANGUAGES.values()), value=texts.LANGUAGES["en"],
                            show_label=False, scale=1, min_width=220, elem_id="language")
    _md("intro")
    with gr.Tabs():
        with TR.add(gr.Tab(texts.t(en, "tab_live"), elem_id="tab-live"), "tab_live") as live_tab:
            with gr.Row():
                loops = TR.add(gr.CheckboxGroup(loop_choices(en), value=[Loop.NORMAL, Loop.OVERLAP],
                                                label=texts.t(en, "ctl_loops"), elem_id="loops",
                                                scale=3), "ctl_loops", choices=loop_choices)
                decode_steps = _slider("decode_steps", "ctl_k", 1, scale=1)
                stop_early = TR.add(gr.Checkbox(True, label=texts.t(en, "ctl_stop_early"),
                                                elem_id="stop-early", scale=2), "ctl_stop_early")
            with gr.Row():
                # Not in TR: check_devices says everything about these two in each language.
                device = gr.Radio(common.device_choices(en, False), value="auto",
                                  label=texts.t(en, "ctl_device"), elem_id="device")
                # A hub id typed into the box is a value too (checked before any run).
                model = TR.add(gr.Dropdown(model_choices(en), value="bundled", elem_id="model",
                                           allow_custom_value=True, scale=2,
                                           label=texts.t(en, "ctl_model")), "ctl_model",
                               choices=model_choices)
                requests = TR.add(gr.Number(DEFAULTS["requests"], elem_id="requests",
                                            label=texts.t(en, "ctl_requests")), "ctl_requests")
                request_rate = TR.add(gr.Number(DEFAULTS["request_rate"], elem_id="request-rate",
                                                label=texts.t(en, "ctl_request_rate")),
                                      "ctl_request_rate")
            with gr.Row():
                batch = _slider("batch", "ctl_batch", 1)
                prompt_len = _slider("prompt_len", "ctl_prompt_len", 1)
                max_new = _slider("max_new", "ctl_max_new", 1)
            with gr.Row():
                temperature = _slider("temperature", "ctl_temperature", 0.05)
                extra_cpu_us = _slider("extra_cpu_us", "ctl_extra_cpu", 250, scale=2)
                cuda_graph = gr.Checkbox(False, label=texts.t(en, "ctl_cuda_graph"),
                                         interactive=False, elem_id="cuda-graph")
            with gr.Row():
                shared_prefix = TR.add(gr.Number(DEFAULTS["shared_prefix"],
                                                 elem_id="shared-prefix",
                                                 label=texts.t(en, "ctl_shared_prefix")),
                                       "ctl_shared_prefix")
                kv_pages = TR.add(gr.Number(DEFAULTS["kv_pages"], elem_id="kv-pages",
                                            label=texts.t(en, "ctl_kv_pages")), "ctl_kv_pages")
            with TR.add(gr.Accordion(texts.t(en, "ctl_prompts"), open=False), "ctl_prompts"):
                prompts_text = gr.Textbox(common.DEFAULT_PROMPTS, lines=4, show_label=False,
                                          elem_id="prompts")
                chat = TR.add(gr.Checkbox(False, label=texts.t(en, "ctl_chat"), elem_id="chat"),
                              "ctl_chat")
            with gr.Row(equal_height=False, elem_id="presets"):
                with gr.Column(scale=3, min_width=300):
                    _md("preset_help", elem_id="preset-help")
                preset_overlap = _button("preset_overlap", elem_id="preset-overlap", size="sm",
                                         scale=1, min_width=180)
                preset_multistep = _button("preset_multistep", elem_id="preset-multistep",
                                           size="sm", scale=1, min_width=180)
            preset_said = gr.Markdown("", elem_id="preset-said")
            with gr.Row():
                run_button = _button("ctl_run", variant="primary", elem_id="run", scale=4)
                stop_button = _button("ctl_stop", variant="stop", elem_id="stop", scale=1)
            _md("process_note", elem_id="process-note")
        with TR.add(gr.Tab(texts.t(en, "tab_recorded"), elem_id="tab-recorded"),
                    "tab_recorded") as recorded_tab:
            _md("recorded_help")
            recorded = TR.add(gr.Dropdown([], label=texts.t(en, "ctl_recorded"),
                                          elem_id="recorded"), "ctl_recorded")
        with TR.add(gr.Tab(texts.t(en, "tab_upload"), elem_id="tab-upload"),
                    "tab_upload") as upload_tab:
            _md("upload_help")
            # Any file is taken and answered (a filter in the browser refused an image silently).
            upload, beside = recorded_runs.import_controls(TR)
        with TR.add(gr.Tab(texts.t(en, "tab_serving"), elem_id="tab-serving"),
                    "tab_serving") as serving_tab:
            _md("serving_help")
            serving_file = TR.add(gr.Dropdown([], label=texts.t(en, "ctl_serving_file"),
                                              elem_id="serving-file"), "ctl_serving_file")
            serving_plot = gr.Plot(plot(viz.latency_figure([], en)), show_label=False,
                                   elem_id="serving-plot")
            serving_table = gr.HTML(elem_id="serving-table")
        with TR.add(gr.Tab(texts.t(en, "tab_lab"), elem_id="tab-lab"), "tab_lab") as lab_tab:
            _md("lab_help")
            with gr.Row():
                lab_switch = TR.add(gr.Radio([], label=texts.t(en, "lab_switch"),
                                             elem_id="lab-switch", scale=4), "lab_switch")
                lab_seed = TR.add(gr.Number(0, precision=0, label=texts.t(en, "lab_seed"),
                                            elem_id="lab-seed", min_width=90, scale=1),
                                  "lab_seed")
            lab_guards = gr.Markdown(elem_id="lab-guards")
            with gr.Row():
                lab_run = _button("lab_run", variant="primary", elem_id="lab-run")
                lab_safe = _button("lab_safe", elem_id="lab-safe")
            lab_result = gr.HTML(common.status(texts.t(en, "lab_idle")), elem_id="lab-result")
    # What a run shows (its status, the whole run, the step-through): under the tabs that show
    # runs (live, recorded, imported); the serving tab and the lab have their own results.
    with gr.Column(elem_id="run-view") as run_view:
        status = gr.HTML(common.status(texts.t(en, "no_runs")), elem_id="status")
        with gr.Tabs():
            with TR.add(gr.Tab(texts.t(en, "tab_whole"), elem_id="tab-whole"), "tab_whole") as whole_tab:
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3):
                        live_canvas = live_chart()
                        timeline = gr.Plot(plot(viz.side_by_side_figure([])), show_label=False,
                                           elem_id="timeline")
                        with gr.Row():
                            first_step = TR.add(gr.Number(20, precision=0, elem_id="first-step",
                                                          label=texts.t(en, "ctl_first_step"),
                                                          min_width=100), "ctl_first_step")
                            last_step = TR.add(gr.Number(25, precision=0, elem_id="last-step",
                                                         label=texts.t(en, "ctl_last_step"),
                                                         min_width=100), "ctl_last_step")
                            zoom_button = _button("ctl_zoom", elem_id="zoom")
                        _md("zoom_help")
                        zoomed = gr.Plot(plot(viz.side_by_side_figure([])), show_label=False,
                                         elem_id="zoomed")
                        memory = gr.Plot(show_label=False, elem_id="memory", visible=False)
                    with gr.Column(scale=1, min_width=280, elem_id="explain"):
                        _md("timeline_help")
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3):
                        metrics = gr.HTML(elem_id="metrics")
                        texts_box = gr.HTML(elem_id="texts")
                    with gr.Column(scale=1, min_width=280):
                        _md("metrics_help")
                        download_record = TR.add(gr.DownloadButton(
                            texts.t(en, "dl_record"), interactive=False, elem_id="download-record"),
                            "dl_record")
                        download_trace = TR.add(gr.DownloadButton(
                            texts.t(en, "dl_trace"), interactive=False, elem_id="download-trace"),
                            "dl_trace")
            with TR.add(gr.Tab(texts.t(en, "tab_steps"), elem_id="tab-steps"), "tab_steps") as steps_tab:
                _md("replay_help")
                with gr.Row(equal_height=True):
                    replay_run = TR.add(gr.Dropdown([], label=texts.t(en, "ctl_replay_run"),
                                                    elem_id="replay-run", scale=1),
                                        "ctl_replay_run")
                    step = TR.add(slider(0, 1, 0, step=1, label=texts.t(en, "ctl_step"),
                                            elem_id="step", scale=3), "ctl_step")
                    prev_button = _button("ctl_prev", elem_id="prev-step", scale=0, min_width=140)
                    next_button = _button("ctl_next", elem_id="next-step", scale=0, min_width=140)
                step_caption = gr.Markdown(texts.t(en, "replay_empty"), elem_id="step-caption")
                step_plot = gr.Plot(plot(viz.step_figure(None, 0)), show_label=False,
                                    elem_id="step-plot")
                _md("unrolled_help")
                unrolled = gr.Plot(plot(viz.unrolled_figure(None)), show_label=False,
                                   elem_id="unrolled")

    # ---- events -----------------------------------------------------------------------------
    OUTPUTS = MainView.components(
        status=status, timeline=timeline, live=live_canvas, zoomed=zoomed, memory=memory,
        metrics=metrics, texts=texts_box,
        first_step=first_step, last_step=last_step, record=record_state, said=said_state,
        download_record=download_record, download_trace=download_trace)
    REPLAY = [replay_run, step, step_caption, step_plot, unrolled]
    ENGINE_QUEUE = {"concurrency_limit": 1, "concurrency_id": "engine"}
    run_button.click(
        run_handler, [loops, decode_steps, stop_early, device, model, requests, batch, prompt_len,
                      prompts_text, max_new, temperature, cuda_graph, extra_cpu_us,
                      request_rate, chat, language, shared_prefix, kv_pages],
        OUTPUTS, show_progress="minimal", show_progress_on=[status], **ENGINE_QUEUE,
    ).then(replay.reset_replay, [record_state, language, step], REPLAY, show_progress="hidden",
           **replay.ONE_QUEUE).then(presets.follow, [device, extra_cpu_us, language], preset_said,
                  show_progress="hidden")         # sized by what this run measured
    PRESET_OUTPUTS = [loops, decode_steps, stop_early, requests, batch, prompt_len, max_new,
                      temperature, extra_cpu_us, request_rate, preset_said]
    for button, name in ((preset_overlap, Loop.OVERLAP), (preset_multistep, Loop.MULTISTEP)):
        button.click(functools.partial(presets.preset, name), [language, device],
                     PRESET_OUTPUTS, queue=False, show_progress="hidden")
    # The extra-CPU-work control fits the device a run uses: on a page load once the warm-up
    # has measured it (a GPU's forward is a fraction of a CPU's), and when the reader picks one.
    SIZING = dict(fn=presets.device_defaults, inputs=[device, extra_cpu_us, cuda_graph, language],
                  outputs=[extra_cpu_us, cuda_graph, preset_said], show_progress="hidden")
    device.input(functools.partial(presets.device_defaults, changed=True),
                 SIZING["inputs"], SIZING["outputs"], show_progress="hidden")
    # Not queued behind the run it stops.
    stop_button.click(live.stop_run, [language], status, queue=False, show_progress="hidden")
    recorded.input(recorded_runs.show_recorded, [recorded, language], OUTPUTS,
                   show_progress_on=[status]
                   ).then(replay.reset_replay, [record_state, language, step], REPLAY,
                          show_progress="hidden", **replay.ONE_QUEUE)
    upload.upload(recorded_runs.show_upload, [upload, beside, record_state, language], OUTPUTS,
                  concurrency_limit=2,
                  show_progress_on=[status]
                  ).then(replay.reset_replay, [record_state, language, step], REPLAY,
                         show_progress="hidden", **replay.ONE_QUEUE)
    zoom_button.click(recorded_runs.zoom_steps, [record_state, first_step, last_step, language],
                      [zoomed, first_step, last_step])
    replay_run.input(replay.render_run, [record_state, replay_run, language, step], REPLAY[1:],
                     show_progress="hidden", **replay.ONE_QUEUE)
    step.change(replay.render_step, [record_state, replay_run, step, language],
                [step_caption, step_plot], show_progress="hidden", trigger_mode="always_last",
                **replay.ONE_QUEUE)
    # The buttons move the slider in the browser, from the value it shows now, within its
    # range: two quick clicks are two steps (read on the server, the second click saw the
    # value from before the first had come back, and one step was lost).
    prev_button.click(None, [step], [step], js=STEP_JS.format(delta=-1))
    next_button.click(None, [step], [step], js=STEP_JS.format(delta=+1))
    lab_switch.change(lab.describe_switch, [lab_switch, language, device], [lab_guards, lab_run],
                      show_progress="hidden", **lab.ONE_QUEUE)
    # A switch that needs CUDA is marked as soon as the device says there is none. The marks
    # never change the choice (a reader may have clicked meanwhile); what it guards is then
    # said for the choice as it is by then (one queue with the click's: ui.lab.ONE_QUEUE).
    LAB_MARKS = dict(fn=lab.switch_choices, inputs=[language, lab_switch, device],
                     outputs=lab_switch, show_progress="hidden", **lab.ONE_QUEUE)
    LAB_SAID = dict(fn=lab.describe_switch, inputs=[lab_switch, language, device],
                    outputs=[lab_guards, lab_run], show_progress="hidden", **lab.ONE_QUEUE)
    device.change(**LAB_MARKS).then(**LAB_SAID)
    lab_run.click(lab_handler, [lab_switch, model, device, lab_seed, language],
                  [lab_result, lab_state], show_progress="minimal", **ENGINE_QUEUE)
    lab_safe.click(safe_handler, [model, device, lab_seed, language], [lab_result, lab_state],
                   show_progress="minimal", **ENGINE_QUEUE)
    language.change(
        switch_language, [language, record_state, said_state, first_step, last_step],
        [*TR.components, status, timeline, zoomed, memory, metrics, texts_box, device, cuda_graph],
        show_progress="hidden",
    ).then(replay.redraw, [record_state, replay_run, step, language],
           [step_caption, step_plot, unrolled], show_progress="hidden", **replay.ONE_QUEUE
           ).then(**LAB_MARKS).then(**LAB_SAID
                                    ).then(lab.redraw, [lab_state, language], lab_result,
                                           show_progress="hidden"
                         ).then(latency_tab.relabel, [serving_file, language],
                                [serving_file, serving_plot, serving_table], show_progress="hidden")
    serving_file.input(latency_tab.show_measured, [serving_file, language],
                       [serving_plot, serving_table], show_progress="hidden")
    # A chart updated while its tab was hidden was laid out at a default width: on showing the
    # tab, a resize event lets plotly fit it to its container again.
    for tab in (whole_tab, steps_tab):
        tab.select(None, js=RELAYOUT_JS)
    # The run's half of the page belongs to the tabs that show runs; the serving tab and the
    # lab show their own results, and the page is that much shorter there.
    for tab, shows_runs in ((live_tab, True), (recorded_tab, True), (upload_tab, True),
                            (serving_tab, False), (lab_tab, False)):
        shown = tab.select(functools.partial(gr.update, visible=shows_runs), None, run_view,
                           queue=False, show_progress="hidden")
        if shows_runs:                     # charts laid out while hidden: fit them again
            shown.then(None, js=RELAYOUT_JS)
    demo.load(None, js=KEEP_TYPED_JS.replace("{cls}", TYPED_SLIDER))
    demo.load(recorded_runs.list_recorded, None, recorded, show_progress="hidden")
    demo.load(latency_tab.relabel, [serving_file, language],
              [serving_file, serving_plot, serving_table], show_progress="hidden")
    # The switches at once, marked as the machine is known so far; again once the scheduler
    # process has said whether it found a GPU.
    demo.load(**LAB_MARKS).then(**LAB_SAID)
    devices_known = demo.load(check_devices, [language], [device, cuda_graph],
                              show_progress="hidden")
    devices_known.then(**LAB_MARKS).then(**LAB_SAID)
    devices_known.then(presets.wait_for_warm_up, device, None, concurrency_limit=None,
                       show_progress="hidden").then(**SIZING)
    language.change(presets.describe, [device, extra_cpu_us, language], preset_said,
                    show_progress="hidden")
    # The sizing line speaks of the control's value: it follows the control (a preset, a drag).
    extra_cpu_us.change(presets.follow, [device, extra_cpu_us, language], preset_said,
                        show_progress="hidden", queue=False)


def start_background(warm_up: bool) -> None:
    """The scheduler process and its warm-up (started now, so a page load finds it starting),
    and the first upload's parser process."""
    if warm_up and not common.on_zero_gpu():      # ZeroGPU: the GPU exists only in a run
        common.scheduler()
        threading.Thread(target=live.prewarm, name="prewarm", daemon=True).start()
    else:
        presets.WARMED.set()          # no warm-up will measure: a page load sizes at once
    threading.Thread(target=parsing.prepare, name="parse-prepare", daemon=True).start()


def main() -> int:
    parser = argparse.ArgumentParser(description="Serve the overlap-scheduling demo.")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to serve on (default: $GRADIO_SERVER_NAME or 127.0.0.1)")
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                        help="port to serve on (default: $GRADIO_SERVER_PORT or 7860)")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="do not build the default engine in the background at start")
    args = parser.parse_args()
    # The scheduler process is started with multiprocessing "spawn", which re-runs the main
    # script in the child. The child needs none of this UI (importing gradio there doubled the
    # engine's start-up time on a 2-core machine), so hide the script from spawn: the child
    # imports only the engine modules its target function lives in.
    sys.modules["__main__"].__dict__.pop("__file__", None)
    if not common.on_zero_gpu():
        from engine.processes.scheduler_process import pin_server

        pin_server(common.placement())              # keep off the device process's core
    demo.queue(default_concurrency_limit=4)
    stopping.children_from_here()     # a page load may start the scheduler process from here on
    try:
        demo.launch(server_name=args.host, server_port=args.port, css=CSS,
                    max_file_size=recorded_runs.MAX_UPLOAD_BYTES, theme=gr.themes.Soft(),
                    footer_links=[], prevent_thread_lock=True)
        if not stopping.asked():          # a Ctrl-C during the launch: start nothing more
            start_background(warm_up=not args.no_prewarm)
        stopping.wait()                   # serve until Ctrl-C or SIGTERM (ui.stopping)
    finally:
        common.SHUTTING_DOWN.set()
        demo.close(verbose=False)
        common.shutdown()
    stopping.say_stopped()
    return stopping.exit_code()


if __name__ == "__main__":
    sys.exit(main())
