"""The weight-read floor: what no decode step can beat.

A decode step reads every parameter at least once. At the device-to-device copy bandwidth
measured in the same run (bytes read plus bytes written over the time of a large copy), that read
takes ``weight_bytes / bandwidth``: the floor a forward-only step is held against (``python -m
bench loops`` prints the ratio; the studies of the forward use the same two measures).
"""

from __future__ import annotations

import statistics
import time

import torch


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
