"""What the CUDA device reuses every step instead of making anew: pinned host buffers in rings,
and CUDA events (timing ones lent out and given back).

Both exist because of the launch path's cost. A serial loop pays every microsecond the scheduler
thread spends launching a step as GPU idle time, so making a CUDA event (or a pinned buffer) per
step would make the loop look worse than it is, and the recorder would inflate the very gap it
measures. Here buffers and events are made once and used again, each only when nothing can still
be reading it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import torch


class Ring:
    """N host buffers used in turn, each with the event recorded after the last copy that used
    it; a buffer is reused only after that copy has finished."""

    def __init__(self, buffers: list, guard: bool = True) -> None:
        self.buffers, self.i, self.guard = buffers, 0, guard
        self.events = [torch.cuda.Event() for _ in buffers]

    def next(self):
        """The next buffer (its index and itself), once the copy that last used it is done."""
        self.i = (self.i + 1) % len(self.buffers)
        if self.guard:
            # Hazard 2 guard: the async copy from/into this host buffer must be done before reuse.
            self.events[self.i].synchronize()
        return self.i, self.buffers[self.i]


class EventRing:
    """Plain (non-timing) events used in turn for one-step signals, re-recorded ``n`` steps later:
    recording an existing event costs the host far less than making a new one. ``n`` must exceed
    the number of steps that can be in flight, so no waiter sees a later step's record."""

    def __init__(self, n: int) -> None:
        self.events = [torch.cuda.Event() for _ in range(n)]
        self.i = 0

    def record(self, stream: torch.cuda.Stream) -> torch.cuda.Event:
        self.i = (self.i + 1) % len(self.events)
        event = self.events[self.i]
        event.record(stream)
        return event


class EventPool:
    """Timing events lent to the span recorder and given back once it has read them.

    ``take`` hands out events (making new ones only while the pool is empty, so after the first
    run a run makes none); the timeline calls ``give_back`` when a group's spans have been
    resolved. Both are safe from two threads: deque appends and pops are atomic.
    """

    def __init__(self) -> None:
        self.free: deque = deque()
        self.made = 0

    def take(self, n: int) -> list[torch.cuda.Event]:
        out = []
        for _ in range(n):
            try:
                out.append(self.free.popleft())
            except IndexError:
                self.made += 1
                out.append(torch.cuda.Event(enable_timing=True))
        return out

    def give_back(self, events: Sequence[torch.cuda.Event]) -> None:
        self.free.extend(events)
