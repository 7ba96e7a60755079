"""The device interface: what the scheduler may ask of a "GPU", and what it gets back. Each step,
``upload(metas)`` puts the metadata on the device (scheduler stream); ``forward(up)`` waits for it
on the engine stream, gathers inputs from token_pool, runs the model, samples, writes the tokens
back, copies them to a host buffer and returns at once; ``copy_done.synchronize()`` comes later,
when the CPU needs the values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from engine.scheduler.request import StepMeta
from record.recorder import Timeline


class CopyDone(Protocol):
    """Plays a CUDA event recorded after a result copy: ``synchronize`` blocks until the copy
    has landed in host memory, ``query`` asks without blocking."""

    def synchronize(self) -> None: ...

    def query(self) -> bool: ...


@dataclass(frozen=True)
class ForwardOutput:
    """An in-flight forward: its result lands in ``host_tokens`` once ``copy_done`` completes."""

    step: int
    num_rows: int
    copy_done: CopyDone
    host_tokens: np.ndarray         # view of the host buffer the result is copied into
    keep_alive: tuple = ()          # device tensors that queued work still reads (freed after)

    def tokens(self) -> list[int]:
        return self.host_tokens[: self.num_rows].tolist()


class Device(Protocol):
    """A "GPU" the scheduler can drive: ``CudaDevice``, ``ProcessDevice`` or ``InlineDevice``."""

    kind: str                       # "cuda" | "cpu-process" | "cpu-inline"
    label: str                      # what the run labels say about it (e.g. a fallback's reason)
    lanes: tuple[str, ...]          # the timeline lanes it records on (record.schema.LANES)
    pads_batches: bool              # batches padded to the shapes it warmed (CUDA graphs)

    def begin_run(self, timeline: Timeline) -> None: ...

    def upload(self, metas: Sequence[StepMeta]) -> list[Any]:
        """One handle per step, to be passed to ``forward`` in order."""
        ...

    def forward(self, uploaded: Any) -> ForwardOutput: ...

    def end_run(self) -> None: ...

    def close(self) -> None: ...
