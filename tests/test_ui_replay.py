"""Step-through replay handlers on the recorded H200 runs (no engine, no browser): the replay
starts on the overlap run at a steady-state step, the buttons move the slider inside the run,
and each step's caption and figure follow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")

from ui_wiring import events_running, one_queue, queues  # noqa: E402

from record.window import step_range  # noqa: E402
from ui import step_through  # noqa: E402

RECORDED = ROOT / "assets" / "recorded"


def figure_of(plot_data):
    """A gr.Plot value (the JSON plotly.js reads) as a plotly figure to inspect."""
    import json as _json

    import plotly.graph_objects as go

    return go.Figure(_json.loads(plot_data.plot))


@pytest.fixture(scope="module")
def record():
    return json.loads((RECORDED / "h200-bundled-graph-cpu200.json").read_text())


def test_reset_starts_on_the_overlap_run_at_a_steady_state_step(record):
    choices, slider, caption, figure, unrolled = step_through.reset_replay(record, "English", 20)
    figure, unrolled = figure_of(figure), figure_of(unrolled)
    assert choices["choices"] == [("normal", 0), ("overlap", 1)] and choices["value"] == 1
    assert (slider["minimum"], slider["value"]) == (1, 20) and slider["maximum"] >= 25
    assert caption.startswith("**Step 20** (overlap)")
    assert {trace.meta for trace in figure.data if trace.meta} >= {"forward", "hidden0"}
    assert len(unrolled.layout.annotations) == 3


def test_a_step_outside_the_run_is_said_so_in_the_readers_language(record):
    """The buttons move the slider within its range (ui.tabs.run_view.STEP_JS), but a number typed into its
    box reaches the handler as typed (ui.view.slider): a step the run does not have is named,
    with the run's range, in the page's language, and the figure on screen stays."""
    import gradio as gr

    first, last = step_range(record["runs"][1])
    for typed in (99999, -3, 2.5):
        caption, figure = step_through.render_step(record, 1, typed, "English")
        assert caption == (f"This run has no step {typed}: its steps go from {first} to "
                           f"{last}."), caption
        assert isinstance(figure, type(gr.skip()))
    zh, _ = step_through.render_step(record, 1, 99999, "中文")
    assert zh == f"这次运行没有第 99999 步：它的步号从 {first} 到 {last}。"
    assert step_through.render_step(record, 1, float(last), "English")[0].startswith(f"**Step {last}**")
    for empty in (None, float("nan"), ""):          # an emptied box: said, never step 1 instead
        caption, figure = step_through.render_step(record, 1, empty, "English")
        assert caption == f"The step box is empty: enter a step from {first} to {last}."
        assert isinstance(figure, type(gr.skip()))
    assert step_through.render_step(record, 1, None, "中文")[0] == \
        f"步号框是空的：请输入 {first} 到 {last} 之间的步号。"


def test_each_step_has_its_own_caption_and_figure(record):
    caption_20, _ = step_through.render_step(record, 1, 20, "English")
    caption_21, figure = step_through.render_step(record, 1, 21, "English")
    figure = figure_of(figure)
    assert caption_20 != caption_21 and "forward(B21)" in caption_21
    forward = next(trace for trace in figure.data if trace.meta == "forward")
    assert "forward(B21)" in forward.hovertext[0]
    zh, _ = step_through.render_step(record, 1, 21, "中文")
    assert zh.startswith("**第 21 步**")


def test_the_normal_run_and_a_multistep_recording(record):
    caption, _ = step_through.render_step(record, 0, 20, "English")
    assert "(normal loop)" in caption and "the GPU idles" in caption
    multi = json.loads((RECORDED / "h200-bundled-graph-cpu200-multistep4.json").read_text())
    assert step_through.default_run(multi) == 0
    caption, figure = step_through.render_step(multi, 0, 20, "English")
    assert "(multi-step, k=4)" in caption


def test_no_record_gives_a_message():
    choices, slider, caption, *_ = step_through.reset_replay(None, "English", 0)
    assert choices["value"] is None and "Show a run first" in caption
    assert step_through.render_step(None, None, 0, "English")[0] == caption   # the slider's own path


def test_the_step_is_drawn_once_by_the_slider_or_where_it_stays_by_the_handler(record):
    """One path for the step on screen: where a new record or another run moves the slider,
    its change draws the step and the handler that moved it draws nothing (two drawings of
    step 20 raced a click's step 21, and the slower landed last); where the slider stays,
    Gradio fires no change, and the handler draws it."""
    import gradio as gr

    skipped = type(gr.skip())
    _, slider, caption, figure, unrolled = step_through.reset_replay(record, "English", 7)
    assert slider["value"] == 20 and isinstance(caption, skipped) and isinstance(figure, skipped)
    assert len(figure_of(unrolled).layout.annotations) == 3        # not the slider's to draw
    slider, caption, figure, _ = step_through.render_run(record, 0, "English", 9999)
    assert slider["value"] == 20 and isinstance(caption, skipped)
    slider, caption, figure, _ = step_through.render_run(record, 0, "English", 21)
    assert slider["value"] == 21 and caption.startswith("**Step 21** (normal loop)")


def test_every_handler_that_draws_the_step_runs_in_one_queue_of_one():
    """The page's wiring: whatever triggers a drawing of the step (a new record, another run,
    the slider, a language switch), the drawings run one at a time, in the order triggered."""
    wired = events_running({step_through.reset_replay, step_through.render_run, step_through.render_step,
                            step_through.redraw})
    assert queues(wired) == one_queue(step_through.ONE_QUEUE)


def test_another_run_keeps_the_step_on_screen_where_it_has_it(record):
    """Walkthrough section 3: the overlap run at step 11, then the normal run at step 11."""
    first, last = step_range(record["runs"][0])
    slider, caption, _, _ = step_through.render_run(record, 0, "English", 11)
    assert slider["value"] == 11 and caption.startswith("**Step 11**")
    default = step_through.render_run(record, 0, "English")[0]["value"]
    for outside in (last + 5, None, 2.5):
        assert step_through.render_run(record, 0, "English", outside)[0]["value"] == default


def test_numbers_no_box_can_hold_are_said_so_not_raised(record):
    """An API caller can send what a browser cannot (10**400, inf): a message, never a
    traceback."""
    from ui import inputs, recorded_runs

    for value in (10**400, float("inf"), float("-inf")):
        assert step_through.render_step(record, 1, value, "English")[0].startswith("This run has no step")
        assert recorded_runs.zoom_steps(record, value, 3, "English")[1] == {"__type__": "update"}
        with pytest.raises(inputs.InputError):
            inputs.checked("extra_cpu_us", value)


def test_a_recorded_runs_caption_names_its_extra_cpu_work(record):
    """Each run of a record says the extra CPU work it ran with, and the caption says it
    (h200-bundled-graph-cpu200: 200 µs a step)."""
    assert [run["extra_cpu_us"] for run in record["runs"]] == [200, 200]
    caption, _ = step_through.render_step(record, step_through.default_run(record), 20, "English")
    assert "0.20 ms is the extra CPU work this run was given" in caption
