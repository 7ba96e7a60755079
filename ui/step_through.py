"""Step-through replay handlers: pick a run of the record on screen, walk it one step at a time.

The buttons and a new record only set the step slider, and the slider's change draws the step:
one path (Gradio fires no change for a value the slider already has, so there the handler that
set it draws the step itself). Every handler that draws it runs in one queue (``ONE_QUEUE``): a
slow drawing of step 20 cannot land after the click's step 21.
"""

from __future__ import annotations

import html

import gradio as gr

import texts
import viz
from record.schema import Loop, RecordDict, RunDict
from record.steps import copy_placement, loop_kind
from record.window import step_range
from ui.i18n import lang_of
from ui.inputs import is_empty, is_whole
from ui.queues import one_queue
from ui.recorded_runs import default_window
from ui.view import plot

PREFERRED = (Loop.OVERLAP, Loop.MULTISTEP, Loop.NORMAL)   # the loop a replay starts on
ONE_QUEUE = one_queue("step-view")   # see the docstring


def _runs(record: RecordDict | None) -> list[RunDict]:
    return list(record["runs"]) if record else []


def _run(record: RecordDict | None, index: object) -> RunDict | None:
    runs = _runs(record)
    try:
        return runs[int(index) if isinstance(index, (int, float, str)) else 0]
    except (ValueError, IndexError, OverflowError):
        return runs[0] if runs else None


def default_run(record: RecordDict | None) -> int:
    kinds = [loop_kind(run) for run in _runs(record)]
    return next((kinds.index(kind) for kind in PREFERRED if kind in kinds), 0)


def reset_replay(record: RecordDict | None, lang_choice: str, shown: object = None):
    """A new record on screen: its runs as choices, the slider over its steps (``shown``: the
    step it shows now), the unrolled rounds."""
    runs = _runs(record)
    labels = viz.display_labels(runs, lang_of(lang_choice))
    index = default_run(record)
    choices = gr.update(choices=[(label, i) for i, label in enumerate(labels)],
                        value=index if runs else None)
    return (choices, *render_run(record, index, lang_choice, shown, keep=False))


def render_run(record: RecordDict | None, index: object, lang_choice: str, step: object = None,
               keep: bool = True):
    """Another run chosen: the slider over its steps, the unrolled rounds. The step on screen
    stays where the new run has it (``keep``); otherwise, and for a new record, a steady one."""
    lang = lang_of(lang_choice)
    run = _run(record, index)
    if run is None:
        empty = plot(viz.step_figure(None, 0, lang))
        return (*set_step(record, index, step, 0, (0, 1), lang_choice), empty)
    first, last = step_range(run)
    new = (int(step) if keep and is_whole(step) and first <= step <= last
           else default_window([run])[0])
    return (*set_step(record, index, step, new, (first, max(last, first + 1)), lang_choice),
            plot(viz.unrolled_figure(run, lang)))


def set_step(record: RecordDict | None, index: object, shown: object, step: int,
             bounds: tuple[int, int], lang_choice: str):
    """The slider moved to ``step`` within ``bounds``; the caption and figure drawn here only
    where it already shows ``step`` (Gradio fires no change then)."""
    slider = gr.update(minimum=bounds[0], maximum=bounds[1], value=step)
    if is_whole(shown) and shown == step:
        return (slider, *render_step(record, index, step, lang_choice))
    return slider, gr.skip(), gr.skip()


def render_step(record: RecordDict | None, index: object, step: object, lang_choice: str):
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
    placement = copy_placement(run, record["env"] if record else None)
    return (viz.step_caption(run, step, lang, placement),
            plot(viz.step_figure(run, step, lang, placement)))


def _shown(value: object) -> str:
    """A typed value as the reader typed it (30, 2.5), escaped."""
    if isinstance(value, float) and is_whole(value):
        value = int(value)
    return html.escape(str(value))


def redraw(record: RecordDict | None, index: object, step: object, lang_choice: str):
    """The same step again (after a language switch): caption, step figure, unrolled rounds."""
    caption, figure = render_step(record, index, step, lang_choice)
    run = _run(record, index)
    return caption, figure, plot(viz.unrolled_figure(run, lang_of(lang_choice)))
