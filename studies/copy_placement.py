"""Where the result copy runs, measured: the gap between decode forwards and GPU busy.

    python -m studies copy-placement [--models bundled --batches 16]

The same overlap run with the copy on a copy stream of its own (the default), on the engine stream
and on the scheduler stream (``engine/devices/cuda.py`` says what each does to the GPU): the
steady window's figures, median [min-max] over ``--repeats``.
"""

from __future__ import annotations

from dataclasses import replace

from bench import cli
from bench.decode import fresh
from engine.config import COPY_PLACEMENTS, LoopSpec
from engine.workloads import Workload
from record.schema import Loop


def run(device: str, models: list[str], batches: list[int], graph: bool, extra: int,
        work: Workload, repeats: int) -> int:
    from engine import Engine

    print(f"result copy placement: {device}, {'CUDA graphs' if graph else 'eager'}, overlap loop, "
          f"{work.prompt_tokens}-token prompts, {work.max_new_tokens} new tokens, extra CPU "
          f"{extra} us, {repeats} runs each; median [min-max] over the steady window\n")
    print("| model | B | copy on | gap between forwards us | busy, all streams | busy, engine "
          "stream | decode step us |\n|---|---|---|---|---|---|---|")
    for model in models:
        for batch in batches:
            for placement in COPY_PLACEMENTS:
                cfg = work.engine_config(model=model, device=device, cuda_graph=graph,
                                         max_batch_size=batch, result_copy_stream=placement)
                with Engine(cfg) as eng:
                    batch_work = replace(work, requests=batch)
                    prompts, params = batch_work.prompts(eng), batch_work.sampling()
                    eng.generate(prompts, params, LoopSpec(Loop.OVERLAP, 1, extra))   # warm
                    runs = [fresh(eng).generate(prompts, params,
                                                LoopSpec(Loop.OVERLAP, 1, extra)).metrics
                            for _ in range(repeats)]
                gap = [m["decode_gap_us_p50"] for m in runs]
                both = [100 * m["steady_busy_frac"] for m in runs]
                engine = [100 * m["steady_engine_busy_frac"] for m in runs]
                step = [m["steady_step_us"] for m in runs]
                print(f"| {model} | {batch} | {placement} stream | {cli.spread(gap)} | "
                      f"{cli.spread(both)}% | {cli.spread(engine)}% | "
                      f"{cli.spread(step, '{:.0f}')} |", flush=True)
    return 0


def main(argv: list[str]) -> int:
    p = cli.parser("python -m studies copy-placement", __doc__)
    cli.add_device(p)
    p.add_argument("--models", nargs="+", default=["bundled"])
    p.add_argument("--batches", nargs="+", type=int, default=[16])
    p.add_argument("--eager", action="store_true", help="no CUDA graphs (on CPU: always)")
    p.add_argument("--extra-cpu-us", type=int, default=0, help="extra scheduler work a step")
    cli.add_work(p)
    args = p.parse_args(argv)
    cuda = cli.device_of(args) == "cuda"
    return run(args.device, args.models, args.batches, cuda and not args.eager,
               args.extra_cpu_us, cli.workload(args), args.repeats)
