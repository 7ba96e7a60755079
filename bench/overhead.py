"""The span recorder's own cost: the same workload with recording on and off, interleaved.

    python -m bench recorder [--device cuda --models bundled qwen2.5-0.5b-shape --batches 1 64]

Runs alternate off, on, off, on (drift hits both alike); per model, batch and loop the table gives
each side's median decode tokens/s with its range, their difference, the pairs' own differences and
what that is per step. In a serial loop the recorder's cost is GPU idle time, so a costly recorder
would inflate the gap it measures."""

from __future__ import annotations

import statistics
from dataclasses import replace

from bench import cli
from bench.decode import fresh
from engine.config import LoopSpec
from engine.workloads import Workload
from record.recorder import Timeline
from record.schema import Loop


def run(device: str, models: list[str], batches: list[int], graph: bool, extra: int,
        work: Workload, repeats: int) -> int:
    """Median tokens/s with the recorder off and on, for each loop (at least 9 pairs)."""
    from engine import Engine

    repeats = max(repeats, 9)
    print(f"recorder on vs off: {device}, {'CUDA graphs' if graph else 'eager'}, "
          f"{work.prompt_tokens}-token prompts, {work.max_new_tokens} new tokens, "
          f"extra CPU {extra} us, "
          f"{repeats} pairs interleaved; tok/s median [min-max]\n")
    print("| model | B | loop | off tok/s | on tok/s | overhead | per pair | per step |\n"
          "|---|---|---|---|---|---|---|---|")
    for model in models:
        for batch in batches:
            cfg = work.engine_config(model=model, device=device, cuda_graph=graph,
                                     max_batch_size=batch)
            with Engine(cfg) as eng:
                batch_work = replace(work, requests=batch)
                prompts, params = batch_work.prompts(eng), batch_work.sampling()
                loops = (LoopSpec(Loop.NORMAL, 1, extra), LoopSpec(Loop.OVERLAP, 1, extra))
                for loop in loops:                    # warm: both loops, both recorder states
                    for record in (False, True):
                        eng.generate(prompts, params, loop, timeline=Timeline(enabled=record))
                for loop in loops:
                    speeds: dict[bool, list[float]] = {False: [], True: []}
                    for _ in range(repeats):
                        for record in (False, True):
                            r = fresh(eng).generate(prompts, params, loop,
                                                    timeline=Timeline(enabled=record))
                            speeds[record].append(sum(len(o.token_ids) for o in r.outputs)
                                                  / r.wall_s)
                    off, on = statistics.median(speeds[False]), statistics.median(speeds[True])
                    pairs = [100 * (a - b) / a for a, b in zip(speeds[False], speeds[True])]
                    # What the recorder adds to one decode step (all B rows), in microseconds.
                    step_us = batch * 1e6 * (1 / on - 1 / off)
                    print(f"| {model} | {batch} | {loop.loop} | "
                          f"{cli.spread(speeds[False], '{:.0f}')} | "
                          f"{cli.spread(speeds[True], '{:.0f}')} | "
                          f"{100 * (off - on) / off:+.2f}% | {statistics.median(pairs):+.1f}% "
                          f"[{min(pairs):+.1f} to {max(pairs):+.1f}] | {step_us:+.1f} us |",
                          flush=True)
    return 0


def main(argv: list[str]) -> int:
    p = cli.parser("python -m bench recorder", __doc__)
    cli.add_device(p)
    p.add_argument("--models", nargs="+", default=["bundled"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    p.add_argument("--eager", action="store_true", help="no CUDA graphs (on CPU: always)")
    p.add_argument("--extra-cpu-us", type=int, default=0, help="extra scheduler work a step")
    cli.add_work(p, repeats=9)
    args = p.parse_args(argv)
    cuda = cli.device_of(args) == "cuda"
    return run(args.device, args.models, args.batches, cuda and not args.eager,
               args.extra_cpu_us, cli.workload(args), args.repeats)
