"""What the recorder's ways of stamping GPU time cost, and what a copy stream does to the gap.

    python scripts/recorder_probe.py            # on a machine with CUDA (needs Triton)

Three questions, each answered by a measurement (medians over thousands of calls):

1. The host cost of one timing event: ``torch.cuda.Event.record(stream)`` (the Python wrapper),
   the C method under it, a plain (non-timing) event, and ``elapsed_time`` read later. In a
   serial loop every one of these microseconds is GPU idle time.
2. A stamp written *inside* a CUDA graph: a one-thread Triton kernel that stores the GPU's
   ``%globaltimer`` (ns) into a device buffer. It costs the host nothing per step (the replay
   launches it); its GPU cost, its resolution and how well it lines up with CUDA events are
   measured here.
3. The gap between two graph replays when the result copy runs on a stream of its own
   (vLLM's placement) reading a ring row the graph wrote at an index held in device memory,
   against the copy on the engine stream (today's default).
4. A serial step's chain, as the normal loop runs it (``--serial``): upload on one stream,
   graph on a second after a wait, copy on a third after a wait, the host blocking on the
   copy's event; the wall time per step with the recorder's timing events at each of their
   places, one place at a time, so their cost in a serial step can be told apart.
"""

from __future__ import annotations

import statistics
import time

import torch


def _per_call_us(fn, n: int = 20000) -> float:
    for _ in range(200):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def host_costs(stream: torch.cuda.Stream) -> None:
    timed = torch.cuda.Event(enable_timing=True)
    plain = torch.cuda.Event()
    raw_record = torch._C._CudaEventBase.record
    print("1. host cost per call (us):")
    print(f"   Event(enable_timing).record(stream): {_per_call_us(lambda: timed.record(stream)):.2f}")
    torch.cuda.synchronize()
    print(f"   _CudaEventBase.record(event, stream): {_per_call_us(lambda: raw_record(timed, stream)):.2f}")
    torch.cuda.synchronize()
    print(f"   plain Event.record(stream):          {_per_call_us(lambda: plain.record(stream)):.2f}")
    torch.cuda.synchronize()
    ref = torch.cuda.Event(enable_timing=True)
    ref.record(stream)
    timed.record(stream)
    torch.cuda.synchronize()
    print(f"   elapsed_time (read later):           {_per_call_us(lambda: ref.elapsed_time(timed)):.2f}")
    print(f"   time.perf_counter_ns():              {_per_call_us(time.perf_counter_ns):.2f}")


def stamp_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def _stamp(out_ptr, idx_ptr, col: tl.constexpr):
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                      is_pure=False, pack=1)
        i = tl.load(idx_ptr)
        tl.store(out_ptr + i * 2 + col, t)

    def stamp(out: torch.Tensor, idx: torch.Tensor, col: int) -> None:
        _stamp[(1,)](out, idx, col)

    return stamp


