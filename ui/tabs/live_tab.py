"""The live run tab: the controls, the presets, Run and Stop.

Run sends the controls as one ``Controls`` to the engine's line (``ui.waiting.in_line``), which
runs ``ui.live_runs.run_live`` when the visitor's turn comes; Stop reaches this page's run and no
other. The presets set controls by name (``ui.presets``); the extra-CPU-work control and its
sizing line follow the device a run would use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import gradio as gr

import texts
from record.schema import Loop
from ui import inputs, live_runs, presets, scheduler_link, waiting
from ui.controls import Controls
from ui.i18n import lang_of
from ui.inputs import DEFAULTS, loop_choices, model_choices
from ui.tabs import run_view
from ui.tabs.parts import Page, button, control_slider, labelled, md, on_gpu_call, queued_js
from ui.tabs.run_view import RunView
from ui.turns import Ticket


@dataclass
class LiveTab:
    tab: gr.Tab
    controls: dict[str, Any]          # ``Controls`` field -> its component (the language aside)
    presets: dict[Loop, gr.Button]    # ``ui.presets.PRESETS`` name -> its button
    preset_said: gr.Markdown          # how the extra CPU work was sized
    run: gr.Button
    stop: gr.Button
    line_timer: gr.Timer              # while this page's run waits: where it stands, each second


def check_devices(lang_choice: str, wait: bool = True) -> tuple[Any, Any]:
    """CUDA is offered (device choice, graphs box) only where the scheduler process found a GPU
    (``wait``: for it to say so, on page load)."""
    lang = lang_of(lang_choice)
    cuda = scheduler_link.cuda_found() if wait else scheduler_link.cuda_seen()
    info = None if cuda else texts.t(lang, "device_no_cuda")
    return (gr.update(choices=inputs.device_choices(lang, cuda), info=info,
                      label=texts.t(lang, "ctl_device")),
            gr.update(interactive=cuda, info=info, label=texts.t(lang, "ctl_cuda_graph")))


def build(page: Page) -> LiveTab:
    """What a student needs in view (the loops, how much work, how heavy the scheduler, Run and
    the presets); every other control one click away, under "More settings"."""
    en = "en"
    start = Controls.page_defaults()
    with labelled(page, gr.Tab, "tab_live", elem_id="tab-live") as tab:
        c: dict[str, Any] = {}
        with gr.Row(equal_height=True):
            c["loops"] = labelled(page, gr.CheckboxGroup, "ctl_loops", loop_choices(en),
                                  value=list(start.loops), elem_id="loops", scale=3,
                                  choices=loop_choices)
            c["requests"] = labelled(page, gr.Number, "name_requests", DEFAULTS["requests"],
                                     elem_id="requests", min_width=110, scale=1)
            c["extra_cpu_us"] = control_slider(page, "extra_cpu_us", "ctl_extra_cpu", 250, scale=3)
        with gr.Row(equal_height=True, elem_id="presets"):
            run = button(page, "ctl_run", variant="primary", elem_id="run", scale=3)
            stop = button(page, "ctl_stop", variant="stop", elem_id="stop", scale=1)
            md(page, "presets_label", elem_id="presets-label", min_height=0)
            preset_buttons = {
                name: button(page, f"preset_{name}", elem_id=f"preset-{name}", scale=2)
                for name in presets.PRESETS}
        # How the extra CPU work was sized, and what is wrong with a number typed past its
        # ends: in view, under the control it speaks of.
        preset_said = gr.Markdown("", elem_id="preset-said")
        line_timer = gr.Timer(waiting.TICK_S, active=False)
        with labelled(page, gr.Accordion, "fold_more_settings", open=False,
                      elem_id="more-settings"):
            _more_settings(page, c, start)
            md(page, "preset_help", elem_id="preset-help")
            md(page, "process_note", elem_id="process-note")
    return LiveTab(tab, c, preset_buttons, preset_said, run, stop, line_timer)


def _more_settings(page: Page, c: dict[str, Any], start: Controls) -> None:
    """The controls a first run does not need (their components into ``c``)."""
    en = "en"
    with gr.Row():
        c["decode_steps"] = control_slider(page, "decode_steps", "ctl_k", 1, scale=1)
        c["stop_early"] = labelled(page, gr.Checkbox, "ctl_stop_early", start.stop_early,
                                   elem_id="stop-early", scale=2)
        # Not translated here: check_devices says everything about these two in each language.
        c["device"] = gr.Radio(inputs.device_choices(en, False), value=start.device, scale=2,
                               label=texts.t(en, "ctl_device"), elem_id="device")
    with gr.Row():
        # A hub id typed into the box is a value too (checked before any run).
        c["model"] = labelled(page, gr.Dropdown, "ctl_model", model_choices(en), value=start.model,
                              elem_id="model", allow_custom_value=True, scale=2,
                              choices=model_choices)
        c["request_rate"] = labelled(page, gr.Number, "ctl_request_rate", DEFAULTS["request_rate"],
                                     elem_id="request-rate")
        c["cuda_graph"] = gr.Checkbox(start.cuda_graph, label=texts.t(en, "ctl_cuda_graph"),
                                      interactive=False, elem_id="cuda-graph")
    with gr.Row():
        c["batch"] = control_slider(page, "batch", "ctl_batch", 1)
        c["prompt_len"] = control_slider(page, "prompt_len", "ctl_prompt_len", 1)
        c["max_new"] = control_slider(page, "max_new", "name_max_new", 1)
        c["temperature"] = control_slider(page, "temperature", "ctl_temperature", 0.05)
    with gr.Row():
        c["shared_prefix"] = labelled(page, gr.Number, "ctl_shared_prefix",
                                      DEFAULTS["shared_prefix"], elem_id="shared-prefix")
        c["kv_pages"] = labelled(page, gr.Number, "ctl_kv_pages", DEFAULTS["kv_pages"],
                                 elem_id="kv-pages")
    with labelled(page, gr.Accordion, "ctl_prompts", open=False):
        c["prompts_text"] = gr.Textbox(start.prompts_text, lines=4, show_label=False,
                                       elem_id="prompts")
        c["chat"] = labelled(page, gr.Checkbox, "ctl_chat", start.chat, elem_id="chat")


def wire(tab: LiveTab, page: Page, view: RunView) -> Any:
    """The tab's events; returns the page load's event that learns whether there is a GPU (the
    lab's switches follow it)."""
    language, c = page.language, tab.controls
    inputs = {**c, "lang_choice": language}
    run_handler = on_gpu_call(live_runs.run_live)
    # On ZeroGPU the run happens inside a GPU call, in a process of its own: a Stop in this
    # one cannot reach it there (it still takes a waiting run out of the line).
    reach_run = not scheduler_link.on_zero_gpu()

    async def run(values: dict[Any, Any], request: gr.Request):
        controls = Controls.from_inputs(values, inputs)

        def start(ticket: Ticket | None) -> Any:
            return run_handler(controls, ticket if reach_run else None)

        async for view in waiting.in_line(controls, request.session_hash, start):
            yield view

    # What this visitor's own last run measured: the only figures the sizing line quotes.
    own = gr.State(None)
    sized_by = [c["device"], c["extra_cpu_us"], language, own]
    # Every run is admitted at once and waits in the engine's line (ui.turns), not in Gradio's
    # queue, where neither its place nor its Stop could be told apart from another visitor's.
    # The status says so at once; meanwhile the page's line timer asks where the run stands.
    tab.run.click(None, [language], view.status, js=queued_js("status_queued"))
    tab.run.click(functools.partial(gr.update, active=True), None, tab.line_timer, queue=False,
                  show_progress="hidden")
    tab.line_timer.tick(waiting.line_said, [language], view.status, queue=False,
                        show_progress="hidden", api_name="line_said")
    ran = tab.run.click(run, set(inputs.values()), view.outputs(), show_progress="hidden",
                        concurrency_limit=None, api_name="run_live")
    ran.then(functools.partial(gr.update, active=False), None, tab.line_timer, queue=False,
             show_progress="hidden")      # the Run handler has ended, however it ended
    redrawn = ran.then(run_view.follow_language,             # a language switched meanwhile
                       [language, view.shown_lang, view.record, view.said, view.first_step,
                        view.last_step], run_view.redrawn(view), show_progress="hidden")
    view.reset_replay(redrawn, language).then(
        presets.own_measurement, [view.record, view.said, own], own, show_progress="hidden"
    ).then(presets.follow, sized_by, tab.preset_said,             # sized by what this run measured
           show_progress="hidden", **presets.SAID_QUEUE)
    # A set of outputs: the handler answers with a {component: value} dict.
    preset_outputs: Any = {*(c[name] for name in presets.CONTROLS), tab.preset_said}
    for name, preset_button in tab.presets.items():
        preset_button.click(functools.partial(_preset, name, tab), [language, c["device"], own],
                            preset_outputs, queue=False, show_progress="hidden")
    # The extra-CPU-work control fits the device a run uses: on a page load once the warm-up
    # has measured it, and when the reader picks one.
    sizing = dict(fn=presets.device_defaults,
                  inputs=[c["device"], c["extra_cpu_us"], c["cuda_graph"], language, own],
                  outputs=[c["extra_cpu_us"], c["cuda_graph"], tab.preset_said],
                  show_progress="hidden", **presets.SAID_QUEUE)
    c["device"].input(**{**sizing, "fn": functools.partial(presets.device_defaults, changed=True)})
    # Not queued behind the run it stops; it stops this page's run only, as closing the page does.
    tab.stop.click(live_runs.stop_run, [language], view.status, queue=False, show_progress="hidden",
                   api_name="stop_run")
    page.demo.unload(live_runs.leave_page)
    language.change(functools.partial(check_devices, wait=False), [language],
                    [c["device"], c["cuda_graph"]], show_progress="hidden")
    language.change(presets.describe, sized_by, tab.preset_said, show_progress="hidden",
                    **presets.SAID_QUEUE)
    # The sizing line speaks of the control's value: it follows the control (a preset, a drag).
    c["extra_cpu_us"].change(presets.follow, sized_by, tab.preset_said, show_progress="hidden",
                             **presets.SAID_QUEUE)
    devices_known = page.demo.load(check_devices, [language], [c["device"], c["cuda_graph"]],
                                   show_progress="hidden")
    devices_known.then(presets.wait_for_warm_up, None, None, concurrency_limit=None,
                       show_progress="hidden").then(**sizing)
    return devices_known


def _preset(name: str, tab: LiveTab, lang_choice: str, device_choice: str,
            own: Any) -> dict[Any, Any]:
    """A preset's values, each to its control by name, and its sentence (``own``: what this
    visitor's last run measured)."""
    values, said = presets.preset(name, lang_choice, device_choice, own)
    return {**{tab.controls[control]: value for control, value in values.items()},
            tab.preset_said: said}
