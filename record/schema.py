"""The vocabulary of a run: its lanes, phases and loops, and the shapes of its record.

Every package names a lane, phase or loop through these ``StrEnum``s: a member *is* its string, so
records read from files compare equal. The ``TypedDict``s describe the plain dicts a record holds
(docs/run_record.md); lanes and phases are ``str`` there (an import brings its own). ``RunConfig``
is the one typed config of our runs. Standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, NotRequired, TypedDict, TypeGuard, final


class Lane(StrEnum):
    """Where a span's work ran: the scheduler thread, or one of the device's streams."""

    CPU = "cpu"                             # the scheduler thread
    SCHEDULER_STREAM = "scheduler_stream"   # metadata uploads (and the result copy, if there)
    ENGINE_STREAM = "engine_stream"         # the forward and sampling (the CPU device plays it)
    COPY_STREAM = "copy_stream"             # the result copy on a stream of its own (CUDA)


LANES = (Lane.CPU, Lane.SCHEDULER_STREAM, Lane.ENGINE_STREAM, Lane.COPY_STREAM)   # drawn so
GPU_LANES = (Lane.SCHEDULER_STREAM, Lane.ENGINE_STREAM, Lane.COPY_STREAM)   # busy = their union
BASE_LANES = LANES[:3]      # every device's; a run lists copy_stream only if its device has one


class Phase(StrEnum):
    """What a span's work was. The first five run on the CPU lane, the rest on the streams."""

    RECEIVE = "receive"             # take new requests
    SCHEDULE = "schedule"           # build the batch
    LAUNCH = "launch"               # enqueue the uploads and the forward
    WAIT = "wait"                   # block on a copy (hidden syncs show up here)
    PROCESS_LAST = "process_last"   # read the last step's tokens: stop checks, free, detokenize
    UPLOAD = "upload"               # batch metadata, host to device
    COPY = "copy"                   # the sampled tokens, device to host
    PREFILL = "prefill"             # a forward over prompts
    DECODE = "decode"               # a forward of one token per request
    SAMPLE = "sample"               # pick the next tokens from the logits
    RESOLVE = "resolve"             # gather the last step's tokens into this step's input, on the
                                    #   device (SGLang's FutureMap resolve; ours is in the forward)


FORWARD_PHASES = (Phase.PREFILL, Phase.DECODE)
# Scheduler-thread phases that are real CPU work (the article's T_sched + T_post). ``wait``
# (blocking on a copy) is time the CPU spends *not* working.
CPU_WORK_PHASES = (Phase.RECEIVE, Phase.SCHEDULE, Phase.LAUNCH, Phase.PROCESS_LAST)


class Loop(StrEnum):
    """Which loop made a run."""

    NORMAL = "normal"           # the serial loop: forward, then the CPU's work, then the next
    OVERLAP = "overlap"         # the CPU processes step n-1 while the GPU runs step n
    MULTISTEP = "multistep"     # overlap with k decode steps per scheduling iteration
    IMPORTED = "imported"       # a torch.profiler trace of another engine
    OTHER = "other"             # read only: a loop this code does not know


ENGINE_LOOPS = (Loop.NORMAL, Loop.OVERLAP, Loop.MULTISTEP)   # what the engine runs, in order
RECORD_LOOPS = ENGINE_LOOPS + (Loop.IMPORTED,)                # what a record may say
# How a run's label names this project's engine beside a peer's ("overlap (this project
# 7944d1e, NVIDIA H200, ...)"); a chart says it in the reader's language (text "detail_ours").
OURS_DETAIL = "this project"
OURS = "ours"           # ``env["engine"]`` of this engine's records: their config is a RunConfig


def loop_label(loop: str, decode_steps: int = 1) -> str:
    """A loop's name for tables and logs, with k for multi-step: "overlap", "multistep k=3".
    (The page says it in the reader's language: ``texts``' ``loopname_*``.)"""
    return f"{loop} k={decode_steps}" if loop == Loop.MULTISTEP else str(loop)


# ---- the record's shapes (docs/run_record.md) -----------------------------------------------