def graph_stamps(stream: torch.cuda.Stream) -> None:
    print("2. stamps written inside a CUDA graph (Triton %globaltimer):")
    stamp = stamp_kernel()
    dev = torch.device("cuda")
    a = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
    stamps = torch.zeros(64, 2, dtype=torch.int64, device=dev)
    idx = torch.zeros(1, dtype=torch.int64, device=dev)

    def body(with_stamps: bool):
        if with_stamps:
            stamp(stamps, idx, 0)
        y = a
        for _ in range(60):
            y = torch.tanh(y @ a)
        if with_stamps:
            stamp(stamps, idx, 1)
        return y

    graphs = {}
    for with_stamps in (False, True):
        for _ in range(3):
            body(with_stamps)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            body(with_stamps)
        graphs[with_stamps] = g
    torch.cuda.synchronize()
    n = 300
    for with_stamps, g in graphs.items():
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(n)]
        torch.cuda.set_stream(stream)
        for i in range(n):
            idx.fill_(i % 64)
            ev[i][0].record(stream)
            g.replay()
            ev[i][1].record(stream)
        torch.cuda.synchronize()
        d = [s.elapsed_time(e) * 1000 for s, e in ev[20:]]
        print(f"   graph {'with' if with_stamps else 'without'} stamps: "
              f"{statistics.median(d):.2f} us [{min(d):.2f}-{max(d):.2f}]")
    # Resolution: back-to-back stamps in one kernel-less sequence of tiny graphs.
    diffs = []
    for i in range(64):
        idx.fill_(i)
        stamp(stamps, idx, 0)
        stamp(stamps, idx, 1)
    torch.cuda.synchronize()
    s = stamps.cpu()
    diffs = [int(s[i, 1] - s[i, 0]) for i in range(64)]
    lows = sorted({int(v) % 1000 for v in s[:, 0].tolist()})[:8]
    print(f"   two eager stamps back to back: {statistics.median(diffs)} ns "
          f"[{min(diffs)}-{max(diffs)}]; stamp values mod 1000 ns: {lows}")
    # Line-up with events: event, stamp, event; where does the stamp fall between them?
    ref = torch.cuda.Event(enable_timing=True)
    ref.record(stream)
    torch.cuda.synchronize()
    idx.fill_(0)
    stamp(stamps, idx, 0)
    torch.cuda.synchronize()
    base = int(stamps[0, 0])
    offs = []
    for i in range(1, 40):
        e = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(20000)
        e.record(stream)
        idx.fill_(i % 64)
        stamp(stamps, idx, 0)
        torch.cuda.synchronize()
        offs.append((int(stamps[i % 64, 0]) - base) / 1000 - ref.elapsed_time(e) * 1000)
    print(f"   stamp after an event, relative to the first pair (us): median "
          f"{statistics.median(offs):.2f} [{min(offs):.2f}-{max(offs):.2f}] (drift = spread)")


def _busy_graph(stream: torch.cuda.Stream, a: torch.Tensor, layers: int, tail) -> torch.cuda.CUDAGraph:
    """A forward's stand-in: ``layers`` bf16 matrix products captured as one CUDA graph on
    ``stream``, ending in ``tail(y)`` (the sampled tokens' writes)."""
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        y = a
        for _ in range(layers):
            y = torch.tanh(y @ a)
        tail(y)
    return g


def copy_stream_gap(stream: torch.cuda.Stream) -> None:
    print("3. gap between graph replays (us), by result-copy placement:")
    dev = torch.device("cuda")
    a = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
    rows, ring_n = 16, 4
    ring = torch.zeros(ring_n * rows + rows, dtype=torch.int64, device=dev)
    out_index = torch.zeros(rows, dtype=torch.int64, device=dev)
    static_out = torch.zeros(rows, dtype=torch.int64, device=dev)
    host = [torch.zeros(rows, dtype=torch.int64, pin_memory=True) for _ in range(ring_n)]

    def sample(y: torch.Tensor) -> None:
        tok = y[0, :rows].to(torch.int64)
        static_out.copy_(tok)
        ring[out_index] = tok                 # the ring row this step's metadata names

    g = _busy_graph(stream, a, 60, sample)
    copy, sched = torch.cuda.Stream(), torch.cuda.Stream()
    ready = [torch.cuda.Event() for _ in range(ring_n)]
    fwd_done = [torch.cuda.Event() for _ in range(ring_n)]
    copied = [torch.cuda.Event() for _ in range(ring_n)]
    idx_host = [torch.arange(rows, dtype=torch.int64).add_(i * rows).pin_memory()
                for i in range(ring_n)]
    idx_dev = [torch.zeros(rows, dtype=torch.int64, device=dev) for _ in range(ring_n)]
    n = 400
    for placement in ("engine", "copy stream"):
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(n)]
        torch.cuda.synchronize()
        for i in range(n):
            j = i % ring_n
            copied[j].synchronize()                  # host buffer j and ring row j reusable
            torch.cuda.set_stream(sched)            # stands in for the metadata upload
            sched.wait_event(fwd_done[j])           # the forward that read slot j last is done
            idx_dev[j].copy_(idx_host[j], non_blocking=True)
            ready[j].record(sched)
            torch.cuda.set_stream(stream)
            stream.wait_event(ready[j])
            pairs[i][0].record(stream)
            out_index.copy_(idx_dev[j])             # into the graph's static input (as replay)
            g.replay()
            pairs[i][1].record(stream)
            fwd_done[j].record(stream)
            if placement == "engine":
                host[j].copy_(static_out, non_blocking=True)
                copied[j].record(stream)
            else:
                torch.cuda.set_stream(copy)
                copy.wait_event(fwd_done[j])
                host[j].copy_(ring[j * rows:(j + 1) * rows], non_blocking=True)
                copied[j].record(copy)
        torch.cuda.synchronize()
        gaps = [pairs[i][1].elapsed_time(pairs[i + 1][0]) * 1000 for i in range(50, n - 50)]
        print(f"   copy on the {placement:>11}: gap {statistics.median(gaps):5.2f} us "
              f"[{min(gaps):.2f}-{max(gaps):.2f}]", flush=True)
    torch.cuda.set_stream(stream)


