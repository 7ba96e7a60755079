"""What each operation between two CUDA-graph forwards costs the GPU (a probe for the gap).

    python scripts/gap_ops.py            # on a machine with CUDA

The overlap loop's engine stream runs, between forward n and forward n+1: the result copy
(DtoH), the copy's done event, the recorder's copy-end event, the wait for upload n+1, the
recorder's next start event. This replays one CUDA graph of about 250 µs back to back (the host
enqueues far ahead, so only the GPU's own cost of each operation shows) with subsets of those
operations between replays, and prints the median time from the event after one replay to the
event before the next: the gap those operations make.
"""

from __future__ import annotations

import statistics

import torch


def main() -> None:
    dev = torch.device("cuda")
    a = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
    work = [a]
    stream = torch.cuda.Stream()
    side = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    out = torch.zeros(16, dtype=torch.int64, device=dev)
    host = [torch.zeros(16, dtype=torch.int64, pin_memory=True) for _ in range(2)]
    for _ in range(3):
        y = a
        for _ in range(60):
            y = y @ a
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        y = a
        for _ in range(60):
            y = torch.tanh(y @ a)
        out.copy_(y[0, :16].to(torch.int64))
    del work
    ready = torch.cuda.Event()
    done = [torch.cuda.Event() for _ in range(2)]
    timed = torch.cuda.Event(enable_timing=True)
    side_ready = torch.cuda.Event()
    variants = {
        "nothing": (),
        "event (plain)": ("done",),
        "event (timing)": ("timed",),
        "DtoH copy": ("copy",),
        "wait, event done": ("wait",),
        "copy + done": ("copy", "done"),
        "copy + done + timing": ("copy", "done", "timed"),
        "copy + done + timing + wait (today)": ("copy", "done", "timed", "wait"),
        "copy + done + wait": ("copy", "done", "wait"),
    }
    n = 400
    for name, ops in variants.items():
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(n)]
        side_ready.record(side)
        torch.cuda.synchronize()
        for i in range(n):
            graph.replay()
            pairs[i][0].record(stream)
            for op in ops:
                if op == "copy":
                    host[i % 2].copy_(out, non_blocking=True)
                elif op == "done":
                    done[i % 2].record(stream)
                elif op == "timed":
                    timed.record(stream)
                elif op == "wait":
                    stream.wait_event(side_ready)
            pairs[i][1].record(stream)
        torch.cuda.synchronize()
        gaps = [s.elapsed_time(e) * 1000 for s, e in pairs[50:-50]]
        print(f"{name:>38}: gap {statistics.median(gaps):5.2f} us "
              f"[{min(gaps):.2f}-{max(gaps):.2f}]", flush=True)
    # The host side of reading an event's time later (what harvesting a ring event would cost).
    import time
    ref = torch.cuda.Event(enable_timing=True)
    ref.record(stream)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20000):
        ref.elapsed_time(pairs[0][1])
    print(f"elapsed_time on the host: {(time.perf_counter() - t0) / 20000 * 1e6:.2f} us")
    t0 = time.perf_counter()
    for _ in range(20000):
        ready.query()
    print(f"query (done) on the host: {(time.perf_counter() - t0) / 20000 * 1e6:.2f} us")
    t0 = time.perf_counter()
    for _ in range(20000):
        stream.wait_event(side_ready)
    torch.cuda.synchronize()
    print(f"wait_event on the host: {(time.perf_counter() - t0) / 20000 * 1e6:.2f} us")


if __name__ == "__main__":
    main()
