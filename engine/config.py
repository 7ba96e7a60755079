"""Configuration values: what engine to build (EngineConfig) and how to sample (SamplingParams).

Both are frozen dataclasses validated in ``__post_init__``, so a bad value fails at the call that
made it, with a message that names the field, instead of deep inside a forward pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "float16", "bfloat16", "float64")
ATTENTION = ("auto", "reference", "triton")
MAX_DECODE_STEPS = 16
# Batches in flight at most: k launched this iteration + k of the previous one being processed.
# Host result buffers form a ring one longer, so none is rewritten before the CPU has read it.
RESULT_BUFFERS = 2 * MAX_DECODE_STEPS + 1


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


@dataclass(frozen=True)
class HazardSwitches:
    """Debug-only switches, each removing one safeguard (the hazard lab). All off = safe engine."""

    no_wait_stream: bool = False      # engine stream does not wait for the metadata upload
    no_deferred_free: bool = False    # free a finished request's slot/pages at once
    single_host_buffer: bool = False  # one result buffer instead of a double buffer
    no_finished_guard: bool = False   # the lag-one token of a finished request is not dropped
    # Widen the race window of whichever safeguard is off, so a fault shows reliably in class:
    # a GPU sleep on the scheduler stream (no_wait_stream) or the engine stream (no_deferred_free),
    # a host pause between copy_done and reading the buffer (single_host_buffer).
    inject_delay_us: int = 0

    def any(self) -> bool:
        return any([self.no_wait_stream, self.no_deferred_free, self.single_host_buffer,
                    self.no_finished_guard])


@dataclass(frozen=True)
class EngineConfig:
    """What to build. ``model`` is "bundled", a preset name, a local HF directory or a hub id."""

    model: str = "bundled"
    device: str = "auto"
    overlap: bool = True
    cuda_graph: bool = False
    max_batch_size: int = 16          # requests decoded together (= request slots)
    max_seq_len: int = 512            # prompt + output tokens per request
    page_size: int = 16               # tokens per KV page
    num_pages: int | None = None      # KV pages; None: every slot at max_seq_len
    max_prefill_tokens: int = 512     # prefill batch token budget (chunking)
    dtype: str = "auto"               # auto: bfloat16 on CUDA, float32 on CPU
    seed: int = 0
    extra_cpu_us: int = 0             # real extra scheduler work per step
    decode_steps_per_schedule: int = 1  # k > 1: multi-step overlap (k forwards per iteration)
    record_timeline: bool = True
    cpu_device_process: bool = True   # on CPU, run the model in a separate device process
    cpu_threads: int = 1              # torch intra-op threads of the CPU device
    result_copy_stream: str = "scheduler"  # or "engine": the copy right after sampling (Mini-SGLang)
    hazards: HazardSwitches = field(default_factory=HazardSwitches)
    # Issue 14, the fast decode path (CUDA only; CPU mode always runs the plain-PyTorch path):
    attention: str = "auto"           # auto: Triton paged decode attention on CUDA; or "reference"
    compile: bool = False             # torch.compile the decode step between attentions (start-up
                                      # cost: seconds, cached on disk; see engine/compiled.py)

    def __post_init__(self) -> None:
        _check(isinstance(self.model, str) and self.model.strip() != "",
               "EngineConfig.model must be a non-empty string")
        _check(self.device in DEVICES, f"EngineConfig.device must be one of {DEVICES}, "
               f"got {self.device!r}")
        _check(self.dtype in DTYPES, f"EngineConfig.dtype must be one of {DTYPES}, got {self.dtype!r}")
        _check(1 <= self.max_batch_size <= 1024,
               f"EngineConfig.max_batch_size must be in 1..1024, got {self.max_batch_size}")
        _check(1 <= self.page_size <= 1024, f"EngineConfig.page_size must be in 1..1024, "
               f"got {self.page_size}")
        _check(2 <= self.max_seq_len <= 1 << 17,
               f"EngineConfig.max_seq_len must be in 2..131072, got {self.max_seq_len}")
        _check(self.max_prefill_tokens >= 1, "EngineConfig.max_prefill_tokens must be >= 1")
        _check(self.num_pages is None or self.num_pages >= 1,
               "EngineConfig.num_pages must be >= 1 (or None for automatic)")
        _check(0 <= self.extra_cpu_us <= 1_000_000,
               f"EngineConfig.extra_cpu_us must be in 0..1000000, got {self.extra_cpu_us}")
        _check(1 <= self.cpu_threads <= 256, "EngineConfig.cpu_threads must be in 1..256")
        _check(self.result_copy_stream in ("scheduler", "engine"),
               "EngineConfig.result_copy_stream must be 'scheduler' or 'engine'")
        _check(1 <= self.decode_steps_per_schedule <= MAX_DECODE_STEPS,
               f"EngineConfig.decode_steps_per_schedule must be in 1..{MAX_DECODE_STEPS}")
        _check(self.attention in ATTENTION, f"EngineConfig.attention must be one of {ATTENTION}, "
               f"got {self.attention!r}")
        _check(isinstance(self.compile, bool), "EngineConfig.compile must be True or False")

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
        _check(isinstance(self.max_new_tokens, int) and self.max_new_tokens >= 1,
               f"SamplingParams.max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        _check(self.temperature >= 0.0, f"SamplingParams.temperature must be >= 0, "
               f"got {self.temperature}")
        _check(self.top_k >= 0, f"SamplingParams.top_k must be >= 0, got {self.top_k}")
        _check(0.0 < self.top_p <= 1.0, f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        _check(all(isinstance(t, int) and t >= 0 for t in self.stop_token_ids),
               f"SamplingParams.stop_token_ids must be non-negative ints, got {self.stop_token_ids!r}")
