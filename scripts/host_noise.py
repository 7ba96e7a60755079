"""How much the scheduler thread's own work per decode step moves with where it runs (a probe).

    python scripts/host_noise.py            # on a machine with CUDA

The page's first click on a GPU sizes its extra CPU work from one measured serial run; if the
host's speed for that thread changes between runs (a busy hyperthread sibling, another process
on its core), no fixed setting gives both "busy" and "speedup" every time. This prints, for the
page's workload (bundled model, B = 16, CUDA graphs, serial loop), the scheduler's work per
step (T_cpu) and the forward (T_fwd), median [min-max] over runs, with the thread pinned to one
core and: nothing else, a busy process on that core's hyperthread sibling, one on another
physical core; then what one CUDA event record costs the host.

    python scripts/host_noise.py --sequence  # does a short serial probe predict the next run?

``--sequence``: ten pairs, unpinned as the page runs: a 16-step serial probe, then the page's
serial run right after it; each pair's T_cpu. If the host's speed holds for the second or so a
click takes, a probe made just before a click sizes that click's extra CPU work for it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def siblings(cpu: int) -> list[int]:
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    out = []
    for part in path.read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def spin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        pass


def cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} [{min(xs):.0f}-{max(xs):.0f}]"


def main() -> None:
    import torch

    from engine import Engine
    from engine.config import EngineConfig, SamplingParams
    from engine.workloads import make_prompts
    from record.recorder import Timeline

    cpus = sorted(os.sched_getaffinity(0))
    print("cpus", cpus, "siblings of", cpus[0], siblings(cpus[0]), "of", cpus[1],
          siblings(cpus[1]))
    home = cpus[1]
    sib = [c for c in siblings(home) if c != home]
    other = next((c for c in cpus if c not in siblings(home) and c != cpus[0]), None)
    cfg = EngineConfig(model="bundled", device="cuda", cuda_graph=True, max_batch_size=16)
    eng = Engine(cfg)
    prompts = make_prompts(eng.tokenizer, 16, 32, 0, eng.spec.vocab_size)
    params = SamplingParams(max_new_tokens=96, ignore_eos=True)
    for _ in range(3):
        eng.generate(prompts, params, overlap=False, timeline=Timeline())
    if "--sequence" in sys.argv:
        short = SamplingParams(max_new_tokens=16, ignore_eos=True)
        for i in range(10):
            eng.clear_prefix_cache()
            probe = eng.generate(prompts, short, overlap=False, timeline=Timeline()).metrics
            eng.clear_prefix_cache()
            run = eng.generate(prompts, params, overlap=False, timeline=Timeline()).metrics
            print(f"pair {i}: probe T_cpu {probe['t_cpu_us']:.0f} us (T_fwd "
                  f"{probe['t_fwd_us']:.0f}), run T_cpu {run['t_cpu_us']:.0f} us (T_fwd "
                  f"{run['t_fwd_us']:.0f})", flush=True)
        return
    cases = [("pinned, alone", None), ("sibling busy", sib[0] if sib else None),
             ("other core busy", other)]
    for name, busy in cases:
        if name == "sibling busy" and not sib:
            print("no hyperthread sibling")
            continue
        os.sched_setaffinity(0, {home})
        proc = None
        if busy is not None:
            proc = mp.get_context("spawn").Process(target=spin, args=(busy,), daemon=True)
            proc.start()
            time.sleep(0.5)
        cpu, fwd = [], []
        for _ in range(6):
            eng.clear_prefix_cache()
            r = eng.generate(prompts, params, overlap=False, timeline=Timeline())
            cpu.append(r.metrics["t_cpu_us"])
            fwd.append(r.metrics["t_fwd_us"])
        if proc is not None:
            proc.kill()
        print(f"{name:>16} (thread on {home}, busy {busy}): T_cpu {cell(cpu)} us, "
              f"T_fwd {cell(fwd)} us")
    os.sched_setaffinity(0, set(cpus))

    s = torch.cuda.Stream()
    n = 20000
    for timing in (False, True):
        ev = torch.cuda.Event(enable_timing=timing)
        for direct in (False, True):
            rec = torch._C._CudaEventBase.record if direct else torch.cuda.Event.record
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                rec(ev, s)
            dt = (time.perf_counter() - t0) / n * 1e6
            torch.cuda.synchronize()
            print(f"event record, timing={timing}, {'C method' if direct else 'Event.record'}:"
                  f" {dt:.2f} us")
    ev = torch.cuda.Event(enable_timing=True)
    ev.record(s)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        ev.query()
    print(f"event query (done): {(time.perf_counter() - t0) / n * 1e6:.2f} us")
    x = torch.zeros(16, dtype=torch.int64, device="cuda")
    h = torch.zeros(16, dtype=torch.int64, pin_memory=True)
    torch.cuda.set_stream(s)
    t0 = time.perf_counter()
    for _ in range(n):
        h.copy_(x, non_blocking=True)
    print(f"D2H copy launch: {(time.perf_counter() - t0) / n * 1e6:.2f} us")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
