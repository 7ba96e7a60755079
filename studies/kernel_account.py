"""Where a decode forward's GPU time goes, kernel by kernel: a step's kernels sorted into kinds
(matrix products, attention, fused elementwise work, sampling, copies), each kind's count and
microseconds a step, and the time between them. One account for our graph replays and any
engine's trace whose host marks its forwards (SGLang's ``step[...]``): a kernel belongs to the
step whose mark holds its launch, so an overlapped loop's trace is read right too."""

from __future__ import annotations

import bisect
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from record.bounded_read import DEFAULT_MAX_BYTES
from record.imported.host_phases import SGLANG_STEP
from record.imported.profiler_events import Trace, parse_events, read_limited

# A kernel's kind: the first kind one of whose words its name holds (lower case). The order
# matters: a compiled argmax (``triton_red_fused_argmax``) is sampling, and FlashInfer's fused
# RMSNorm a norm, not attention, though its name says "flashinfer".
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("matmul (GEMM / GEMV)", ("gemm", "gemv", "nvjet", "cutlass", "xmma", "cublas", "matmul",
                              "splitk")),
    ("sampling (argmax, top-k)", ("argmax", "topk", "top_k", "sampl")),
    ("norms, RoPE, SiLU, adds (fused)", ("rmsnorm", "rms_norm", "layernorm", "rope", "rotary",
                                         "silu", "act_and_mul", "triton_")),
    ("attention", ("_split_kernel", "_merge_kernel", "attention", "attn", "flash", "prefill",
                   "decode", "mergestates")),
    ("KV writes, gathers, copies, elementwise", ("store_kv", "kvcache", "index", "gather",
                                                 "scatter", "copy", "memcpy", "memset",
                                                 "elementwise", "fill")))
OTHER = "other"
GAPS = "between kernels (graph gaps, waits for the host)"


def kind_of(name: str) -> str:
    """The kind of a kernel by its name (``KINDS``), or ``OTHER``."""
    low = name.lower()
    for kind, words in KINDS:
        if any(w in low for w in words):
            return kind
    return OTHER


@dataclass(frozen=True)
class KindRow:
    """One kind (or one kernel) in an account: how many a step and their µs a step."""

    name: str
    per_step: float
    us_per_step: float
    us_each: float


@dataclass(frozen=True)
class KernelAccount:
    """The kernels of ``steps`` steps of one kind of forward, per step."""

    steps: int
    step_us: float          # the step's GPU time: first kernel start to last kernel end
    kernel_us: float        # the kernels' own time (the rest of ``step_us`` lies between them)
    kinds: list[KindRow]
    kernels: list[KindRow]  # the costliest kernels by name

    @property
    def gap_us(self) -> float:
        return max(0.0, self.step_us - self.kernel_us)

    @property
    def count(self) -> float:
        return sum(row.per_step for row in self.kinds)


def account(kernels: Iterable[tuple[str, float]], steps: int, step_us: float,
            top: int | None = 12) -> KernelAccount:
    """The account of ``kernels`` ((name, µs) pairs) that ran in ``steps`` steps of ``step_us``
    GPU time each (the ``top`` costliest kernels by name; None: all)."""
    by_kind: dict[str, list[float]] = defaultdict(list)
    by_name: dict[str, list[float]] = defaultdict(list)
    for name, us in kernels:
        by_kind[kind_of(name)].append(us)
        by_name[name].append(us)

    def rows(groups: dict[str, list[float]]) -> list[KindRow]:
        return sorted((KindRow(name, len(t) / steps, sum(t) / steps, statistics.median(t))
                       for name, t in groups.items()), key=lambda r: -r.us_per_step)

    kernel_us = sum(sum(t) for t in by_kind.values()) / steps if steps else 0.0
    return KernelAccount(steps, step_us, kernel_us, rows(by_kind), rows(by_name)[:top])


def format_account(acc: KernelAccount, floor_us: float | None = None) -> str:
    """The account as two markdown tables: by kind (and the time between kernels), then the
    costliest kernels."""
    floor = f"; weight-read floor {floor_us:.1f} µs" if floor_us else ""
    lines = [f"{acc.count:.0f} kernels a step, {acc.kernel_us:.1f} µs of kernel time in a "
             f"{acc.step_us:.1f} µs step (mean of {acc.steps}){floor}", "",
             "| kind | kernels a step | µs a step | of the step |", "|---|---|---|---|"]

    def share(us: float) -> str:
        return f"{us / acc.step_us:.1%}" if acc.step_us else "–"

    for row in acc.kinds:
        lines.append(f"| {row.name} | {row.per_step:.0f} | {row.us_per_step:.1f} | "
                     f"{share(row.us_per_step)} |")
    lines += [f"| {GAPS} | – | {acc.gap_us:.1f} | {share(acc.gap_us)} |", "",
              "| kernel | a step | µs a step | µs each |", "|---|---|---|---|"]
    for row in acc.kernels:
        lines.append(f"| `{row.name[:90]}` | {row.per_step:.0f} | {row.us_per_step:.1f} | "
                     f"{row.us_each:.2f} |")
    return "\n".join(lines)


# ---- a profiler trace's steps -------------------------------------------------------------------

def trace_accounts(source: bytes | str | os.PathLike[str], skip: int = 1,
                   max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, KernelAccount]:
    """Per kind of marked step in a profiler trace (``"DECODE bs=16"``): the account of its
    steps, the first ``skip`` of each kind left out (a first step pays first-use work). Empty
    where the trace marks no step. Raises ``TraceImportError`` for what is not a trace."""
    trace = Trace(parse_events(read_limited(source, max_bytes)))
    marks = sorted((e for e in trace.host if e.cat == "user_annotation"
                    and SGLANG_STEP.fullmatch(e.name)), key=lambda e: e.ts)
    starts = [m.ts for m in marks]
    steps: list[list[tuple[str, float, float]]] = [[] for _ in marks]
    for work in trace.gpu:
        launch = trace.launch_of(work)
        if work.cat != "kernel" or launch is None:
            continue
        i = bisect.bisect_right(starts, launch.ts) - 1
        if i >= 0 and launch.ts <= marks[i].end:
            steps[i].append((work.name, work.ts, work.dur))
    grouped: dict[str, list[list[tuple[str, float, float]]]] = defaultdict(list)
    for mark, kernels in zip(marks, steps):
        if kernels:
            match = SGLANG_STEP.fullmatch(mark.name)
            assert match is not None
            grouped[f"{match['mode']} bs={match['bs']}"].append(kernels)
    out = {}
    for label, runs in grouped.items():
        kept = runs[skip:] if len(runs) > skip else runs
        out[label] = account(((name, dur) for run in kept for name, _, dur in run), len(kept),
                             statistics.mean(_span(run) for run in kept))
    return out


def _span(kernels: Sequence[tuple[str, float, float]]) -> float:
    return max(ts + dur for _, ts, dur in kernels) - min(ts for _, ts, _ in kernels)
