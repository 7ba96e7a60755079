"""The line for the engine: every live run, lab run and warm-up takes its turn here, one at a time.

The line is the server's own, not Gradio's queue, so that it can tell each visitor where they
stand (``place``) and so that a Stop reaches its own ticket only. ``join`` puts a ticket at the
end; ``wait`` (a thread) or ``changed`` (a coroutine) returns when its turn has come or it left;
``stop`` takes a waiting ticket out, or asks the one whose turn it is to end its run (``on_stop``
says how); ``leave`` ends a turn or a wait, and the next ticket's turn begins.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

MOST_WAITING = 64            # tickets waiting at once; a visitor past that is told to come back
MOST_REMEMBERED = 64         # works whose turn length is kept for the estimates
# A turn's length by kind, until a turn of the same work (or a run's time a step) is measured.
FIRST_GUESS_S = {"run": 5.0, "lab": 10.0, "warm-up": 20.0}
LEAST_LEFT_S = 1.0           # a turn that outlasts its estimate still has about this long to go


class State(StrEnum):
    WAITING = "waiting"      # in line
    TURN = "turn"            # its turn: it has the engine
    LEFT = "left"            # it left the line before its turn (Stop, a closed tab)
    DONE = "done"            # its turn has ended


@dataclass(eq=False)
class Ticket:
    """One place in line: a visitor's run (``session``: their page), a lab run, or the warm-up."""

    kind: str                           # "run" | "lab" | "warm-up"
    session: str | None                 # the page that holds it (None: the server's own)
    work: Hashable                      # turns of the same work take about as long
    steps: int = 0                      # about how many engine steps the turn runs (0: unknown)
    least_s: float = 0.0                # it cannot take less (requests that arrive over time)
    state: State = State.WAITING
    started: float | None = None        # when its turn began (``time.monotonic``)
    stop_asked: threading.Event = field(default_factory=threading.Event)
    context: object = None              # what its holder keeps with it (what its page shows)
    _on_stop: Callable[[], None] | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _changed: asyncio.Event | None = None

    @property
    def waiting(self) -> bool:
        return self.state is State.WAITING


class Durations:
    """How long turns took: by work (the latest few, averaged), and a run's time per step."""

    def __init__(self) -> None:
        self.by_work: dict[Hashable, list[float]] = {}
        self.step_s: float | None = None          # the latest run's seconds per engine step

    def expected(self, ticket: Ticket) -> float:
        seen = self.by_work.get(ticket.work)
        if seen:
            guess = sum(seen) / len(seen)
        elif ticket.kind == "run" and self.step_s and ticket.steps:
            guess = self.step_s * ticket.steps
        else:
            guess = FIRST_GUESS_S.get(ticket.kind, FIRST_GUESS_S["run"])
        return max(guess, ticket.least_s)

    def remember(self, ticket: Ticket, seconds: float) -> None:
        seen = self.by_work.pop(ticket.work, [])
        self.by_work[ticket.work] = (seen + [seconds])[-3:]     # the latest few of this work
        while len(self.by_work) > MOST_REMEMBERED:
            self.by_work.pop(next(iter(self.by_work)))
        if ticket.kind == "run" and ticket.steps and not ticket.least_s:
            self.step_s = seconds / ticket.steps


