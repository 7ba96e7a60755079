"""The messages between the web server and the scheduler process: frozen dataclasses, pickled over
a pipe. No torch here.

    server -> scheduler   LiveRunRequest | LabRequest | WarmRequest | CancelRequest
    scheduler -> server   SchedulerReady, then per request: Progress*, SpanBatch*, LoopFinished*,
                          and one of RunFinished | LabFinished | Warmed | RequestFailed

A served session is one long request: ``ServeRequest``, then ``SubmitRequest | AbortRequest |
StatsQuery`` and ``StopServing``; back come ``ServingStarted``, ``TokensOut | ServingStats |
SpanBatch | Rejected``, and ``ServingStopped``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig, LoopSpec, SamplingParams
from engine.workloads import Workload
from record.recorder import Span
from record.schema import RecordDict, RunConfig, RunDict

# ---- server -> scheduler ----------------------------------------------------------------------

@dataclass(frozen=True)
class LiveRunRequest:
    """Run the chosen loops, one after another, on one engine, on the same workload (its
    prompts as text, its lengths, sampling, arrivals and chat: ``engine.workloads.Workload``)."""

    engine: EngineConfig
    workload: Workload
    loops: tuple[LoopSpec, ...]         # the chosen loops, in ENGINE_LOOPS' order
    rounds: int = 1                     # the loops this many times; the quietest round is kept


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


@dataclass(frozen=True)
class ServeRequest:
    """Serve requests that stream in (``SubmitRequest``) until ``StopServing``, with one loop."""

    engine: EngineConfig
    loop: LoopSpec                      # the session's loop, its k and its extra CPU work


@dataclass(frozen=True)
class SubmitRequest:
    """One request of a served session: token ids (the server tokenized them) and sampling."""

    rid: int                            # unique in the session (the server numbers them)
    prompt_ids: list[int]
    params: SamplingParams
    arrival_ns: int                     # perf_counter_ns when the server received it


@dataclass(frozen=True)
class AbortRequest:
    """Stop a served request now (its client went away); its pages and slot are freed."""

    rid: int


@dataclass(frozen=True)
class StatsQuery:
    """Ask the serving loop for ``ServingStats`` (answered at its next stage 1)."""

    token: int


@dataclass(frozen=True)
class StopServing:
    """Finish the requests in progress, then end the served session."""


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
    stage: str                          # "loading" | "download" | "probe" | "run"
    loop: str = ""                      # the loop now running (stage "run")
    index: int = 0                      # which of the request's loops
    total: int = 0
    detail: str = ""                    # the device label once the engine exists (stage
                                        #   "download": where the fetch stands, in English)
    done_mib: float = 0.0               # stage "download": MiB of weights fetched so far,
    total_mib: float = 0.0              #   of this many


@dataclass(frozen=True)
class SpanBatch:
    """Spans recorded since the previous batch of the same loop (the live view grows by these)."""

    index: int                          # which loop of the request
    spans: list[Span]


@dataclass(frozen=True)
class LoopFinished:
    index: int
    run: RunDict                        # the finished run (record.run_record.run_dict)


@dataclass(frozen=True)
class RunFinished:
    record: RecordDict                  # the schema-1 record of every loop


@dataclass(frozen=True)
class LabFinished:
    report: dict[str, Any]              # dataclasses.asdict(engine.lab.hazard_lab.LabReport)


@dataclass(frozen=True)
class DeviceProfile:
    """What one decode step of a workload costs on this device (serial loop, no extra CPU work):
    the page sizes its extra-CPU-work control by it."""

    device_kind: str                    # "cuda" | "cpu-process" | "cpu-inline"
    device_name: str                    # "NVIDIA H200", "CPU (x86_64)"
    model: str
    batch: int                          # requests decoded together in the probe
    cuda_graph: bool
    t_fwd_us: float                     # the engine stream's work per decode step
    t_cpu_us: float                     # the scheduler's own CPU work per decode step
    source: str = "warm-up"             # "warm-up" | "run": the page's last run, serial loop
    extra_us: int = 0                   # a run's extra CPU work a step (left out of t_cpu_us)


@dataclass(frozen=True)
class Warmed:
    detail: str
    profile: DeviceProfile | None = None   # with a probe: what a decode step costs here


@dataclass(frozen=True)
class ServingStarted:
    """The served session's engine is ready: what the server needs to check and tokenize."""

    model: str                          # the name it was asked for
    tokenizer_path: str | None          # where the engine's tokenizer came from (None: ids only)
    max_seq_len: int                    # prompt + output tokens per request
    vocab_size: int
    device: str                         # the device label
    env: dict[str, Any]
    config: RunConfig                   # the session record's (``engine.run.run_config``)


@dataclass(frozen=True)
class TokenDelta:
    """New tokens of one served request, and how it ended once it has (times: µs on the
    session's clock)."""

    rid: int
    token_ids: list[int]
    token_us: list[float]
    finish_reason: str = ""             # "" while it runs; "stop" | "length" | "abort"
    prompt_tokens: int = 0
    arrival_us: float = 0.0
    first_token_us: float = 0.0
    finish_us: float = 0.0
    wasted_steps: int = 0


@dataclass(frozen=True)
class TokensOut:
    """The requests that got tokens (or ended) in one processed step."""

    deltas: list[TokenDelta]


@dataclass(frozen=True)
class Rejected:
    """A submitted request the engine refused (the message names the limit)."""

    rid: int
    message: str


@dataclass(frozen=True)
class ServingStats:
    """The session's requests and the engine's pools, at a stage 1 (an iteration boundary)."""

    token: int
    active: int                         # requests received and not finished
    served: int                         # requests finished (stop, length or abort)
    kv_pages_free: int
    kv_pages_total: int
    req_slots_free: int
    req_slots_total: int
    kv_pages_cached: int = 0            # held only by the prefix cache (free on demand)
    prefix_hit_tokens: int = 0          # prompt tokens served from the prefix cache, so far
    retractions: int = 0                # requests retracted for memory, so far


@dataclass(frozen=True)
class ServingStopped:
    """The served session ended (StopServing, or the server went away)."""


@dataclass(frozen=True)
class RequestFailed:
    """The request did not finish. ``kind``: "invalid" (bad input), "model" (not found, or a hub
    guard), "offline" (not cached, no hub), "cancelled", "device" (failed or died) or "error"."""

    kind: str
    message: str


# ---- the unions, as a type checker reads the pipe ---------------------------------------------

Request = LiveRunRequest | LabRequest | WarmRequest          # what ``submit`` sends
Event = (SchedulerReady | Progress | SpanBatch | LoopFinished | RunFinished | LabFinished
         | Warmed | RequestFailed | ServingStarted | TokensOut | Rejected | ServingStats
         | ServingStopped)
