"""Multi-step overlap: how many decode steps per scheduling iteration (k) hide a heavy CPU?

    python -m bench multistep --device cuda --model bundled --batch 8 --extra-cpu-us 200

Overlap hides at most T_fwd of CPU work a step; k forwards an iteration divide the CPU's share, T ~
max(T_fwd, (T_sched + T_post) / k), paid for with lag k (up to 2k-1 wasted forwards for a request
that stops). Requests stop on stop tokens at varied steps; every k must give the normal loop's
tokens."""

from __future__ import annotations

from typing import Any

from bench import cli
from bench.decode import fresh, median_run
from engine.config import LoopSpec
from engine.workloads import Workload, stop_params_from_probe
from record.metrics import steady_busy
from record.schema import Lane, Loop, Phase

TARGET_BUSY = 0.97
PHASES = (Phase.SCHEDULE, Phase.LAUNCH, Phase.PROCESS_LAST)   # the table's CPU columns, in order


def run(device: str, model: str, graph: bool, extra: int, work: Workload, repeats: int) -> int:
    """The normal loop, then multi-step overlap for every k up to 8, on one engine that decodes
    the workload's requests together."""
    from engine import Engine

    ks = list(range(1, 9))                 # every k up to 8, so "smallest k" is exact
    batch, new = work.requests, work.max_new_tokens
    cfg = work.engine_config(model=model, device=device, cuda_graph=graph, max_batch_size=batch)
    rows: list[tuple[str, Any, float, bool]] = []    # (loop, a run, T bound, tokens equal)
    with Engine(cfg) as eng:
        prompts = work.prompts(eng)
        params = stop_params_from_probe(eng, prompts, new, lo=new // 4, hi=new)[0]
        normal = fresh(eng).generate(prompts, params, LoopSpec(Loop.NORMAL, 1, extra))
        ref = [o.token_ids for o in normal.outputs]
        t_fwd, t_cpu = normal.metrics["t_fwd_us"], normal.metrics["t_cpu_us"]
        serial_step = normal.metrics["mean_step_us"]
        rows.append((Loop.NORMAL, normal, serial_step, True))
        for k in ks:
            loop = LoopSpec(Loop.MULTISTEP, k, extra) if k > 1 else LoopSpec(Loop.OVERLAP, 1, extra)
            runs = [fresh(eng).generate(prompts, params, loop) for _ in range(repeats)]
            best = median_run(runs)[1]
            same = all([o.token_ids for o in r.outputs] == ref for r in runs)
            rows.append((f"k={k}", best, max(t_fwd, t_cpu / k), same))
    out_tokens = sum(len(t) for t in ref)
    print(f"model {model}, B={batch}, graph={graph}, extra CPU {extra} us/step; normal run: "
          f"T_fwd {t_fwd / 1e3:.3f} ms, T_sched+T_post {t_cpu / 1e3:.3f} ms\n")
    print("| loop | decode tok/s | GPU busy (steady) | predicted step ms | measured step ms | "
          "CPU us per forward: schedule / launch / process | wasted tokens | TTFT ms | "
          "same tokens as normal |\n|---|---|---|---|---|---|---|---|---|")
    smallest = None
    for name, r, pred, same in rows:
        m, busy = r.metrics, steady_busy(r.timeline)
        if name != Loop.NORMAL and busy >= TARGET_BUSY and smallest is None:
            smallest = (name, busy, m["wasted_tokens"])
        cpu = cpu_per_forward(r.timeline)
        print(f"| {name} | {m['decode_tokens_per_s']:.0f} | {100 * busy:.1f}% | "
              f"{pred / 1e3:.3f} | {m['mean_step_us'] / 1e3:.3f} | "
              f"{' / '.join(f'{us:.0f}' for us in cpu.values())} | "
              f"{m['wasted_tokens']} ({100 * m['wasted_tokens'] / out_tokens:.1f}%) | "
              f"{m['ttft_ms_mean']:.2f} | {'yes' if same else 'NO'} |")
    if smallest:
        name, busy, wasted = smallest
        print(f"\nsmallest k at >= {100 * TARGET_BUSY:.0f}% steady busy: {name} ({100 * busy:.1f}%), "
              f"wasted tokens {wasted} of {out_tokens} output tokens")
    else:
        print(f"\nno k in {ks} reached {100 * TARGET_BUSY:.0f}% steady busy")
    return 0


def cpu_per_forward(spans) -> dict[str, float]:
    """Mean CPU time per decode forward of each scheduler phase: a multi-step group's one
    ``schedule`` span covers its k steps, so this is the amortised share."""
    decode_steps = {s.step for s in spans
                    if s.lane == Lane.ENGINE_STREAM and s.phase == Phase.DECODE}
    total = dict.fromkeys(PHASES, 0.0)
    for s in spans:
        if s.lane == Lane.CPU and s.phase in total and s.step in decode_steps:
            total[s.phase] += s.end_us - s.start_us
    return {phase: us / max(len(decode_steps), 1) for phase, us in total.items()}


def main(argv: list[str]) -> int:
    p = cli.parser("python -m bench multistep", __doc__)
    cli.add_device(p)
    p.add_argument("--model", default="bundled")
    p.add_argument("--batch", type=int, default=8, help="requests decoded together")
    p.add_argument("--eager", action="store_true", help="no CUDA graphs (on CPU: always)")
    p.add_argument("--extra-cpu-us", type=int, default=None,
                   help="extra scheduler work a step (default: 200 on CUDA, 4000 on CPU)")
    cli.add_work(p)
    args = p.parse_args(argv)
    cuda = cli.device_of(args) == "cuda"
    extra = args.extra_cpu_us if args.extra_cpu_us is not None else (200 if cuda else 4000)
    return run(args.device, args.model, cuda and not args.eager, extra,
               cli.workload(args, requests=args.batch), args.repeats)