class SpanDict(TypedDict):
    """One interval of work on one lane, times in µs from the run's start."""

    lane: str
    phase: str
    step: int                       # -1: no step
    start_us: float
    end_us: float
    batch_size: NotRequired[int]
    num_tokens: NotRequired[int]
    req_ids: NotRequired[list[int]]
    cached_tokens: NotRequired[int]     # a prefill's prompt tokens found in the prefix cache


class OutputDict(TypedDict):
    """One request's output; the times are µs on the run's clock."""

    token_ids: list[int]
    text: str
    finish_reason: str              # "stop" | "length" (| "abort", a served request)
    prompt_tokens: NotRequired[int | None]
    arrival_us: NotRequired[float | None]
    first_token_us: NotRequired[float | None]
    finish_us: NotRequired[float | None]
    token_us: NotRequired[list[float]]
    wasted_steps: NotRequired[int | None]


class Metrics(TypedDict, total=False):
    """A run's numbers (``record.metrics.compute_metrics``; a step window's or a live run's
    are ``record.window.local_stats``). None: the run cannot tell (not in this trace)."""

    tokens_per_s: float | None
    decode_tokens_per_s: float | None
    output_tokens: int | None
    wall_s: float
    steps: int
    gpu_busy_frac: float
    idle_us_total: float
    idle_gap_count: int
    mean_step_us: float
    mean_idle_per_step_us: float
    t_fwd_us: float
    t_cpu_us: float | None              # None: a trace of another engine measured no CPU work
    predicted_overlap_speedup: float | None
    gpu_wait_us: float                  # such a trace's: the GPU waiting for the host, per step
    ttft_ms_mean: float | None
    ttft_ms_p50: float | None
    tpot_ms_mean: float | None
    steady_step_us: float
    steady_busy_frac: float
    steady_steps: int
    steady_prefill_frac: float
    engine_busy_frac: float | None
    steady_engine_busy_frac: float | None
    decode_gap_us_p50: float | None
    active_busy_frac: float | None
    span_us: float                      # a view's own length (``local_stats``)
    # served and arriving requests (``record.metrics.latency_summary``), in ms
    ttft_ms_p99: float
    itl_ms_mean: float
    itl_ms_p50: float
    itl_ms_p99: float
    tpot_ms_p50: float
    tpot_ms_p99: float
    e2e_ms_mean: float
    e2e_ms_p50: float
    e2e_ms_p99: float
    requests_per_s: float
    completed_requests: int
    # the engine's own (``engine.engine``): lag-one waste, the hazard lab, KV memory
    wasted_tokens: int
    unsafe_frees: int
    unguarded_tokens: int
    prefix_hit_tokens: int | None
    prefix_hit_rate: float | None
    retractions: int
    kv_remaps: int


class WindowDict(TypedDict):
    """What a run cut to some steps (``record.window.window_run``) drew."""

    first_step: int
    last_step: int
    forwards: int
    t_start_us: float
    t_end_us: float
    active: list[tuple[float, float]]   # when requests were in the system


class MemoryTrace(TypedDict):
    """KV pages step by step (``engine.engine.memory_record``), what the memory chart draws."""

    total_pages: int
    steps: list[list[float]]            # [step, time µs, pages used, only cached, free]
    retractions: list[list[float]]      # [step, time µs, request id]


@final           # so that ``"runs" in d`` tells a record from a run (a type checker's narrowing)
class RunDict(TypedDict):
    """One run of a record: which loop and how (its per-loop settings live here, nowhere
    else), its lanes, metrics, spans and outputs."""

    loop: str                       # a ``Loop``
    decode_steps: int               # k: 1 unless multi-step
    extra_cpu_us: int               # real CPU work added to each scheduler iteration (0: none)
    label: str
    lanes: list[str]                # in display order
    gpu_lanes: list[str]            # busy is the union of these
    metrics: Metrics
    spans: list[SpanDict]
    outputs: NotRequired[list[OutputDict]]  # absent from a view cut to some steps: see window
    host: NotRequired[dict[str, float]]     # what else the machine did (record.host_load)
    memory: NotRequired[MemoryTrace]
    window: NotRequired[WindowDict]         # a view cut to some steps
    spans_dropped: NotRequired[int]         # a served session: its oldest spans, left out
    # An imported trace's run, or runs shown side by side, carry more: record.imported.ImportedRun


