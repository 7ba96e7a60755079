"""The hazard lab tab: pick one safeguard to remove, run, and see what the engine's checks found
(``ui.lab_runs``). It runs the live tab's model on the live tab's device."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import gradio as gr

import texts
from ui import lab_runs
from ui.status import status
from ui.tabs.parts import LAB_QUEUE, Page, button, labelled, md, on_gpu_call, queued_js


@dataclass
class LabTab:
    tab: gr.Tab
    switch: gr.Radio
    seed: gr.Number
    guards: gr.Markdown               # what the chosen switch's safeguard guards
    run: gr.Button
    safe: gr.Button
    result: gr.HTML
    report: gr.State                  # the last report, redrawn in another language


def build(page: Page) -> LabTab:
    en = "en"
    with labelled(page, gr.Tab, "tab_lab", elem_id="tab-lab") as tab:
        md(page, "lab_help")
        with gr.Row():
            switch = labelled(page, gr.Radio, "lab_switch", lab_runs.switch_titles(en),
                              value=lab_runs.FIRST_SWITCH, elem_id="lab-switch", scale=4)
            # No precision: a typed 2.5 reaches the handler, which refuses it (not rounded to 2).
            seed = labelled(page, gr.Number, "lab_seed", 0, elem_id="lab-seed", min_width=90,
                            scale=1)
        guards = gr.Markdown(elem_id="lab-guards")
        with gr.Row():
            run = button(page, "lab_run", variant="primary", elem_id="lab-run")
            safe = button(page, "lab_safe", elem_id="lab-safe")
        result = gr.HTML(status(texts.t(en, "lab_idle")), elem_id="lab-result")
    return LabTab(tab, switch, seed, guards, run, safe, result, gr.State(None))


def wire(tab: LabTab, page: Page, model: Any, device: Any, devices_known: Any) -> None:
    """``model`` and ``device``: the live tab's; ``devices_known``: the page load's event that
    learns whether there is a GPU."""
    language = page.language
    # A switch that needs CUDA is marked as soon as the device says there is none; what it
    # guards is then said for the choice as it is by then (one queue with the click's).
    marks: dict[str, Any] = dict(fn=lab_runs.switch_choices, inputs=[language, device],
                 outputs=tab.switch, show_progress="hidden", **lab_runs.ONE_QUEUE)
    said: dict[str, Any] = dict(fn=lab_runs.describe_switch, inputs=[tab.switch, language, device],
                outputs=[tab.guards, tab.run], show_progress="hidden", **lab_runs.ONE_QUEUE)
    tab.switch.change(**said)
    device.change(**marks).then(**said)
    # Said at once that the run waits its turn in the engine's line; its own status follows.
    for run_button in (tab.run, tab.safe):
        run_button.click(None, [language], tab.result, js=queued_js("status_queued"))
    lab_run = on_gpu_call(lab_runs.run_lab)
    tab.run.click(functools.partial(lab_runs.in_line, lab_run),
                  [tab.switch, model, device, tab.seed, language],
                  [tab.result, tab.report], show_progress="hidden", **LAB_QUEUE)
    tab.safe.click(functools.partial(lab_runs.in_line, lab_run, None),
                   [model, device, tab.seed, language],
                   [tab.result, tab.report], show_progress="hidden", **LAB_QUEUE)
    language.change(**marks).then(**said).then(lab_runs.redraw, [tab.report, language], tab.result,
                                               show_progress="hidden")
    # The switches marked as the machine is known so far; again once it is known.
    page.demo.load(**marks).then(**said)
    devices_known.then(**marks).then(**said)
