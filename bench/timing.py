"""Timing a decode step on the device, and the weight-read floor it can never beat. ``ms_per_call``
puts CUDA events around rounds of back-to-back calls; the floor is every parameter read once at
the copy bandwidth measured in the same run (``weight_bytes / bandwidth``)."""

from __future__ import annotations

import statistics
import time

import torch


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


def copy_bandwidth_gbs(device: str = "cuda", mib: int = 1024, iters: int = 20) -> float:
    """Device-to-device copy bandwidth, GB/s, counting bytes read plus bytes written."""
    src = torch.empty(mib << 20, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    src.random_(0, 255)
    for _ in range(3):
        dst.copy_(src)
    if device == "cuda":
        seconds = statistics.median(ms_per_call(lambda: dst.copy_(src), 1, iters)) / 1e3
    else:
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dst.copy_(src)
            times.append(time.perf_counter() - t0)
        seconds = statistics.median(times)
    return 2 * src.numel() / seconds / 1e9


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of every distinct parameter (tied embeddings once): what one step must read."""
    return sum(p.numel() * p.element_size() for p in model.parameters())   # dedups shared ones
