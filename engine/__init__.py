"""A small, real LLM inference engine that runs a serial (normal) or overlapped scheduler loop.
One subpackage per concern (the README's map; ``tests/test_layers.py`` keeps imports pointing
down). Start reading at ``scheduler/scheduler.py``. ``Engine`` and friends load on first use, so
``import engine.config`` never pulls in torch."""

from __future__ import annotations

from typing import Any

__all__ = ["Engine", "EngineConfig", "SamplingParams", "LoopSpec", "RunResult", "HazardSwitches"]


def __getattr__(name: str) -> Any:
    if name in ("Engine", "RunResult"):
        from engine import engine as _engine
        return getattr(_engine, name)
    if name in ("EngineConfig", "SamplingParams", "LoopSpec", "HazardSwitches"):
        from engine import config as _config
        return getattr(_config, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
