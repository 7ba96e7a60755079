"""Where the CPU's time per forward goes on CUDA: the launch path, primitive by primitive.

    python -m studies launch-cost --model bundled --batch 8

Times the device verbs as the engine calls them (``upload``, ``forward``; recording off and on),
then each primitive inside them alone, in host time per call."""

from __future__ import annotations

import statistics
import time
from functools import partial

import numpy as np
import torch

from bench import cli


def _per_call_us(fn, n: int = 2, rounds: int = 200, between=None) -> float:
    """Rounds of ``n`` calls from an idle GPU, so no ring buffer's guard waits for the GPU;
    ``between`` runs between rounds, untimed (the recorder reading its spans)."""
    out = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        if between is not None:
            between()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        out.append((time.perf_counter_ns() - t0) / n / 1e3)
    torch.cuda.synchronize()
    return statistics.median(out)


def _lean_step(dev, graph, meta):
    """The same step with the costly calls taken out (no stream context managers, no device-side
    copy, no ``out.clone()``, events made once): what the launch path could cost. A prototype."""
    sched, eng = dev.scheduler_stream, dev.engine_stream
    pinned_ints = torch.empty(graph.ints.shape, dtype=torch.int64, pin_memory=True)
    pinned_np = pinned_ints.numpy()
    host_out = torch.empty(graph.out.shape, dtype=graph.out.dtype, pin_memory=True)
    uploaded, forwarded, copied = torch.cuda.Event(), torch.cuda.Event(), torch.cuda.Event()
    rows = meta.ints.shape[0]

    def step():
        pinned_np[:rows] = meta.ints                                  # host: metadata staging
        torch.cuda.set_stream(sched)
        graph.ints.copy_(pinned_ints, non_blocking=True)              # H2D into the graph input
        uploaded.record(sched)
        torch.cuda.set_stream(eng)
        eng.wait_event(uploaded)                                      # metadata -> forward
        graph.graph.replay()
        forwarded.record(eng)
        torch.cuda.set_stream(sched)
        sched.wait_event(forwarded)
        host_out.copy_(graph.out, non_blocking=True)                  # D2H of the tokens
        copied.record(sched)
    return step


def _enter_exit(stream) -> None:
    with torch.cuda.stream(stream):
        pass


def _decode_meta(eng, batch: int, step: int = 0):
    from engine.scheduler.request import COL_LEN, COL_SLOT, COL_START, NUM_INT_COLS, StepMeta
    from record.schema import Phase
    cfg = eng.config
    ints = np.zeros((batch, NUM_INT_COLS + cfg.pages_per_seq), dtype=np.int64)
    ints[:, COL_SLOT] = np.arange(batch)
    ints[:, COL_START], ints[:, COL_LEN] = 40, 1
    ints[:, NUM_INT_COLS:] = np.arange(batch)[:, None] * cfg.pages_per_seq + np.arange(
        cfg.pages_per_seq)[None, :]
    floats = np.ones((batch, 2), dtype=np.float32)
    return StepMeta(step, Phase.DECODE, batch, 1, cfg.pages_per_seq, True, ints, floats,
                    np.zeros((3, 0), dtype=np.int64), tuple(range(batch)))


