"""The messages between the web server and the scheduler process (SGLang's split, in small).

The web server (Gradio, or the HTTP API) never runs a scheduler loop: it sends a request to the
scheduler process and reads events back. Every message is a small frozen dataclass, pickled over a
``multiprocessing`` pipe; none is a positional tuple. Requests flow one way, events the other:

    server -> scheduler   LiveRunRequest | LabRequest | WarmRequest | CancelRequest
    scheduler -> server   SchedulerReady, then per request: Progress*, SpanBatch*, LoopFinished*,
                          and exactly one of RunFinished | LabFinished | Warmed | RequestFailed

This module imports no torch: the web server's process stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.config import EngineConfig, SamplingParams
from record.timeline import Span

LOOPS = ("normal", "overlap", "multistep")


# ---- server -> scheduler ----------------------------------------------------------------------

@dataclass(frozen=True)
class LiveRunRequest:
    """Run the chosen loops, one after another, on one engine, on the same workload."""

    engine: EngineConfig
    prompts: list[str]                  # text; a model without a tokenizer gets token ids for it
    prompt_tokens: int                  # ... this many per prompt
    params: SamplingParams
    loops: tuple[str, ...]              # from LOOPS, in order
    decode_steps: int                   # k of the multistep loop
    extra_cpu_us: int
    stop_early: bool                    # per-request stop tokens picked from a probe run
    workload: dict[str, Any] = field(default_factory=dict)   # extra keys for the record's config


@dataclass(frozen=True)
class LabRequest:
    """A hazard-lab run: ``switch`` removed (None: every safeguard on)."""

    switch: str | None
    model: str
    device: str
    seed: int


@dataclass(frozen=True)
class WarmRequest:
    """Build (and keep) the engine for this configuration, so the first run starts at once; with
    ``probe``, also run that request's stop-token probe now (it is kept for when it comes)."""

    engine: EngineConfig
    probe: LiveRunRequest | None = None


@dataclass(frozen=True)
class CancelRequest:
    """Stop the request in progress at the next scheduler iteration."""


# ---- scheduler -> server ----------------------------------------------------------------------

@dataclass(frozen=True)
class SchedulerReady:
    """The scheduler process is up; what it found on its machine, and where it runs."""

    pid: int
    cuda: bool                          # a CUDA GPU is usable
    device_name: str
    placement: str                      # e.g. "scheduler on core 0, device process on core 1"


@dataclass(frozen=True)
class Progress:
    stage: str                          # "loading" | "probe" | "run"
    loop: str = ""                      # the loop now running (stage "run")
    index: int = 0                      # which of the request's loops
    total: int = 0
    detail: str = ""                    # the device label once the engine exists


@dataclass(frozen=True)
class SpanBatch:
    """Spans recorded since the previous batch of the same loop (the live view grows by these)."""

    index: int                          # which loop of the request
    spans: list[Span]


@dataclass(frozen=True)
class LoopFinished:
    index: int
    run: dict[str, Any]                 # the finished run (record.run_record.run_dict)


@dataclass(frozen=True)
class RunFinished:
    record: dict[str, Any]              # the schema-1 record of every loop


@dataclass(frozen=True)
class LabFinished:
    report: dict[str, Any]              # dataclasses.asdict(engine.hazard_lab.LabReport)


@dataclass(frozen=True)
class Warmed:
    detail: str


@dataclass(frozen=True)
class RequestFailed:
    """The request did not finish. ``kind``: "invalid" (bad input, said in ``message``),
    "cancelled", "device" (the device failed or died) or "error" (anything else)."""

    kind: str
    message: str
