"""A visitor's run in line: where it stands, about how long, and meanwhile the same work recorded.

The Run button's handler (``in_line``, a coroutine: a page in line holds no server thread) takes
a ticket in the engine's line (``ui.turns``); the page's line timer then asks each second where
it stands (``line_said``). Meanwhile the chart shows the same work recorded on a quiet machine,
where one is bundled. A page that goes away leaves the line; its run is wound down in a thread.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import gradio as gr

import texts
import viz
from ui import live_runs, same_work, scheduler_link
from ui.controls import Controls
from ui.i18n import lang_of
from ui.inputs import InputError
from ui.state import APP
from ui.status import Said, place_text, render_said, said, status
from ui.turns import State, Ticket
from ui.view import MainView, plot

TICK_S = 1.0                 # a page in line is told where it stands this often (its timer)
WAKE_S = 30.0                # a run in line looks at its ticket at least this often
RunStarter = Callable[[Ticket | None], Iterator[tuple]]   # the run, given its ticket


@dataclass(frozen=True)
class Waiting:
    """What a run in line needs to say where it stands and to show meanwhile."""

    work: Hashable                       # turns of the same work take about as long
    steps: int                           # engine steps of the whole turn, about
    least_s: float                       # requests that arrive over time: it lasts this long
    recording: str | None                # the canvas's payload of a bundled recording, or None


async def in_line(controls: Controls, session: str | None,
                  start: RunStarter) -> AsyncIterator[tuple]:
    """The Run button: wait in line (saying where, and showing the recording), then run."""
    lang = lang_of(controls.lang_choice)
    waiting = await anyio.to_thread.run_sync(prepare, controls, lang)
    if waiting is None:                  # input the run refuses: said at once, no turn needed
        async for view in _in_thread(start(None)):
            yield view
        return
    ticket = APP.turns.join("run", session, waiting.work, waiting.steps, waiting.least_s)
    if ticket is None:
        spec = said("line_full", "warn", most=APP.turns.most_waiting)
        yield MainView(status=render_said(spec, lang), said=spec).values()
        return
    run: Iterator[tuple] | None = None
    last: tuple = ()
    completed = False                    # the run's views were read to their end
    try:
        place = APP.turns.place(ticket)
        if place is not None:            # once; the page's line timer says it again each second
            yield _waiting_view(place, waiting, lang).values()
        # The line timer speaks for it only after this view has gone out (with its chart).
        ticket.context = waiting
        while ticket.waiting:
            await APP.turns.changed(ticket, WAKE_S)
        if ticket.state is State.LEFT:   # its Stop (or the page's end) took it out of line
            yield left_view(lang).values()
            return
        run = start(ticket)
        async for last in _in_thread(run):
            yield last
        completed = True
    finally:
        if completed:                    # a run done teaches the line how long its work takes
            APP.turns.leave(ticket, finished=_said_key(last) == "status_done")
        else:                            # the page went away, or this was cancelled
            threading.Thread(target=_wind_down, args=(ticket, run), daemon=True,
                             name="run-wind-down").start()


def line_said(lang_choice: str, request: gr.Request | None = None) -> Any:
    """The page's line timer: where this page's run stands now, for the status line alone;
    nothing where it is not waiting, nor before its Run handler has said it with the chart."""
    session = getattr(request, "session_hash", None)
    for ticket in APP.turns.tickets_of(session) if session else []:
        place = APP.turns.place(ticket) if ticket.kind == "run" else None
        if place is not None and isinstance(ticket.context, Waiting):
            return line_status(place, ticket.context, lang_of(lang_choice))
    return gr.skip()


def _said_key(values: tuple) -> str:
    """The text key of a view's status as data (``MainView.said``), or ""."""
    spec = MainView(*values).said
    return str(spec.get("key", "")) if isinstance(spec, dict) else ""


