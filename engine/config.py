"""Configuration values: what engine to build, how to sample, which loop a run uses. Frozen
dataclasses, checked in ``__post_init__``, so a bad value fails where it was made."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Any

from record.schema import ENGINE_LOOPS, Loop, loop_label

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "float16", "bfloat16", "float64")
ATTENTION = ("auto", "reference", "triton")
MAX_DECODE_STEPS = 16
MAX_EXTRA_CPU_US = 1_000_000
# Batches in flight at most: k launched this iteration + k of the previous one being processed.
# Host result buffers form a ring one longer, so none is rewritten before the CPU has read it.
RESULT_BUFFERS = 2 * MAX_DECODE_STEPS + 1
# Where a CUDA device's result copy runs (engine/devices/cuda.py says what each does to the GPU).
COPY_PLACEMENTS = ("copy", "engine", "scheduler")
INT64_MAX = 2**63 - 1


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _is_int(value: Any) -> bool:
    """A whole number (numpy's too), not a bool: ``True`` is not a token count."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _int_in(owner: str, name: str, value: Any, low: int, high: int) -> None:
    _check(_is_int(value) and low <= value <= high,
           f"{owner}.{name} must be an integer in {low}..{high}, got {value!r}")


def _number_in(owner: str, name: str, value: Any, low: float, high: float,
               low_open: bool = False) -> None:
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and math.isfinite(value) and value <= high
          and (low < value if low_open else low <= value))
    bracket = "(" if low_open else "["
    _check(ok, f"{owner}.{name} must be a finite number in {bracket}{low}, {high}], got {value!r}")


@dataclass(frozen=True)
class HazardSwitches:
    """Debug-only switches, each removing one safeguard (the hazard lab). All off = safe engine."""

    no_wait_stream: bool = False      # engine stream does not wait for the metadata upload
    no_deferred_free: bool = False    # free a finished request's slot at once (its token_pool
                                      # row is rewritten under the lag-one forward)
    single_host_buffer: bool = False  # one host result buffer instead of a ring of them
    no_finished_guard: bool = False   # the lag-one token of a finished request is processed as
                                      # if it still ran (appended; a check ends it again)
    no_deferred_retract_free: bool = False  # free a retracted request's slot at once
    no_retract_guard: bool = False    # the token a launched batch computes for a request that
                                      # was retracted meanwhile is not dropped
    no_cache_lock: bool = False       # prefix-cache pages a running request reads are not locked
    late_prefix_insert: bool = False  # a prefill's prefix is inserted when its result is
                                      # processed, after the next batch was built, and the
                                      # request remapped to the cache's pages, as SGLang main
                                      # still does (the open SGLang PR 38140)
    no_result_ring: bool = False      # the copy stream copies the CUDA graph's output, which
                                      # the next replay rewrites, not the step's result-ring row
    # Widen the race window of whichever safeguard is off: a GPU sleep on the stream it guards,
    # or a host pause before reading the result buffer (single_host_buffer).
    inject_delay_us: int = 0


