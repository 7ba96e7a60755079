"""Where the scheduler's requests come from: stage 1 asks a ``RequestSource``, as SGLang's
``recv_requests`` polls its socket. ``receive()`` never blocks; ``wait(s)`` blocks until something
arrives (idle time, not CPU work); ``done()``: nothing more will come."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from engine.scheduler.request import Req


@dataclass
class Received:
    reqs: list[Req] = field(default_factory=list)      # new requests, in arrival order
    aborts: list[int] = field(default_factory=list)    # rids to stop now (their client left)


class RequestSource(Protocol):
    def receive(self) -> Received: ...

    def wait(self, timeout_s: float) -> bool: ...

    def done(self) -> bool: ...


class ScheduledSource:
    """Requests released at their ``arrival_ns`` (``perf_counter_ns`` clock), in that order."""

    def __init__(self, reqs: list[Req]) -> None:
        self.pending: deque[Req] = deque(sorted(reqs, key=lambda r: r.arrival_ns))

    def receive(self) -> Received:
        now = time.perf_counter_ns()
        arrived = []
        while self.pending and self.pending[0].arrival_ns <= now:
            arrived.append(self.pending.popleft())
        return Received(arrived)

    def wait(self, timeout_s: float) -> bool:
        if not self.pending:
            return False
        due_s = (self.pending[0].arrival_ns - time.perf_counter_ns()) / 1e9
        if due_s > timeout_s:
            time.sleep(timeout_s)
            return False
        if due_s > 0:
            time.sleep(due_s)
        return True

    def done(self) -> bool:
        return not self.pending
