"""Event options for handlers that must take turns in the order they were triggered.

Gradio reads a handler's inputs when its event is triggered, so two replies for the same output
can land out of order on a loaded machine; in a queue of one, the last reply is the last triggered.
"""

from __future__ import annotations

from typing import TypedDict


class QueueOptions(TypedDict):
    concurrency_id: str
    concurrency_limit: int


def one_queue(name: str) -> QueueOptions:
    """The options of a queue of one named ``name``."""
    return {"concurrency_id": name, "concurrency_limit": 1}
