"""The loop a test sweeps by its parameters: serial or overlapped, k decode steps per iteration
(the multistep loop when k > 1), extra CPU work per iteration. The engine takes only the
``LoopSpec``; this is how a parametrized test names one."""

from __future__ import annotations

from engine.config import LoopSpec
from record.schema import Loop


def loop_of(overlap: bool, k: int = 1, extra_cpu_us: int = 0) -> LoopSpec:
    if not overlap:
        return LoopSpec(Loop.NORMAL, 1, extra_cpu_us)
    return LoopSpec(Loop.MULTISTEP if k > 1 else Loop.OVERLAP, k, extra_cpu_us)
