"""Forward-only decode step against the weight-read floor, for each fast-path variant (CUDA).

    python -m studies forward --models qwen2.5-0.5b-shape --batches 1 8 64
    python -m studies forward --variants triton triton+compile --profile     # + kernel list

Each variant builds the model (random weights), captures one decode step per batch size as a CUDA
graph and replays it back to back: no scheduler, no host copies. The floor is every parameter read
once at the copy bandwidth measured in the run."""

from __future__ import annotations

import statistics
import time

import torch

from bench import cli
from bench.timing import copy_bandwidth_gbs, ms_per_call, weight_bytes

# name: (attention, compile, decode GEMV kernel for the layers' linears, RoPE inside the
# attention kernel (None: the engine's choice), torch.compile mode)
# name: (attention, compiled, gemv (or the projections it serves), RoPE in the kernel, mode)
VARIANTS: dict[str, tuple[str, bool, bool | tuple[str, ...], bool | None, str | None]] = {
            "reference": ("reference", False, False, None, None),
            "triton": ("triton", False, False, None, None),
            "triton+rope-apart": ("triton", False, False, False, None),
            "triton+compile": ("triton", True, False, None, None),
            "triton+compile+rope-in-kernel": ("triton", True, False, True, None),
            "triton+compile+autotune": ("triton", True, False, None, "max-autotune-no-cudagraphs"),
            "triton+compile+gemv": ("triton", True, True, None, None),
            "triton+compile+gemv-in": ("triton", True, ("qkv_proj", "gate_up_proj"), None, None),
            "reference+compile": ("reference", True, False, None, None)}


def _rows(runner, batch: int, context: int, pages_per_seq: int):
    from engine.scheduler.request import COL_LEN, COL_SLOT, COL_START, NUM_INT_COLS
    ints, floats = runner.padding_meta(batch, NUM_INT_COLS + pages_per_seq)
    rows = torch.arange(batch, device=ints.device)
    ints[:, COL_SLOT], ints[:, COL_START], ints[:, COL_LEN] = rows, context, 1
    ints[:, NUM_INT_COLS:] = rows[:, None] * pages_per_seq + torch.arange(
        pages_per_seq, device=ints.device)[None, :]                     # row b owns its own pages
    return ints, floats


def profiled_kernels(fn, calls: int) -> list[tuple[str, float]]:
    """(name, µs) of every GPU kernel that ``calls`` calls of ``fn`` ran (torch.profiler), after
    one call outside the profile."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [(e.name, e.device_time) for e in prof.events() if e.device_type.name == "CUDA"]


def graph_step_ms(runner, batch: int, context: int, pages_per_seq: int, iters: int,
                  repeats: int) -> list[float]:
    """Milliseconds per replay of a captured decode step, one figure per repeat."""
    ints, floats = _rows(runner, batch, context, pages_per_seq)
    for _ in range(2):
        runner.step(ints, floats, 1, pages_per_seq, True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        runner.step(ints, floats, 1, pages_per_seq, True)
    return ms_per_call(graph.replay, iters, repeats)


def build_runner(model_name: str, variant: str, max_batch: int, max_seq_len: int, page_size=16,
                 kv_splits: int | None = None):
    from engine.devices.runner import DecodeKernels, ModelRunner, RunnerConfig
    from engine.models.loader import load_model
    attention, compile_, gemv, rope_in_attention, mode = VARIANTS[variant]
    loaded = load_model(model_name, "cuda", torch.bfloat16)
    pages_per_seq = -(-max_seq_len // page_size)
    kernels = (DecodeKernels() if rope_in_attention is None
               else DecodeKernels(rope_in_attention=rope_in_attention))
    runner = ModelRunner(loaded.model, RunnerConfig(
        max_batch, max_seq_len, max_batch * pages_per_seq, page_size, torch.bfloat16,
        torch.device("cuda"), attention=attention, compile=compile_, compile_mode=mode,
        gemv=gemv, kernels=kernels, kv_splits=kv_splits))
    t0 = time.perf_counter()
    runner.warm_up((1, 2), pages_per_seq)
    torch.cuda.synchronize()
    return loaded, runner, pages_per_seq, time.perf_counter() - t0


def run(models: list[str], batches: list[int], variants: list[str], context: int, iters: int,
        repeats: int, profile: bool, splits: list[int | None] | None = None) -> int:
    bw = copy_bandwidth_gbs()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; copy bandwidth "
          f"{bw:.0f} GB/s (read + write, measured now); context {context} keys per row; step = "
          f"median of {repeats} x {iters} graph replays (min-max in brackets)\n")
    print("| model | variant | splits | B | floor ms | step ms | step / floor | warm-up s |")
    print("|---|---|---|---|---|---|---|---|")
    for model in models:
        for variant in variants:
            for split in splits or [None]:
                loaded, runner, pages, warm_s = build_runner(model, variant, max(batches),
                                                             context + 16, kv_splits=split)
                floor_ms = weight_bytes(loaded.model) / (bw * 1e9) * 1e3
                for b in batches:
                    ms = graph_step_ms(runner, b, context, pages, iters, repeats)
                    med = statistics.median(ms)
                    print(f"| {model} | {variant} | {runner.num_splits} | {b} | {floor_ms:.3f} | "
                          f"{med:.3f} [{min(ms):.3f}-{max(ms):.3f}] | {med / floor_ms:.2f} | "
                          f"{warm_s:.1f} |", flush=True)
                if profile:
                    for b in sorted({batches[0], batches[-1]}):
                        profile_step(runner, b, context, pages)
                del loaded, runner
                torch.cuda.empty_cache()
    return 0


def profile_step(runner, batch: int, context: int, pages_per_seq: int, steps: int = 5) -> None:
    """Kernels of one eager decode step by kind and by name: where the step's time goes."""
    from studies.kernel_account import account, format_account
    ints, floats = _rows(runner, batch, context, pages_per_seq)

    def step():
        runner.step(ints, floats, 1, pages_per_seq, True)

    kernels = profiled_kernels(step, steps)
    step_us = statistics.median(ms_per_call(step, steps, 3)) * 1e3
    print(f"\n  B={batch}: " + format_account(account(kernels, steps, step_us)) + "\n")


def main(argv: list[str]) -> int:
    p = cli.parser("python -m studies forward", __doc__)
    p.add_argument("--models", nargs="+", default=["qwen2.5-0.5b-shape"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8, 64])
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS),
                   default=["triton", "triton+compile", "triton+compile+gemv"])
    p.add_argument("--context", type=int, default=160, help="keys per row")
    p.add_argument("--splits", nargs="+", type=int, default=None,
                   help="chunks per row in decode attention (default: the engine's)")
    p.add_argument("--profile", action="store_true", help="the kernels of one step")
    p.add_argument("--iters", type=int, default=50, help="graph replays a round")
    p.add_argument("--repeats", type=int, default=3, help="rounds, the median reported")
    args = p.parse_args(argv)
    return run(args.models, args.batches, args.variants, args.context, args.iters, args.repeats,
               args.profile, args.splits)
