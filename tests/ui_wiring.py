"""The page's wiring, for the tests that check which handlers take turns (``ui.queues.one_queue``).

Gradio reads a handler's inputs when its event is triggered and runs it later, so two replies
for one output can land out of order on a loaded machine; handlers that answer about the same
thing run in one queue of one. These helpers find the page's events and the queue each runs in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def events(which: Callable[[Any], bool]) -> list[Any]:
    """The page's events (``app.demo``'s wired functions) for which ``which`` holds."""
    import app

    return [fn for fn in app.demo.fns.values() if which(fn)]


def events_running(handlers: set[Callable[..., Any]]) -> list[Any]:
    """Every event that runs one of ``handlers``; each handler is wired to at least one."""
    wired = events(lambda fn: fn.fn in handlers)
    assert {fn.fn for fn in wired} == handlers, "a handler is wired to no event"
    return wired


def queues(wired: list[Any]) -> set[tuple[str | None, int | None]]:
    """The queues these events run in, as (name, how many at once)."""
    return {(fn.concurrency_id, fn.concurrency_limit) for fn in wired}


def one_queue(options: dict[str, Any]) -> set[tuple[str | None, int | None]]:
    """What ``queues`` says of events that all run with these ``one_queue`` options."""
    return {(options["concurrency_id"], options["concurrency_limit"])}
