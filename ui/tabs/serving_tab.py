"""The serving tab: latency against request rate for both loops, as measured
(``ui.serving_runs``)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

import viz
from ui import serving_runs
from ui.tabs.parts import Page, labelled, md
from ui.view import plot


@dataclass
class ServingTab:
    tab: gr.Tab
    measurement: gr.Dropdown
    figure: gr.Plot
    table: gr.HTML


def build(page: Page) -> ServingTab:
    with labelled(page, gr.Tab, "tab_serving", elem_id="tab-serving") as tab:
        md(page, "serving_help")
        measurement = labelled(page, gr.Dropdown, "ctl_serving_file", [], elem_id="serving-file")
        figure = gr.Plot(plot(viz.latency_figure([], "en")), show_label=False,
                         elem_id="serving-plot")
        table = gr.HTML(elem_id="serving-table")
    return ServingTab(tab, measurement, figure, table)


def wire(tab: ServingTab, page: Page) -> None:
    shown = [tab.measurement, tab.figure, tab.table]
    tab.measurement.input(serving_runs.show_measured, [tab.measurement, page.language],
                          [tab.figure, tab.table], show_progress="hidden",
                          **serving_runs.ONE_QUEUE)
    for event in (page.demo.load, page.language.change):     # listed, and said again
        event(serving_runs.relabel, [tab.measurement, page.language], shown,
              show_progress="hidden", **serving_runs.ONE_QUEUE)
