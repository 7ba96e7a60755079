"""The serving tab: latency against request rate for both loops, as measured
(``ui.serving_runs``)."""

from __future__ import annotations

import gradio as gr

import viz
from ui import serving_runs
from ui.tabs.parts import Page, labelled, md
from ui.view import plot


def build(page: Page) -> gr.Tab:
    """The tab, its events wired at once: it shows its own results, not the run view."""
    with labelled(page, gr.Tab, "tab_serving", elem_id="tab-serving") as tab:
        md(page, "serving_help")
        measurement = labelled(page, gr.Dropdown, "ctl_serving_file", [], elem_id="serving-file")
        figure = gr.Plot(plot(viz.latency_figure([], "en")), show_label=False,
                         elem_id="serving-plot")
        table = gr.HTML(elem_id="serving-table")
    measurement.input(serving_runs.show_measured, [measurement, page.language], [figure, table],
                      show_progress="hidden", **serving_runs.ONE_QUEUE)
    for event in (page.demo.load, page.language.change):     # listed, and said again
        event(serving_runs.relabel, [measurement, page.language], [measurement, figure, table],
              show_progress="hidden", **serving_runs.ONE_QUEUE)
    return tab
