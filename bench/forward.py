"""Forward-only decode step against the weight-read floor, for each fast-path variant (CUDA).

    python -m bench --forward --models qwen2.5-0.5b-shape --batches 1 8 64
    python -m bench --forward --variants triton triton+compile --profile     # + kernel list
    python -m bench --attention-sweep                 # the attention kernel alone: splits, blocks

The floor: every parameter read once per step, at the device-to-device copy bandwidth measured in
the same run (bytes read + bytes written over the time of a large copy). A decode step can't beat
it; the ratio ``step / floor`` says how far we are. Each variant builds the model (random weights),
warms up (compile time printed), captures one CUDA graph per batch size of one decode step (every
row at ``--context`` keys) and replays it back to back: no scheduler, no host copies.
"""

from __future__ import annotations

import statistics
import time

import torch

SWEEP_SPLITS, SWEEP_BLOCKS = (1, 2, 4, 8), (32, 64)
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


def copy_bandwidth_gbs(device: str = "cuda", mib: int = 1024, iters: int = 20) -> float:
    """Device-to-device copy bandwidth, GB/s, counting bytes read plus bytes written."""
    src = torch.empty(mib << 20, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    src.random_(0, 255)
    for _ in range(3):
        dst.copy_(src)
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(iters):
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dst.copy_(src)
            times.append(time.perf_counter() - t0)
    return 2 * src.numel() / statistics.median(times) / 1e9


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of every distinct parameter (tied embeddings once): what one step must read."""
    return sum(p.numel() * p.element_size() for p in model.parameters())   # dedups shared ones


def _rows(runner, batch: int, context: int, pages_per_seq: int):
    from engine.scheduler.request import COL_LEN, COL_SLOT, COL_START, NUM_INT_COLS
    ints, floats = runner.padding_meta(batch, NUM_INT_COLS + pages_per_seq)
    rows = torch.arange(batch, device=ints.device)
    ints[:, COL_SLOT], ints[:, COL_START], ints[:, COL_LEN] = rows, context, 1
    ints[:, NUM_INT_COLS:] = rows[:, None] * pages_per_seq + torch.arange(
        pages_per_seq, device=ints.device)[None, :]                     # row b owns its own pages
    return ints, floats


def ms_per_call(fn, iters: int, repeats: int, stream: torch.cuda.Stream | None = None) -> list[float]:
    """Milliseconds per call of ``fn``, one figure per round of ``iters`` back-to-back calls:
    CUDA events on ``stream`` (default: the current one) around each round, after one untimed
    call, so no round starts cold."""
    stream = stream or torch.cuda.current_stream()
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(iters):
            fn()
        end.record(stream)
        end.synchronize()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / iters)
    return out


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
    from engine.devices.runner import ModelRunner
    from engine.models.loader import load_model
    attention, compile_, gemv, rope_in_attention, mode = VARIANTS[variant]
    loaded = load_model(model_name, "cuda", torch.bfloat16)
    pages_per_seq = -(-max_seq_len // page_size)
    runner = ModelRunner(loaded.model, max_batch, max_seq_len, max_batch * pages_per_seq,
                         page_size, torch.bfloat16, torch.device("cuda"), attention=attention,
                         compile=compile_, gemv=gemv, rope_in_attention=rope_in_attention,
                         kv_splits=kv_splits, compile_mode=mode)
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
    from record.kernel_account import account, format_account
    ints, floats = _rows(runner, batch, context, pages_per_seq)

    def step():
        runner.step(ints, floats, 1, pages_per_seq, True)

    kernels = profiled_kernels(step, steps)
    step_us = statistics.median(ms_per_call(step, steps, 3)) * 1e3
    print(f"\n  B={batch}: " + format_account(account(kernels, steps, step_us)) + "\n")


def attention_sweep(iters: int = 20) -> int:
    """The attention kernel alone, captured as 24 back-to-back calls (one per layer), against the
    plain path (gather + masked SDPA): per-call microseconds for splits x block sizes."""
    shapes = {"0.5B (14/2/64)": (14, 2, 64), "1.5B (12/2/128)": (12, 2, 128)}
    print("\n| shape | B | context | plain us | " + " | ".join(
        f"s{s}/n{n}" for s in SWEEP_SPLITS for n in SWEEP_BLOCKS) + " |")
    for label, (nh, nkv, d) in shapes.items():
        for b in (1, 64):
            for ctx in (160, 1024, 4096):
                ps, pages = 16, -(-(ctx + 1) // 16)
                q = torch.randn(b, nh, d, device="cuda", dtype=torch.bfloat16)
                kn, vn = (torch.randn(b, nkv, d, device="cuda", dtype=torch.bfloat16)
                          for _ in range(2))
                kc, vc = (torch.randn((b * pages + 1) * ps, nkv, d, device="cuda",
                                      dtype=torch.bfloat16) for _ in range(2))
                table = torch.arange(b * pages, device="cuda").view(b, pages)
                lens = torch.full((b,), ctx, device="cuda", dtype=torch.int64)
                cells = _sweep_cells(q, kn, vn, kc, vc, table, lens, ps, iters)
                print(f"| {label} | {b} | {ctx} | " + " | ".join(f"{c:.1f}" for c in cells) + " |",
                      flush=True)
    return 0


def _sweep_cells(q, kn, vn, kc, vc, table, lens, ps, iters) -> list[float]:
    """Microseconds per call: the plain path, then the kernel at each (splits, block) setting."""
    from engine.layers.attention_triton import paged_decode_attention
    plain = _plain_context(table, lens, ps, q.dtype)
    cells = [_time_calls(lambda: plain.attend(q[:, None], kn[:, None], vn[:, None], kc, vc), iters)]
    for s in SWEEP_SPLITS:
        for n in SWEEP_BLOCKS:
            cells.append(_time_calls(lambda s=s, n=n: paged_decode_attention(
                q, kn, vn, kc, vc, table, lens, ps, s, n), iters))
    return cells


def _plain_context(table, lens, ps, dtype):
    """The reference path's context for a decode step (built once per forward, not per layer)."""
    from engine.models.model import AttentionContext
    b, pages = table.shape
    kv_pos = torch.arange(pages * ps, device=table.device)
    read_loc = table[:, kv_pos // ps] * ps + kv_pos % ps
    write_loc = table.gather(1, ((lens - 1) // ps)[:, None])[:, 0] * ps + (lens - 1) % ps
    mask = torch.zeros(b, 1, 1, pages * ps, dtype=dtype, device=table.device)
    mask.masked_fill_(kv_pos[None, None, None, :] >= lens[:, None, None, None], float("-inf"))
    return AttentionContext(write_loc, read_loc, mask)


def _time_calls(fn, iters: int, calls: int = 24) -> float:
    """Microseconds per call: a graph of ``calls`` back-to-back calls, replayed ``iters`` times."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters / calls
