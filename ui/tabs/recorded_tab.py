"""The recorded GPU runs tab: pick one of ``assets/recorded`` and see it as a live run is seen
(``ui.recorded_runs``); where other engines recorded the same work, see them all side by side
(``ui.same_work``)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

import texts
from ui import recorded_runs, same_work
from ui.tabs.parts import Page, labelled, md
from ui.tabs.run_view import RunView


@dataclass
class RecordedTab:
    tab: gr.Tab
    recorded: gr.Dropdown
    same_work: gr.Button              # every engine's loops on the chosen record's workload


def build(page: Page) -> RecordedTab:
    with labelled(page, gr.Tab, "tab_recorded", elem_id="tab-recorded") as tab:
        md(page, "recorded_help")
        recorded = labelled(page, gr.Dropdown, "ctl_recorded", [], elem_id="recorded")
        beside = gr.Button(texts.t("en", "recorded_same_work").format(engines=2), visible=False,
                           size="sm", elem_id="same-work")
    return RecordedTab(tab, recorded, beside)


def wire(tab: RecordedTab, page: Page, view: RunView) -> None:
    view.reset_replay(tab.recorded.input(recorded_runs.show_recorded, [tab.recorded, page.language],
                                         view.outputs(), show_progress_on=[view.status]),
                      page.language)
    # The button names how many engines it would show, in the page's language.
    for event in (tab.recorded.input, page.language.change):
        event(same_work.offer, [tab.recorded, page.language], tab.same_work,
              show_progress="hidden")
    view.reset_replay(tab.same_work.click(recorded_runs.show_same_work, [tab.recorded, page.language],
                                          view.outputs(), show_progress_on=[view.status]),
                      page.language)
    page.demo.load(recorded_runs.list_recorded, None, tab.recorded, show_progress="hidden")
    # The records' labels name their engines in the page's language; the choice stays.
    page.language.change(recorded_runs.list_recorded, [page.language, tab.recorded], tab.recorded,
                         show_progress="hidden")
