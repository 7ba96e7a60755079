"""What the recorder hooks in a peer's process share (each peer folder's ``hook.py``): the wait
on a step's result copy, timed where the peer's loop waits, and the GPU's clock mapped
onto the host's, as our own CUDA device maps it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from record.recorder import Timeline


class TimedWait:
    """A result's ``copy_done`` event whose ``synchronize()`` is recorded as a ``wait``: the peer's
    loop calls it, and ``waited(step, start_ns)`` records it."""

    def __init__(self, event: Any, waited: Callable[[int, int], None], step: int) -> None:
        self.event, self.waited, self.step = event, waited, step

    def synchronize(self) -> None:
        start = time.perf_counter_ns()
        self.event.synchronize()            # the CPU waits for step n's result copy
        self.waited(self.step, start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.event, name)


def map_gpu_clock(timeline: Timeline, stream: Any = None) -> int:
    """Map the GPU's clock onto the host's with one event recorded on an idle GPU (on
    ``stream``, default the current one); the host's time then, in ns."""
    import torch

    torch.cuda.synchronize()
    ref = torch.cuda.Event(enable_timing=True)
    host_ns = time.perf_counter_ns()
    ref.record(stream)                      # the GPU is idle: it fires at about host_ns
    ref.synchronize()
    timeline.set_gpu_reference(ref, host_ns)
    return host_ns