def run(model: str, batch: int) -> int:
    from engine import Engine, EngineConfig
    from record.recorder import Timeline

    eng = Engine(EngineConfig(model=model, device="cuda", cuda_graph=True, max_batch_size=batch,
                              max_seq_len=256, record_timeline=False))
    dev, meta = eng.device, _decode_meta(eng, batch)
    rows = {}
    for recording in (False, True):
        dev.timeline = Timeline(enabled=recording)
        if recording:
            dev.begin_run(dev.timeline)
        tag = "spans on" if recording else "spans off"
        read = dev.timeline.resolve        # spans read between rounds: their events are reused
        rows[f"upload ({tag})"] = _per_call_us(lambda: dev.upload([meta]), between=read)
        rows[f"forward ({tag})"] = _per_call_us(partial(dev.forward, dev.upload([meta])[0]),
                                                between=read)
        rows[f"upload + forward ({tag})"] = _per_call_us(lambda: dev.forward(dev.upload([meta])[0]),
                                                         between=read)
    profile_on = _profile(lambda: dev.forward(dev.upload([meta])[0]))    # still recording
    dev.timeline.resolve()
    dev.timeline = Timeline(enabled=False)
    profile = _profile(lambda: dev.forward(dev.upload([meta])[0]))

    graph = dev.graphs.lookup(meta)
    ints_d = torch.from_numpy(meta.ints).cuda()
    floats_d = torch.from_numpy(meta.floats).cuda()
    pinned = torch.zeros(meta.ints.shape, dtype=torch.int64, pin_memory=True)
    host = torch.zeros(batch, dtype=torch.int64, pin_memory=True)
    s1, s2 = dev.scheduler_stream, dev.engine_stream
    ev = torch.cuda.Event()
    prims = {
        "graph.replay()": lambda: graph.graph.replay(),
        "_Graph.replay (ints copy + replay + clone)": lambda: graph.replay(ints_d, floats_d),
        "static ints copy_ (D2D, small)": lambda: graph.ints.copy_(ints_d),
        "out.clone()": lambda: graph.out.clone(),
        "torch.cuda.Event()": lambda: torch.cuda.Event(),
        "torch.cuda.Event(enable_timing=True)": lambda: torch.cuda.Event(enable_timing=True),
        "event.record(stream)": lambda: ev.record(s1),
        "_CudaEventBase.record(event, stream)": lambda: torch._C._CudaEventBase.record(ev, s1),
        "with torch.cuda.stream(s)": lambda: _enter_exit(s1),
        "stream.wait_stream(other)": lambda: s2.wait_stream(s1),
        "stream.wait_event(event)": lambda: s1.wait_event(ev),
        "H2D pinned .to(cuda, non_blocking)": lambda: pinned.to("cuda", non_blocking=True),
        "D2H host.copy_(dev, non_blocking)": lambda: host.copy_(graph.out, non_blocking=True),
        "np.concatenate into pinned": lambda: np.concatenate([meta.ints], out=pinned.numpy()),
        "torch.cuda.set_stream(s)": lambda: torch.cuda.set_stream(s1),
    }
    for name, fn in prims.items():
        rows[name] = _per_call_us(fn)
    torch.cuda.set_stream(torch.cuda.default_stream())
    rows["lean upload + forward (prototype, below)"] = _per_call_us(_lean_step(dev, graph, meta))
    torch.cuda.set_stream(torch.cuda.default_stream())
    torch.cuda.synchronize()
    print(f"\ndevice: {torch.cuda.get_device_name()}, torch {torch.__version__}; model {model}, "
          f"B={batch}, CUDA graphs; host microseconds per call (median of 200 rounds of 2)\n")
    print("| what | us per call |\n|---|---|")
    for name, us in rows.items():
        print(f"| {name} | {us:.1f} |")
    print("\nupload + forward (spans off) under cProfile, 400 calls, by own time:\n" + profile)
    print("\nupload + forward (spans on) under cProfile, 400 calls, by own time:\n" + profile_on)
    eng.close()
    return 0


def _profile(fn, calls: int = 400, top: int = 14) -> str:
    """Where the host time of ``fn`` goes, function by function (cProfile, own time)."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    for _ in range(calls // 2):
        torch.cuda.synchronize()
        profiler.enable()
        fn()
        fn()
        profiler.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip())


def main(argv: list[str]) -> int:
    p = cli.parser("python -m studies launch-cost", __doc__)
    p.add_argument("--model", default="bundled")
    p.add_argument("--batch", type=int, default=8, help="requests decoded together")
    args = p.parse_args(argv)
    return run(args.model, args.batch)
