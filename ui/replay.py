"""Step-through replay handlers: pick a run of the record on screen, walk it one step at a time.

The record is whatever the main view shows (live, recorded or imported); ``viz`` draws the step
(``step_figure``), says what it did (``step_caption``) and unrolls fill / steady state / drain
(``unrolled_figure``). The previous/next buttons only move the step slider (in the browser:
``ui.tabs.run_view.STEP_JS``); the slider's change redraws, so a drag, a typed number and a button press
take one path.
"""

from __future__ import annotations

import html
from typing import Any

import gradio as gr

import texts
import viz
from record.schema import Loop
from record.steps import copy_placement, loop_kind
from record.window import step_range
from ui.common import is_empty, is_whole, lang_of
from ui.recorded_runs import default_window
from ui.view import plot

PREFERRED = (Loop.OVERLAP, Loop.MULTISTEP, Loop.NORMAL)   # the loop a replay starts on


def _runs(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list((record or {}).get("runs") or [])


def _run(record: dict[str, Any] | None, index: Any) -> dict[str, Any] | None:
    runs = _runs(record)
    try:
        run = runs[int(index)]
    except (TypeError, ValueError, IndexError):
        run = runs[0] if runs else None
    extra = ((record or {}).get("config") or {}).get("extra_cpu_us")
    if run is not None and extra and "extra_cpu_us" not in (run.get("metrics") or {}):
        # A record made before its runs carried it: the record's setup applies to every run.
        run = dict(run, metrics={**(run.get("metrics") or {}), "extra_cpu_us": extra})
    return run


def default_run(record: dict[str, Any] | None) -> int:
    kinds = [loop_kind(run) for run in _runs(record)]
    return next((kinds.index(kind) for kind in PREFERRED if kind in kinds), 0)


def reset_replay(record: dict[str, Any] | None, lang_choice: str):
    """A new record on screen: its runs as choices, the slider over its steps, all redrawn."""
    runs = _runs(record)
    labels = viz.display_labels(runs, lang_of(lang_choice))
    index = default_run(record)
    choices = gr.update(choices=[(label, i) for i, label in enumerate(labels)],
                        value=index if runs else None)
    return (choices, *render_run(record, index, lang_choice))


def render_run(record: dict[str, Any] | None, index: Any, lang_choice: str, step: Any = None):
    """Another run chosen: the slider over its steps, both figures. The step on screen
    (``step``) stays where the new run has it (the same step of another loop, side by side in
    time); otherwise, and for a new record, a steady-state step."""
    lang = lang_of(lang_choice)
    run = _run(record, index)
    if run is None:
        empty = plot(viz.step_figure(None, 0, lang))
        return (gr.update(minimum=0, maximum=1, value=0), texts.t(lang, "replay_empty"), empty,
                empty)
    first, last = step_range(run)
    kept = is_whole(step) and first <= step <= last
    step = int(step) if kept else default_window([run])[0]
    caption, figure = render_step(record, index, step, lang_choice)
    slider = gr.update(minimum=first, maximum=max(last, first + 1), value=step)
    return slider, caption, figure, plot(viz.unrolled_figure(run, lang))


def render_step(record: dict[str, Any] | None, index: Any, step: Any, lang_choice: str):
    """The caption and the linked-spans figure of one step."""
    lang = lang_of(lang_choice)
    run = _run(record, index)
    if run is None:
        return texts.t(lang, "replay_empty"), plot(viz.step_figure(None, 0, lang))
    first, last = step_range(run)
    if is_empty(step) or step == "":
        # The slider's box emptied (or holding what is not a number): say so, draw nothing new.
        return texts.t(lang, "replay_need_step").format(first=first, last=last), gr.skip()
    if not is_whole(step) or not first <= step <= last:
        # A number typed into the slider's box (its handle stays inside the range).
        return texts.t(lang, "replay_no_step").format(step=_shown(step), first=first,
                                                     last=last), gr.skip()
    step = int(step)
    placement = copy_placement(run, (record or {}).get("env"))
    return (viz.step_caption(run, step, lang, placement),
            plot(viz.step_figure(run, step, lang, placement)))


def _shown(value: Any) -> str:
    """A typed value as the reader typed it (30, 2.5), escaped."""
    if isinstance(value, float) and is_whole(value):
        value = int(value)
    return html.escape(str(value))


def redraw(record: dict[str, Any] | None, index: Any, step: Any, lang_choice: str):
    """The same step again (after a language switch): caption, step figure, unrolled rounds."""
    caption, figure = render_step(record, index, step, lang_choice)
    run = _run(record, index)
    return caption, figure, plot(viz.unrolled_figure(run, lang_of(lang_choice)))
