"""What a run shows, under the tabs that show runs, in the lesson's order: the headline and
status, the loops' timelines and the step window, the formula and metrics; then, folded, the
step-through replay, the KV memory and the generated texts.

The record on screen and its status (as data) are per-visitor ``gr.State``s, so a language switch
can draw and say them again.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Any

import gradio as gr

import texts
import viz
from record.schema import RecordDict
from ui import live_runs, recorded_runs, step_through
from ui.i18n import lang_of
from ui.live_chart import live_chart
from ui.status import Said, render_said
from ui.status import status as status_line
from ui.tabs.parts import RELAYOUT_JS, Page, button, labelled, md
from ui.view import MainView, plot, slider

# The step buttons move the slider in the browser, within its range: two quick clicks are two
# steps (read on the server, the second click saw the value from before the first came back).
STEP_JS = ("(s) => {{ const r = document.querySelector('#step input[type=range]');"
           " const lo = Number(r ? r.min : s), hi = Number(r ? r.max : s);"
           " return Math.min(Math.max(Number(s) + ({delta}), lo), hi); }}")


@dataclass
class RunView:
    column: gr.Column
    status: gr.HTML
    headline: gr.HTML                 # the run's one line
    timeline: gr.Plot
    live: gr.HTML                     # the canvas while a run is on
    zoomed: gr.Plot
    memory: gr.Plot
    metrics: gr.HTML
    texts: gr.HTML
    first_step: gr.Number
    last_step: gr.Number
    zoom: gr.Button
    record: gr.State                  # the record on screen
    said: gr.State                    # its status, as data
    shown_lang: gr.State              # the language the record on screen was drawn in
    look_for: gr.Markdown             # "What to look for": set by the handlers, per record
    download_record: gr.DownloadButton
    download_trace: gr.DownloadButton
    folds: list[gr.Accordion]         # the step-through; the KV memory and texts
    replay_run: gr.Dropdown
    step: gr.Slider
    prev: gr.Button
    next: gr.Button
    step_caption: gr.Markdown
    step_plot: gr.Plot
    unrolled: gr.Plot

    def outputs(self) -> list[Any]:
        """The components of a ``MainView``, in its field order (the same names here)."""
        return [getattr(self, f.name) for f in fields(MainView)]

    def reset_replay(self, event: Any, language: gr.Radio) -> Any:
        """After ``event`` has put a record on screen: the step-through starts over on it."""
        return event.then(step_through.reset_replay, [self.record, language, self.step],
                          [self.replay_run, self.step, self.step_caption, self.step_plot,
                           self.unrolled], show_progress="hidden", **step_through.ONE_QUEUE)


def build(page: Page) -> RunView:
    en = "en"
    record, said, shown_lang = gr.State(None), gr.State(None), gr.State("en")
    with gr.Column(elem_id="run-view") as column:
        headline = gr.HTML("", elem_id="headline")
        status = gr.HTML(status_line(texts.t(en, "no_runs")), elem_id="status")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                timeline = gr.Plot(plot(viz.side_by_side_figure([])), show_label=False,
                                   elem_id="timeline")
                # The run while it is on; after a run the machine disturbed, the quiet
                # machine's recording of the same work, under it.
                canvas = live_chart()
                with gr.Row():
                    # No precision: a typed 2.5 reaches the handler, which refuses it.
                    first = labelled(page, gr.Number, "ctl_first_step", 20, elem_id="first-step",
                                     min_width=100)
                    last = labelled(page, gr.Number, "ctl_last_step", 25, elem_id="last-step",
                                    min_width=100)
                    zoom = button(page, "ctl_zoom", elem_id="zoom")
                md(page, "zoom_help")
                zoomed = gr.Plot(plot(viz.side_by_side_figure([])), show_label=False,
                                 elem_id="zoomed")
            with gr.Column(scale=1, min_width=280, elem_id="explain"):
                # Not registered with the translator: the handlers set its words (an imported
                # trace's lanes are its own streams and threads).
                look_for = gr.Markdown(texts.t(en, "timeline_help"), elem_id="look-for")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                metrics = gr.HTML(elem_id="metrics")      # the formula first, then the table
            with gr.Column(scale=1, min_width=280):
                with labelled(page, gr.Accordion, "fold_metrics_help", open=False,
                              elem_id="metrics-help"):
                    md(page, "metrics_help")
                download_record = labelled(page, gr.DownloadButton, "dl_record", interactive=False,
                                           elem_id="download-record")
                download_trace = labelled(page, gr.DownloadButton, "dl_trace", interactive=False,
                                          elem_id="download-trace")
        with labelled(page, gr.Accordion, "fold_steps", open=False, elem_id="steps-fold") as steps:
            replay = _step_through(page)
        with labelled(page, gr.Accordion, "fold_run_more", open=False,
                      elem_id="more-of-run") as more:
            memory = gr.Plot(show_label=False, elem_id="memory", visible=False)
            texts_box = gr.HTML(elem_id="texts")
    return RunView(column, status, headline, timeline, canvas, zoomed, memory, metrics, texts_box,
                   first, last, zoom, record, said, shown_lang, look_for, download_record,
                   download_trace, [steps, more], *replay)


def _step_through(page: Page) -> tuple[Any, ...]:
    """The step-through's controls and figures, in ``RunView``'s order."""
    en = "en"
    md(page, "replay_help")
    with gr.Row(equal_height=True):
        replay_run = labelled(page, gr.Dropdown, "ctl_replay_run", [], elem_id="replay-run",
                              scale=1)
        step = labelled(page, slider, "ctl_step", 0, 1, 0, step=1, elem_id="step", scale=3)
        prev = button(page, "ctl_prev", elem_id="prev-step", scale=0, min_width=140)
        nxt = button(page, "ctl_next", elem_id="next-step", scale=0, min_width=140)
    step_caption = gr.Markdown(texts.t(en, "replay_empty"), elem_id="step-caption")
    step_plot = gr.Plot(plot(viz.step_figure(None, 0)), show_label=False, elem_id="step-plot")
    md(page, "unrolled_help")
    unrolled = gr.Plot(plot(viz.unrolled_figure(None)), show_label=False, elem_id="unrolled")
    return replay_run, step, prev, nxt, step_caption, step_plot, unrolled


def redraw_view(lang_choice: str, record: RecordDict | None, spec: Said | None,
                first: float | None, last: float | None) -> tuple:
    """The run on screen in another language: its status said again, its charts redrawn. While
    a live run is on (its status says so) nothing is touched: the run's own views follow, and
    ``follow_language`` redraws the finished run in the language chosen meanwhile."""
    lang = lang_of(lang_choice)
    if spec and spec["key"] == live_runs.RUN_ON:
        return (gr.update(),) * len(REDRAWN)
    if record:
        view = recorded_runs.shown(spec, record, lang)
    else:
        empty = plot(viz.side_by_side_figure([], lang=lang))
        view = MainView(status=render_said(spec, lang), timeline=empty,
                        look_for=texts.t(lang, "timeline_help"))
    zoomed = recorded_runs.zoom_steps(record, first, last, lang_choice)[0]
    return (view.status, view.headline, view.timeline, view.live, zoomed, view.memory,
            view.metrics, view.texts, view.look_for, lang)


def follow_language(lang_choice: str, shown_lang: str | None, record: RecordDict | None,
                    spec: Said | None, first: float | None, last: float | None) -> tuple:
    """After a live run: its views were drawn in the language the run started in; if the reader
    switched languages meanwhile, the finished run is drawn again in the one chosen now."""
    if lang_of(lang_choice) == shown_lang:
        return (gr.update(),) * len(REDRAWN)
    return redraw_view(lang_choice, record, spec, first, last)


# What a redraw in another language sets, in ``redraw_view``'s order.
REDRAWN = ("status", "headline", "timeline", "live", "zoomed", "memory", "metrics", "texts",
           "look_for", "shown_lang")


def redrawn(view: RunView) -> list[Any]:
    return [getattr(view, name) for name in REDRAWN]


def wire(view: RunView, page: Page) -> None:
    language = page.language
    view.zoom.click(recorded_runs.zoom_steps,
                    [view.record, view.first_step, view.last_step, language],
                    [view.zoomed, view.first_step, view.last_step])
    view.replay_run.input(step_through.render_run, [view.record, view.replay_run, language, view.step],
                          [view.step, view.step_caption, view.step_plot, view.unrolled],
                          show_progress="hidden", **step_through.ONE_QUEUE)
    view.step.change(step_through.render_step, [view.record, view.replay_run, view.step, language],
                     [view.step_caption, view.step_plot], show_progress="hidden",
                     trigger_mode="always_last", **step_through.ONE_QUEUE)
    view.prev.click(None, [view.step], [view.step], js=STEP_JS.format(delta=-1))
    view.next.click(None, [view.step], [view.step], js=STEP_JS.format(delta=+1))
    language.change(redraw_view, [language, view.record, view.said, view.first_step,
                                  view.last_step], redrawn(view), show_progress="hidden"
                    ).then(step_through.redraw, [view.record, view.replay_run, view.step, language],
                           [view.step_caption, view.step_plot, view.unrolled],
                           show_progress="hidden", **step_through.ONE_QUEUE)
    for fold in view.folds:                       # charts laid out while hidden: fit them again
        fold.expand(None, js=RELAYOUT_JS)


def shows_runs(view: RunView, tabs: dict[Any, bool]) -> None:
    """The run view belongs to the tabs that show runs (``tabs``: tab -> shows runs?); the
    serving tab and the lab show their own results, and the page is that much shorter there."""
    for tab, shown in tabs.items():
        event = tab.select(functools.partial(gr.update, visible=shown), None, view.column,
                           queue=False, show_progress="hidden")
        if shown:                          # charts laid out while hidden: fit them again
            event.then(None, js=RELAYOUT_JS)