@final
class RecordDict(TypedDict):
    """A schema-1 run record: where the runs ran, how, and the runs."""

    schema: int
    env: dict[str, Any]
    config: dict[str, Any]
    runs: list[RunDict]
    notes: NotRequired[list[dict[str, Any]]]   # another engine's: what the record cannot tell


# ---- the config of our engine's runs --------------------------------------------------------

@dataclass(frozen=True)
class RunConfig:
    """How our engine's runs of one record were run: the engine's settings and the workload, each
    under one name (``engine.run.run_config`` makes it; ``from_dict`` checks one read back). What
    differs from loop to loop is each run's own. None in a workload field: no one value for the
    run (a trace or a served session gives each request its own)."""

    # the engine (engine.config.EngineConfig's names)
    model: str
    device: str                         # as asked: "auto", "cpu", "cuda" (env says what ran)
    dtype: str
    seed: int
    max_batch_size: int
    max_seq_len: int
    page_size: int
    num_pages: int | None               # the KV pool in pages; None: every slot at full length
    prefix_cache: bool
    max_prefill_tokens: int
    cuda_graph: bool
    compile: bool | None
    attention: str
    result_copy_stream: str
    cpu_device_process: bool
    cpu_threads: int
    device_cpus: tuple[int, ...]
    record_timeline: bool
    debug_checks: bool
    hazards: tuple[str, ...]            # the hazard lab's safeguards switched off (none: safe)
    # the workload (engine.workloads.Workload's names)
    requests: int | None                # None: a served session (as many as its clients sent)
    prompt_tokens: int | None           # tokens a prompt (before the shared system prompt)
    prompt_words: int | None            # words a prompt, where the prompts were given in words
    max_new_tokens: int | None
    temperature: float | None
    ignore_eos: bool
    stop_tokens_from_probe: bool        # each request stops on a token a probe run emitted
    chat: bool                          # as it ran: through the model's chat template
    shared_prefix: int                  # tokens of one system prompt before every prompt
    request_rate: float | None          # Poisson arrivals at this rate; None: all at t=0
    arrivals_file: str | None           # a trace of arrival times and lengths, by file name
    served: bool                        # a served session (the OpenAI-compatible server)

    def to_dict(self) -> dict[str, object]:
        """The config as the record's JSON holds it (tuples as lists)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}

    @classmethod
    def from_dict(cls, d: object) -> RunConfig:
        """A config read back; ``ValueError`` names the first key that is missing, unknown or
        of the wrong type."""
        if not isinstance(d, dict):
            raise ValueError(f"expected an object, got {type(d).__name__}")
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in d]
        unknown = sorted(set(d) - set(names))
        if missing or unknown:
            raise ValueError("; ".join(
                [f"missing key(s) {', '.join(map(repr, missing))}"] * bool(missing)
                + [f"unknown key(s) {', '.join(map(repr, unknown))}"] * bool(unknown)))
        return cls(**{f.name: _typed(f.name, str(f.type), d[f.name]) for f in fields(cls)})


def _typed(name: str, kind: str, value: object) -> Any:
    """``value`` as a field of type ``kind`` ("int", "float | None", "tuple[str, ...]") holds it."""
    base = kind.removesuffix(" | None")
    if value is None:
        if base != kind:
            return None
        raise ValueError(f"{name} must not be null")
    if base.startswith("tuple["):
        item = base[len("tuple["):].partition(",")[0]
        if not isinstance(value, (list, tuple)) or not all(_is(item, v) for v in value):
            raise ValueError(f"{name} must be a list of {item} values, got {value!r}"[:200])
        return tuple(value)
    if not _is(base, value):
        raise ValueError(f"{name} must be {'a finite number' if base == 'float' else base}"
                         f"{' or null' if base != kind else ''}, got {value!r}"[:200])
    return float(value) if base == "float" and isinstance(value, int | float) else value


def _is(kind: str, value: object) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return is_whole(value)
    if kind == "float":
        return is_number(value)
    if kind == "str":
        return isinstance(value, str)
    raise TypeError(f"RunConfig has a field of a type this check does not know: {kind}")


def is_number(value: object) -> TypeGuard[int | float]:
    """A finite int or float: bool is an int in Python, but True is not a time; NaN and inf are
    not valid JSON."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