class Turns:
    """The line: tickets waiting in order, and the one whose turn it is."""

    def __init__(self, most_waiting: int = MOST_WAITING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.most_waiting = most_waiting
        self.clock = clock
        self.durations = Durations()
        self._lock = threading.Condition()
        self._line: deque[Ticket] = deque()
        self._holder: Ticket | None = None

    def join(self, kind: str, session: str | None, work: Hashable, steps: int = 0,
             least_s: float = 0.0) -> Ticket | None:
        """A new ticket at the end of the line (its turn at once where nobody holds one);
        None where ``most_waiting`` tickets wait already."""
        with self._lock:
            if len(self._line) >= self.most_waiting:
                return None
            ticket = Ticket(kind, session, work, steps, least_s)
            self._line.append(ticket)
            self._advance()
            return ticket

    def leave(self, ticket: Ticket, finished: bool = False) -> None:
        """The ticket's turn (or wait) is over; a turn ``finished`` (not stopped, not failed)
        teaches the estimates how long its work takes."""
        with self._lock:
            if ticket is self._holder:
                if finished and not ticket.stop_asked.is_set() and ticket.started is not None:
                    self.durations.remember(ticket, self.clock() - ticket.started)
                self._holder = None
                ticket.state, ticket._on_stop = State.DONE, None
            elif ticket.waiting:
                self._line.remove(ticket)
                ticket.state = State.LEFT
                _wake(ticket)
            self._advance()

    def _advance(self) -> None:
        """Under the lock: the next ticket's turn, where nobody holds it; every ticket is told
        (the places behind have moved)."""
        if self._holder is None and self._line:
            self._holder = self._line.popleft()
            self._holder.state, self._holder.started = State.TURN, self.clock()
        self._lock.notify_all()
        for ticket in [*self._line, *([self._holder] if self._holder else [])]:
            _wake(ticket)

    def stop(self, ticket: Ticket) -> str:
        """A Stop for this ticket alone: "left" (it was waiting and has left the line),
        "stopping" (its turn: its run was asked to end), or "" (nothing to stop)."""
        with self._lock:
            if ticket.waiting:
                self.leave(ticket)
                return "left"
            if ticket is self._holder:
                ticket.stop_asked.set()
                if ticket._on_stop is not None:
                    ticket._on_stop()        # reaches this ticket's run: it holds the engine
                return "stopping"
            return ""

    def stop_session(self, session: str, kind: str | None = None) -> str:
        """Stop every ticket of one page (of ``kind`` only, where given): its Stop button, or
        the page has gone. "left", "stopping" (one of them had the turn) or ""."""
        with self._lock:
            said = [self.stop(ticket) for ticket in self.tickets_of(session)
                    if kind is None or ticket.kind == kind]
        return "stopping" if "stopping" in said else ("left" if "left" in said else "")

    def on_stop(self, ticket: Ticket, cancel: Callable[[], None] | None) -> None:
        """How a Stop reaches the ticket's run while it has its turn (None: no longer); a Stop
        that came first is passed on at once."""
        with self._lock:
            ticket._on_stop = cancel if ticket is self._holder else None
            if ticket._on_stop is not None and ticket.stop_asked.is_set():
                ticket._on_stop()

    def place(self, ticket: Ticket) -> tuple[int, float] | None:
        """A waiting ticket's place (1: next) and about how many seconds until its turn; None:
        not waiting."""
        with self._lock:
            if not ticket.waiting:
                return None
            ahead = list(self._line)[: self._line.index(ticket)]
            seconds = sum(self.durations.expected(t) for t in ahead)
            holder = self._holder
            if holder is not None and holder.started is not None:
                left = self.durations.expected(holder) - (self.clock() - holder.started)
                seconds += max(left, LEAST_LEFT_S)
            return len(ahead) + 1, seconds

    def waiting(self) -> int:
        with self._lock:
            return len(self._line)

    def holder(self) -> Ticket | None:
        with self._lock:
            return self._holder

    def tickets_of(self, session: str) -> list[Ticket]:
        with self._lock:
            return [t for t in [*self._line, self._holder] if t is not None and t.session == session]

    def wait(self, ticket: Ticket, timeout_s: float | None = None) -> bool:
        """Block until the ticket is no longer waiting (or ``timeout_s``); True: it is not."""
        with self._lock:
            return self._lock.wait_for(lambda: not ticket.waiting, timeout_s)

    async def changed(self, ticket: Ticket, timeout_s: float) -> None:
        """Return when the line has moved for this ticket (its turn, its place) or after
        ``timeout_s``: a coroutine, so a page in line holds no server thread."""
        with self._lock:
            if ticket._changed is None:
                ticket._loop, ticket._changed = asyncio.get_running_loop(), asyncio.Event()
            if not ticket.waiting:
                return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ticket._changed.wait(), timeout_s)
        ticket._changed.clear()

    @contextlib.contextmanager
    def turn(self, kind: str, work: Hashable, session: str | None = None) -> Iterator[Ticket]:
        """Hold a turn for the block (waiting for it in this thread): the server's own work."""
        ticket = self.join(kind, session, work)
        while ticket is None:                     # a full line: the server's work waits too
            time.sleep(0.5)
            ticket = self.join(kind, session, work)
        finished = False
        try:
            self.wait(ticket)
            yield ticket
            finished = True
        finally:
            self.leave(ticket, finished)


def _wake(ticket: Ticket) -> None:
    """Tell a coroutine waiting on ``changed`` (from any thread) that the line has moved."""
    loop, changed = ticket._loop, ticket._changed
    if loop is not None and changed is not None:
        with contextlib.suppress(RuntimeError):           # its loop has closed: nobody waits
            loop.call_soon_threadsafe(changed.set)