@dataclass(frozen=True)
class EngineConfig:
    """What to build. ``model`` is "bundled", a preset name, a local HF directory or a hub id."""

    model: str = "bundled"
    device: str = "auto"
    cuda_graph: bool = False
    max_batch_size: int = 16          # requests decoded together (= request slots)
    max_seq_len: int = 512            # prompt + output tokens per request
    page_size: int = 16               # tokens per KV page
    num_pages: int | None = None      # KV pages; None: every slot at max_seq_len
    prefix_cache: bool = True         # a radix cache of computed pages, matched at admission
    max_prefill_tokens: int = 512     # prefill batch token budget (chunking)
    dtype: str = "auto"               # auto: bfloat16 on CUDA, float32 on CPU
    seed: int = 0
    record_timeline: bool = True
    cpu_device_process: bool = True   # on CPU, run the model in a separate device process
    cpu_threads: int = 1              # torch intra-op threads of the CPU device
    result_copy_stream: str = "copy"  # a copy stream of its own (vLLM, SGLang); "engine": after
                                      # sampling (Mini-SGLang); "scheduler": serialises the GPU
    device_cpus: tuple[int, ...] = ()  # cores the CPU device process may use (empty: any)
    hazards: HazardSwitches = field(default_factory=HazardSwitches)
    debug_checks: bool = False        # check every launched batch's KV mapping (tests, the lab)
    # The fast decode path (CUDA only; CPU mode always runs the plain-PyTorch path):
    attention: str = "auto"           # auto: Triton paged decode attention on CUDA; or "reference"
    compile: bool | None = None       # torch.compile the decode step between attentions; None:
                                      # on for CUDA (see engine/models/compiled.py), never on CPU

    def __post_init__(self) -> None:
        c = "EngineConfig"
        _check(isinstance(self.model, str) and self.model.strip() != "",
               "EngineConfig.model must be a non-empty string")
        _check(self.device in DEVICES, f"EngineConfig.device must be one of {DEVICES}, "
               f"got {self.device!r}")
        _check(self.dtype in DTYPES, f"EngineConfig.dtype must be one of {DTYPES}, got {self.dtype!r}")
        _int_in(c, "max_batch_size", self.max_batch_size, 1, 1024)
        _int_in(c, "page_size", self.page_size, 1, 1024)
        _int_in(c, "max_seq_len", self.max_seq_len, 2, 1 << 17)
        _int_in(c, "max_prefill_tokens", self.max_prefill_tokens, 1, 1 << 20)
        if self.num_pages is not None:
            _int_in(c, "num_pages", self.num_pages, 1, 1 << 24)
        _int_in(c, "seed", self.seed, 0, INT64_MAX)
        _int_in(c, "cpu_threads", self.cpu_threads, 1, 256)
        _check(self.result_copy_stream in COPY_PLACEMENTS,
               f"EngineConfig.result_copy_stream must be one of {COPY_PLACEMENTS}, "
               f"got {self.result_copy_stream!r}")
        _check(isinstance(self.device_cpus, tuple) and all(_is_int(c) and c >= 0
                                                           for c in self.device_cpus),
               f"EngineConfig.device_cpus must be a tuple of core numbers, got {self.device_cpus!r}")
        _check(self.compile is None or isinstance(self.compile, bool),
               f"EngineConfig.compile must be True, False or None (auto), got {self.compile!r}")
        for name in ("cuda_graph", "record_timeline", "cpu_device_process",
                     "prefix_cache", "debug_checks"):
            _check(isinstance(getattr(self, name), bool),
                   f"EngineConfig.{name} must be True or False, got {getattr(self, name)!r}")
        _check(self.attention in ATTENTION, f"EngineConfig.attention must be one of {ATTENTION}, "
               f"got {self.attention!r}")

    def compiles(self, device: str) -> bool:
        """Whether the decode step is compiled on ``device``: as asked, else on CUDA only."""
        return device == "cuda" if self.compile is None else self.compile

    @property
    def pages_per_seq(self) -> int:
        return -(-self.max_seq_len // self.page_size)

    @property
    def total_pages(self) -> int:
        if self.num_pages is not None:
            return self.num_pages
        return self.max_batch_size * self.pages_per_seq

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each next token. ``temperature == 0`` is greedy (deterministic)."""

    max_new_tokens: int = 32
    temperature: float = 0.0
    top_k: int = 0                    # 0: no top-k filter
    top_p: float = 1.0                # 1.0: no nucleus filter
    seed: int | None = None           # None: derived from the engine seed and the request index
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] | list[int] = ()

    def __post_init__(self) -> None:
        c = "SamplingParams"
        _int_in(c, "max_new_tokens", self.max_new_tokens, 1, 1 << 20)
        _number_in(c, "temperature", self.temperature, 0.0, 100.0)
        _int_in(c, "top_k", self.top_k, 0, 1 << 31)
        _number_in(c, "top_p", self.top_p, 0.0, 1.0, low_open=True)
        if self.seed is not None:
            _int_in(c, "seed", self.seed, 0, INT64_MAX)
        _check(isinstance(self.ignore_eos, bool),
               f"SamplingParams.ignore_eos must be True or False, got {self.ignore_eos!r}")
        _check(isinstance(self.stop_token_ids, (tuple, list))
               and all(_is_int(t) and 0 <= t <= INT64_MAX for t in self.stop_token_ids),
               f"SamplingParams.stop_token_ids must be a list of non-negative integers, "
               f"got {self.stop_token_ids!r}")


@dataclass(frozen=True)
class LoopSpec:
    """Which loop one run uses, and how (a run's, not the engine's): ``decode_steps`` is k of the
    multistep loop (1 for the others); ``extra_cpu_us`` real CPU work added to every iteration."""

    loop: Loop
    decode_steps: int = 1
    extra_cpu_us: int = 0

    def __post_init__(self) -> None:
        c = "LoopSpec"
        _check(isinstance(self.loop, Loop) and self.loop in ENGINE_LOOPS,
               f"LoopSpec.loop must be one of {', '.join(ENGINE_LOOPS)} (a record.schema.Loop), "
               f"got {self.loop!r}")
        if self.loop == Loop.MULTISTEP:
            _int_in(c, "decode_steps", self.decode_steps, 2, MAX_DECODE_STEPS)
        else:
            _check(_is_int(self.decode_steps) and self.decode_steps == 1,
                   f"LoopSpec.decode_steps is k of the multistep loop: 1 for the {self.loop} "
                   f"loop, got {self.decode_steps!r}")
        _int_in(c, "extra_cpu_us", self.extra_cpu_us, 0, MAX_EXTRA_CPU_US)

    @property
    def label(self) -> str:
        """The loop's name for tables and logs, with k for multi-step ("multistep k=3")."""
        return loop_label(self.loop, self.decode_steps)


OVERLAP = LoopSpec(Loop.OVERLAP)     # the loop an engine runs unless a call names another
NORMAL = LoopSpec(Loop.NORMAL)
