"""Event options for handlers that must take turns in the order they were triggered.

Gradio reads a handler's inputs when its event is triggered, not when it runs, so two replies for
the same output can land out of order on a loaded machine; in one queue of one, the last reply is
the one triggered last. Each use names what it guards (``ui.tabs.parts.LAB_QUEUE``: lab runs one
at a time; ``ui.step_through.ONE_QUEUE``: the step view; ...).
"""

from __future__ import annotations

from typing import TypedDict


class QueueOptions(TypedDict):
    concurrency_id: str
    concurrency_limit: int


def one_queue(name: str) -> QueueOptions:
    """The options of a queue of one named ``name``."""
    return {"concurrency_id": name, "concurrency_limit": 1}
