"""Hazard lab handlers: remove one safeguard, run, and show what the engine's checks found.

The scheduler process runs a ``LabRequest``: the normal loop as reference, then the overlap loop
with one switch on, compared token by token, with the allocator and the stop checks watching. The
report (a plain dict, redrawn on a language switch) is drawn by ``viz.lab_report``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

import texts
from engine.scheduler_process.messages import LabFinished, LabRequest, Progress, RequestFailed
from ui import inputs, queues, scheduler_link
from ui.i18n import lang_of
from ui.state import APP
from ui.status import esc, failure, place_text, render_said, said, status
from ui.view import Update
from viz.lab_report import describe, hazard_title, report_html

# The switch's marks and what the chosen switch guards take turns, so the last reply is about
# the switch as the reader left it (not a page load's, sent with the switch from before a click).
ONE_QUEUE = queues.one_queue("lab-switch")


def _hazards() -> dict[str, Any]:
    from engine.lab.hazard_lab import HAZARDS  # torch-free: the lab's behaviour, not its engine

    return HAZARDS


def cuda_here(device: str | None) -> bool:
    """Can a lab run here use two CUDA streams: a GPU found, and the live tab's device not CPU?"""
    return scheduler_link.cuda_seen() and device != "cpu"


# The switch the tab opens on (the Radio's value when the page is built; no handler sets it).
FIRST_SWITCH = "no_finished_guard"


def switch_titles(lang_choice: str, device: str | None = "auto") -> list[tuple[str, str]]:
    """The switches as (title, name) choices; those that need CUDA marked so where this machine
    (or the chosen device) has none."""
    lang = lang_of(lang_choice)
    cuda = cuda_here(device)
    return [(hazard_title(name, lang)
             + (texts.t(lang, "lab_mark_cuda") if hazard.cuda_only and not cuda else ""), name)
            for name, hazard in _hazards().items()]


def switch_choices(lang_choice: str, device: str | None = "auto") -> Update:
    """The switches' titles again, never the choice: that is the reader's (a reply triggered
    before a click can land after it)."""
    return gr.update(choices=switch_titles(lang_choice, device))


def describe_switch(switch: str | None, lang_choice: str,
                    device: str | None = "auto") -> tuple[str, Update]:
    """What the switch's safeguard guards, and the Run button: off (saying why) for a switch
    that needs CUDA where there is none."""
    lang = lang_of(lang_choice)
    hazard = _hazards().get(switch or "")
    cuda_only = bool(hazard and hazard.cuda_only)
    blocked = cuda_only and not cuda_here(device)
    where = None
    if blocked:
        where = "lab_no_cuda_device" if scheduler_link.cuda_seen() else "lab_no_cuda_machine"
    return (describe(switch, cuda_only, lang, where),
            gr.update(interactive=not blocked, value=texts.t(lang, "lab_run")))


def run_lab(switch: str | None, model: str, device: str, seed: object, lang_choice: str):
    """One lab run with ``switch`` on (``None``: the safe engine): a stream of (HTML, the report
    kept for a language switch's redraw)."""
    lang = lang_of(lang_choice)
    try:
        seed_value = inputs.validate_seed(seed)
    except inputs.InputError as error:
        yield render_said(error.said(), lang), None
        return
    what = esc(hazard_title(switch, lang))
    hazard = _hazards().get(switch or "")
    if hazard is not None and hazard.cuda_only and not cuda_here(device):
        # Said at once: the scheduler process would only find the same (seconds later).
        report: dict[str, Any] = {"switch": switch, "device": device if device != "auto" else "cpu",
                  "fault_found": False, "differing": [], "double_free": None, "after_stop": [],
                  "leaked_pages": 0, "leaked_slots": 0, "needs_cuda": True, "windows": 0}
        shown = {"report": report, "model": model, "seed": seed_value}
        yield report_html(report, model, seed_value, lang), shown
        return
    request = LabRequest(switch=switch, model=model, device=device, seed=seed_value)
    try:
        for event in scheduler_link.scheduler().submit(request):
            if isinstance(event, Progress) and not event.detail:   # the engine is loading
                yield status(texts.t(lang, "lab_loading"), "running"), None
            elif isinstance(event, Progress):          # the device the engine found
                yield status(texts.t(lang, "lab_running").format(
                    device=esc(event.detail), what=what), "running"), None
            elif isinstance(event, LabFinished):
                shown = {"report": event.report, "model": model, "seed": seed_value}
                yield report_html(event.report, model, seed_value, lang), shown
            elif isinstance(event, RequestFailed):
                yield render_said(failure(event.kind, event.message), lang), None
    except Exception as error:  # noqa: BLE001 - the scheduler process died, or worse
        yield render_said(failure("died", f"{type(error).__name__}: {error}"), lang), None


LabRun = Callable[..., Iterator[tuple[str, Any]]]


def in_line(run: LabRun, switch: str | None, model: str, device: str, seed: Any,
            lang_choice: str) -> Iterator[tuple[str, Any]]:
    """``run`` (``run_lab``, maybe inside a GPU call) once its turn in the engine's line has
    come; meanwhile where it stands, said each second."""
    lang = lang_of(lang_choice)
    ticket = APP.turns.join("lab", None, ("lab", switch, model, device))
    if ticket is None:
        yield render_said(said("line_full", "warn", most=APP.turns.most_waiting), lang), None
        return
    finished = False
    try:
        while (place := APP.turns.place(ticket)) is not None:
            yield status(place_text(place, lang, "lab_in_line"), "running"), None
            APP.turns.wait(ticket, 1.0)
        yield from run(switch, model, device, seed, lang_choice)
        finished = True
    finally:
        APP.turns.leave(ticket, finished)


def redraw(shown: dict[str, Any] | None, lang_choice: str) -> str:
    """The last lab report again, in the chosen language."""
    lang = lang_of(lang_choice)
    if not shown:
        return status(texts.t(lang, "lab_idle"))
    return report_html(shown["report"], shown["model"], shown["seed"], lang)
