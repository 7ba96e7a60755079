"""The device interface: what the scheduler may ask of a "GPU", and what it gets back.

The scheduler speaks to a device through a few verbs, in this order each step:

- ``upload(metas)``  metadata -> device, on the **scheduler stream** (small copies, prompt writes);
                     one step, or the k steps of a multi-step group in one copy
- ``forward(up)``    on the **engine stream**: wait for the metadata (metadata -> forward), gather
                     inputs from token_pool, run the model, sample, write tokens back to token_pool;
                     then copy the tokens to a host buffer (on a copy stream, CUDA's default) and
                     record ``copy_done``. Returns at once: nothing here waits for the device.
- ``out.copy_done.synchronize()`` later, when the CPU needs the values (one step later in overlap).

``begin_run`` / ``end_run`` bracket one ``generate`` call, and ``close`` releases the device.
Three implementations: ``CudaDevice`` (real CUDA streams, ``devices/cuda.py``), and on a CPU
``ProcessDevice`` (a separate device process plays the GPU) or ``InlineDevice`` (the same step
run in-process, serial; a labelled fallback) in ``devices/process.py``.
"""

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