def serial_chain() -> None:
    print("4. a serial step's chain, host wall time per step (us), timing events placed where")
    dev = torch.device("cuda")
    a = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
    sched, engine, copy = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    meta_host = torch.zeros(512, dtype=torch.int64).pin_memory()
    meta_dev = torch.zeros(512, dtype=torch.int64, device=dev)
    static = torch.zeros(512, dtype=torch.int64, device=dev)
    out = torch.zeros(16, dtype=torch.int64, device=dev)
    host = torch.zeros(16, dtype=torch.int64).pin_memory()
    torch.cuda.set_stream(engine)
    g = _busy_graph(engine, a, 15, lambda y: out.copy_(y[0, :16].to(torch.int64) + static[:16]))
    ready, fwd_done, copy_done = torch.cuda.Event(), torch.cuda.Event(), torch.cuda.Event()
    pool = [torch.cuda.Event(enable_timing=True) for _ in range(8)]
    places = ("upload start", "upload end", "forward start", "forward end (copy waits on it)",
              "copy end")
    variants = {"none": (), **{p: (p,) for p in places}, "all five": places}
    n, results = 300, {}
    for _ in range(3):                                   # rounds, interleaved
        for name, where in variants.items():
            times = []
            for _i in range(n):
                t0 = time.perf_counter()
                torch.cuda.set_stream(sched)
                if "upload start" in where:
                    pool[0].record(sched)
                meta_dev.copy_(meta_host, non_blocking=True)
                ready.record(sched)
                if "upload end" in where:
                    pool[1].record(sched)
                torch.cuda.set_stream(engine)
                engine.wait_event(ready)
                if "forward start" in where:
                    pool[2].record(engine)
                static.copy_(meta_dev)
                g.replay()
                end = pool[3] if "forward end (copy waits on it)" in where else fwd_done
                end.record(engine)
                torch.cuda.set_stream(copy)
                copy.wait_event(end)
                host.copy_(out, non_blocking=True)
                copy_done.record(copy)
                if "copy end" in where:
                    pool[4].record(copy)
                copy_done.synchronize()
                times.append((time.perf_counter() - t0) * 1e6)
            results.setdefault(name, []).append(statistics.median(times[30:]))
    base = statistics.median(results["none"])
    for name, meds in results.items():
        med = statistics.median(meds)
        print(f"   {name:>32}: {med:7.1f} us a step ({med - base:+.1f}) "
              f"[rounds {min(meds):.1f}-{max(meds):.1f}]")
    torch.cuda.set_stream(torch.cuda.default_stream())


def main() -> None:
    import sys
    if "--serial" in sys.argv:
        serial_chain()
        return
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    host_costs(stream)
    graph_stamps(stream)
    copy_stream_gap(stream)
    serial_chain()


if __name__ == "__main__":
    main()
