"""A small, real LLM inference engine that runs a serial (normal) or overlapped scheduler loop.

One subpackage per concern, bottom first (``tests/test_layers.py`` keeps imports pointing down):

    config.py, proc_watch.py   values; is a child process alive
    workloads.py the work a run is given (``Workload``)
    layers/      sampling and attention kernels (PyTorch, Triton)
    models/      the Llama-family model, checkpoints, the hub, text <-> ids
    scheduler/   the article: normal_loop / overlap_loop, requests, KV pages, request sources
    devices/     what plays the GPU: two CUDA streams, or a CPU device process; the runner
    engine.py    ``Engine``: prompts in, ``RunResult`` out
    run.py       the one run pipeline: a workload in each loop compared -> one run record
    lab/         the hazard lab
    scheduler_process/  the scheduler process, what it serves, the typed messages to and fro
    serve/       the OpenAI-compatible server; __main__.py: the CLI

Start reading at ``scheduler/scheduler.py``. ``Engine`` and friends load on first use, so ``import
engine.config`` never pulls in torch."""

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