async def _in_thread(run: Iterator[tuple]) -> AsyncIterator[tuple]:
    """The run's views, each read in a worker thread (reading one waits on the scheduler)."""
    end: tuple = ()                      # no view is empty: the run has ended
    while (view := await anyio.to_thread.run_sync(next, run, end)) is not end:
        yield view


def _wind_down(ticket: Ticket, run: Iterator[tuple] | None) -> None:
    """A run whose page went away: stop it (its turn: its request is cancelled), read it to its
    end (``run_live`` closes its request), then give the turn on."""
    try:
        APP.turns.stop(ticket)
        close = getattr(run, "close", None)
        if close is not None:
            for _ in range(600):         # a step in flight in another thread ends first
                try:
                    close()
                    break
                except ValueError:       # "generator already executing"
                    time.sleep(0.1)
    finally:
        APP.turns.leave(ticket)


def prepare(controls: Controls, lang: str) -> Waiting | None:
    """The request the controls ask for, what its turn is, and the recording to show while it
    waits; None where the controls are refused (the run says why)."""
    try:
        request, _ = live_runs.build_request(controls)
    except InputError:
        return None
    if request.engine.device == "cuda" and not scheduler_link.cuda_found():
        return None     # a machine without a GPU is told at once, by the run, not after its turn
    cuda = request.engine.device != "cpu" and scheduler_link.cuda_seen()
    work = same_work.request_work(request, "cuda" if cuda else "cpu-process")
    loops = tuple((str(spec.loop), spec.decode_steps) for spec in request.loops)
    found = same_work.recording_of(work, loops)
    recording = same_work.recording_payload(found[1], found[0], lang) if found else None
    runs = request.rounds * len(loops) + int(request.workload.stop_early)
    steps = runs * live_runs.expected_steps(request)
    least_s = request.rounds * len(loops) * live_runs.arrival_span_s(request)
    key = (work, loops, request.rounds, request.workload.chat, request.engine.cuda_graph)
    return Waiting(key, steps, least_s, recording)


def prepare_defaults() -> None:
    """Draw the recording for the page's defaults now, in both languages, so no visitor waits
    for it."""
    for lang in texts.LANGUAGES:
        prepare(Controls.page_defaults(), lang)


def line_status(place: tuple[int, float], waiting: Waiting, lang: str) -> str:
    """The status line of a run in line: its place, the estimate, why, and what the chart shows
    meanwhile; the place and estimate as data too (``data-line-place``, ``data-line-eta``)."""
    gap = texts.sentence_gap(lang)
    text = gap.join([place_text(place, lang), texts.t(lang, "line_why"),
                     texts.t(lang, "line_recording" if waiting.recording else "line_later")])
    return (f'<div data-line-place="{place[0]}" data-line-eta="{max(1, math.ceil(place[1]))}">'
            f'{status(text, "running")}</div>')


def _waiting_view(place: tuple[int, float], waiting: Waiting, lang: str) -> MainView:
    """A run that has joined the line: where it stands, and the recording (or a chart that says
    the run is in line)."""
    if waiting.recording:
        chart: dict[str, Any] = dict(timeline=gr.update(visible=False),
                                     live=gr.update(value=waiting.recording, visible=True))
    else:
        message = plot(viz.message_figure(texts.t(lang, "timeline_queued")))
        chart = dict(timeline=gr.update(value=message, visible=True),
                     live=gr.update(value="", visible=False))
    return live_runs.run_on_view(line_status(place, waiting, lang), lang, "zoom_queued", **chart)


def left_view(lang: str) -> MainView:
    """A run that left the line before its turn: nothing ran, and the chart says so."""
    spec: Said = said("fail_left_line", "warn")
    message = plot(viz.message_figure(texts.t(lang, "timeline_left_line")))
    return MainView(status=render_said(spec, lang), said=spec,
                    timeline=gr.update(value=message, visible=True),
                    live=gr.update(value="", visible=False), zoomed=message)
