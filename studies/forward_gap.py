"""The loop's decode forward against its graph replayed alone, and its kernels by kind (CUDA).

    python -m studies forward-gap --models qwen2.5-0.5b-shape llama-3.1-8b-shape --batches 1 64

A real decode step (its metadata taken from an overlap ``generate``), timed with one ingredient of
the launch path added per line: the replay alone, the metadata copy, ``upload`` and ``forward``,
the recorder's events, the overlap loop's own figures. Then the replay's kernels by kind beside the
weight-read floor: what their sum leaves of the replay is the time between kernels.
"""

from __future__ import annotations

import statistics
import time

import torch

from bench import cli


def _decode_meta(eng, prompts, params, loop):
    """A decode step's metadata from the middle of a real run (taken at ``upload``)."""
    from record.schema import Phase
    dev, metas = eng.device, []
    upload = dev.upload

    def spy(step_metas):
        if step_metas[0].kind == Phase.DECODE:
            metas.append(step_metas[0])
        return upload(step_metas)

    dev.upload = spy
    try:
        eng.generate(prompts, params, loop)
    finally:
        del dev.upload                   # the bound method again
    return metas[len(metas) // 2]


def run_shape(model: str, batches: list[int], prompt_len: int, new_tokens: int, iters: int,
              repeats: int, bandwidth_gbs: float) -> None:
    """One engine for the shape (room for the largest batch), every batch size on it."""
    from engine import Engine
    from engine.config import EngineConfig, SamplingParams
    from studies.peers.work import PeerWork, prompts_for

    work = PeerWork(models=(model,), batches=tuple(batches), prompt_len=prompt_len,
                    new_tokens=new_tokens)
    cfg = EngineConfig(model=model, device="cuda", cuda_graph=True, max_batch_size=max(batches),
                       max_seq_len=work.max_seq_len)
    params = SamplingParams(max_new_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    with Engine(cfg) as eng:
        for batch in batches:
            _one_batch(eng, model, batch, prompts_for(work, model, batch), params, iters,
                       repeats, bandwidth_gbs)


def _one_batch(eng, model, batch, prompts, params, iters, repeats, bandwidth_gbs):
    from bench.timing import ms_per_call, weight_bytes
    from engine.config import LoopSpec
    from engine.scheduler.request import COL_START
    from record.recorder import Timeline
    from record.schema import Loop
    overlap = LoopSpec(Loop.OVERLAP)
    dev = eng.device
    meta = _decode_meta(eng, prompts, params, overlap)
    graph = dev.graphs.lookup(meta)
    ints = torch.from_numpy(meta.ints).to("cuda")
    floats = torch.from_numpy(meta.floats).to("cuda")
    eng_stream = dev.engine_stream
    torch.cuda.set_stream(eng_stream)
    rows: list[tuple[str, list[float]]] = []
    rows.append(("graph replay alone", ms_per_call(graph.graph.replay, iters, repeats,
                                                   eng_stream)))
    rows.append(("+ metadata copy into the graph's inputs",
                 ms_per_call(lambda: graph.replay(ints, floats, keep=False), iters, repeats,
                             eng_stream)))

    def verbs():
        dev.forward(dev.upload([meta])[0])

    torch.cuda.set_stream(torch.cuda.default_stream())
    dev.begin_run(Timeline(enabled=False))
    rows.append(("+ upload on the scheduler stream, wait, result copy",
                 ms_per_call(verbs, iters, repeats, eng_stream)))
    timeline = Timeline()
    dev.begin_run(timeline)
    rows.append(("+ the recorder's events", ms_per_call(verbs, iters, repeats, eng_stream)))
    timeline.resolve()
    dev.begin_run(Timeline(enabled=False))
    torch.cuda.set_stream(torch.cuda.default_stream())
    runs = [eng.generate(prompts, params, overlap) for _ in range(repeats)]
    loop_fwd = [r.metrics["t_fwd_us"] / 1e3 for r in runs]
    loop_step = [r.metrics["steady_step_us"] / 1e3 for r in runs]
    floor_ms = weight_bytes(dev.runner.model) / (bandwidth_gbs * 1e9) * 1e3
    keys = int(meta.ints[0, COL_START]) + 1
    print(f"\n### {model}, B = {batch} ({dev.label}), a decode step at {keys} keys a row"
          f"\n\n| what runs | ms per step, median [min-max] | vs the graph alone |\n"
          f"|---|---|---|")
    base = statistics.median(rows[0][1])
    for name, ms in rows + [("the overlap loop's forward span", loop_fwd),
                            ("the overlap loop's decode step", loop_step)]:
        med = statistics.median(ms)
        print(f"| {name} | {med:.3f} [{min(ms):.3f}-{max(ms):.3f}] | "
              f"{(med - base) * 1e3:+.1f} µs |")
    torch.cuda.set_stream(eng_stream)
    kernel_table(lambda: graph.replay(ints, floats, keep=False), base, floor_ms)
    torch.cuda.set_stream(torch.cuda.default_stream())


def profiled_kernels(fn, calls: int) -> list[tuple[str, float]]:
    """(name, µs) of every GPU kernel ``calls`` calls of ``fn`` ran, after one unprofiled call."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [(e.name, e.device_time) for e in prof.events() if e.device_type.name == "CUDA"]


def kernel_table(replay, step_ms: float, floor_ms: float, steps: int = 20) -> None:
    """The kernels of ``steps`` replays by kind (``studies.kernel_account``, the same account an
    SGLang trace gets from ``python -m studies trace-kernels``) and the costliest by name."""
    from studies.kernel_account import account, format_account
    acc = account(profiled_kernels(replay, steps), steps, step_ms * 1e3)
    print(f"\nKernels of one replay (torch.profiler over {steps}): "
          + format_account(acc, floor_ms * 1e3))


def run(models: list[str], batches: list[int], prompt_len: int, new_tokens: int, iters: int,
        repeats: int) -> int:
    from bench.timing import copy_bandwidth_gbs
    if not torch.cuda.is_available():
        print("python -m studies forward-gap needs a CUDA GPU")
        return 2
    bw = copy_bandwidth_gbs()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; copy bandwidth "
          f"{bw:.0f} GB/s (read + write, measured now); {repeats} rounds of {iters} steps")
    t0 = time.perf_counter()
    for model in models:
        run_shape(model, batches, prompt_len, new_tokens, iters, repeats, bw)
        torch.cuda.empty_cache()
    print(f"\ndone in {time.perf_counter() - t0:.0f} s")
    return 0


def main(argv: list[str]) -> int:
    p = cli.parser("python -m studies forward-gap", __doc__)
    p.add_argument("--models", nargs="+", default=["qwen2.5-0.5b-shape"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    p.add_argument("--iters", type=int, default=50, help="back-to-back steps a round")
    cli.add_work(p)
    args = p.parse_args(argv)
    return run(args.models, args.batches, args.prompt_len, args.new_tokens, args.iters,
               args.repeats)
