"""What the CUDA device reuses every step instead of making anew (in a serial loop the launch path's
time is GPU idle time): pinned host buffers, upload buffers and CUDA events, each used again only
when nothing can still be reading it."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from engine.scheduler.request import COL_OUT


class Ring:
    """N host buffers used in turn, each reused only after the last copy that used it finished."""

    def __init__(self, buffers: list, guard: bool = True) -> None:
        self.buffers, self.i, self.guard = buffers, 0, guard
        self.events = [torch.cuda.Event() for _ in buffers]

    def next(self):
        self.i = (self.i + 1) % len(self.buffers)
        if self.guard:
            # Hazard 2 guard: the async copy from/into this host buffer must be done before reuse.
            self.events[self.i].synchronize()
        return self.i, self.buffers[self.i]


class EventRing:
    """Plain events used in turn for one-step signals, re-recorded ``n`` steps later (``n`` above
    the steps that can be in flight, so no waiter sees a later step's record)."""

    def __init__(self, n: int) -> None:
        self.events = [torch.cuda.Event() for _ in range(n)]
        self.i = 0

    def record(self, stream: torch.cuda.Stream) -> torch.cuda.Event:
        self.i = (self.i + 1) % len(self.events)
        event = self.events[self.i]
        event.record(stream)
        return event


class EventPool:
    """Timing events lent to the span recorder in groups and given back once it has read them
    (one deque operation each way, safe from two threads)."""

    def __init__(self) -> None:
        self.free: dict[int, deque] = {}

    def take(self, n: int) -> list[torch.cuda.Event]:
        free = self.free.get(n)
        if free:
            try:
                return free.popleft()
            except IndexError:          # the other thread took the last one
                pass
        return [torch.cuda.Event(enable_timing=True) for _ in range(n)]

    def give_back(self, events: Sequence[torch.cuda.Event]) -> None:
        free = self.free.get(len(events))
        if free is None:
            free = self.free.setdefault(len(events), deque())
        free.append(events)


class UploadSlot(NamedTuple):
    """One step's (or group's) metadata on the device: views into one H2D copy's buffer."""

    ints: torch.Tensor
    floats: torch.Tensor
    writes: torch.Tensor


class UploadRing:
    """Pairs of (pinned host buffer, device buffer) used in turn: a step's metadata (``ints [rows,
    W]`` int64, ``floats [rows, 2]`` float32, prompt writes ``[3, T]``) is packed into the host
    buffer and sent with one H2D copy. A slot is used again only after ``copied[i]`` (the host
    waits for it) and ``read[i]`` (the last forward that read it; the GPU waits for it)."""

    def __init__(self, n: int, rows: int, width: int, max_writes: int,
                 device: torch.device) -> None:
        self.rows, self.width, self.max_writes = rows, width, max_writes
        words = rows * (width + 1) + 3 * max_writes     # ints, floats (2 x f32 = 1 word), writes
        self.host = [torch.zeros(words, dtype=torch.int64, pin_memory=True) for _ in range(n)]
        self.host_np = [h.numpy() for h in self.host]
        self.dev = [torch.zeros(words, dtype=torch.int64, device=device) for _ in range(n)]
        self.copied = [torch.cuda.Event() for _ in range(n)]
        self.read = [torch.cuda.Event() for _ in range(n)]
        self.i = 0
        self._views: dict[tuple[int, int, int], UploadSlot] = {}

    def fits(self, rows: int, writes: int) -> bool:
        return rows <= self.rows and writes <= self.max_writes

    def pack(self, ints: list, floats: list, writes,
             out_bases: list[int] | None = None) -> tuple[int, int, int, int]:
        """Pack the metadata into the next slot's host buffer; (slot, rows, prompt writes, words).
        ``out_bases``: each step's first place in the device's result ring (``COL_OUT``)."""
        self.i = (self.i + 1) % len(self.host)
        i = self.i
        # Host buffer reuse guard: the H2D copy that last read this buffer must have finished.
        self.copied[i].synchronize()
        rows = sum(a.shape[0] for a in ints)
        nw = writes.shape[1]
        w = self.width
        buf = self.host_np[i]
        n_ints = rows * w
        if len(ints) == 1:
            buf[:n_ints].reshape(rows, w)[:] = ints[0]
            buf[n_ints:n_ints + rows].view(np.float32).reshape(rows, 2)[:] = floats[0]
        else:                           # a multi-step group: its steps' rows one after another
            np.concatenate(ints, out=buf[:n_ints].reshape(rows, w))
            np.concatenate(floats, out=buf[n_ints:n_ints + rows].view(np.float32).reshape(rows, 2))
        if out_bases is not None:
            table, row = buf[:n_ints].reshape(rows, w), 0
            for step_ints, base in zip(ints, out_bases):
                size = step_ints.shape[0]
                table[row:row + size, COL_OUT] = np.arange(base, base + size)
                row += size
        end = n_ints + rows
        if nw:
            buf[end:end + 3 * nw].reshape(3, nw)[:] = writes
        return i, rows, nw, end + 3 * nw

    def send(self, i: int, rows: int, nw: int, words: int,
             stream: torch.cuda.Stream) -> UploadSlot:
        # Device buffer reuse guard (on the GPU): the forwards that read this buffer last are done.
        stream.wait_event(self.read[i])
        dev = self.dev[i]
        dev[:words].copy_(self.host[i][:words], non_blocking=True)
        key = (i, rows, nw)
        slot = self._views.get(key)
        if slot is None:                # views are made once per shape (decode steps repeat them)
            n_ints = rows * self.width
            slot = UploadSlot(dev[:n_ints].view(rows, self.width),
                              dev[n_ints:n_ints + rows].view(torch.float32).view(rows, 2),
                              dev[n_ints + rows:words].view(3, nw))
            if nw == 0:
                self._views[key] = slot
        return slot
