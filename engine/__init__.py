"""A small, real LLM inference engine that runs a serial (normal) or overlapped scheduler loop.

Import cost is kept low: ``Engine`` and friends are loaded on first use, so ``import engine.trace``
or ``import record.metrics`` (used by the UI for imported traces) never pulls in torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Engine", "EngineConfig", "SamplingParams", "RunResult", "HazardSwitches"]


def __getattr__(name: str) -> Any:
    if name in ("Engine", "RunResult"):
        from engine import engine as _engine
        return getattr(_engine, name)
    if name in ("EngineConfig", "SamplingParams", "HazardSwitches"):
        from engine import config as _config
        return getattr(_config, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
