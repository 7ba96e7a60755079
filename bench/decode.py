"""Both loops, eager and with CUDA graphs, against a forward-only ceiling and the weight-read floor.

    python -m bench loops --device cuda --graphs graph --compile
    python -m bench loops --device cpu --quick

Every engine row is the median of ``--repeats`` runs of a steady decode workload, as a fraction of
the *forward-only ceiling* (the decode step replayed back to back, no scheduler), which stands
beside the *weight-read floor* (every parameter read once at the measured copy bandwidth)."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from bench import cli
from bench.timing import copy_bandwidth_gbs, ms_per_call
from engine.config import LoopSpec, SamplingParams
from engine.workloads import Workload
from record.metrics import steady_busy
from record.schema import Loop, Phase


@dataclass(frozen=True)
class Sweep:
    """What the table holds: each model, with CUDA graphs off and/or on, at each batch size and
    extra CPU work; an engine row is the median of ``repeats`` runs of the workload."""

    models: list[str]
    batches: list[int]
    extra_cpu_us: list[int]
    graphs: list[bool]
    repeats: int = 3
    ceiling_iters: int = 50       # back-to-back decode steps timed for the forward-only ceiling
    compile: bool = False         # CUDA: compiled decode regions


def fresh(eng):
    """``eng`` with an empty prefix cache: every measured run starts from the same memory, none
    finding the prompts an earlier run cached (those runs would prefill less)."""
    eng.clear_prefix_cache()
    return eng


def median_run(runs: list) -> tuple[float, Any]:
    """The median decode tokens/s of ``runs``, and the run closest to it."""
    med = statistics.median(r.metrics["decode_tokens_per_s"] for r in runs)
    return med, min(runs, key=lambda r: abs(r.metrics["decode_tokens_per_s"] - med))


def materialise(model: str, device: str, dtype: str, workdir: Path) -> str:
    """Presets become real HF checkpoints (random weights) so transformers can load the same."""
    from engine.models.loader import PRESETS, resolve_model_dir
    if model not in PRESETS:
        return str(resolve_model_dir(model))     # "bundled" -> assets/bundled, a dir -> itself
    out = workdir / model
    if not (out / "config.json").exists():
        from engine.models.checkpoint import save_hf_checkpoint
        from engine.models.loader import load_model
        loaded = load_model(model, device, getattr(torch, dtype if dtype != "auto" else
                                                    ("bfloat16" if device == "cuda" else "float32")))
        save_hf_checkpoint(loaded.model, out)
    return str(out)


def forward_ceiling(eng, batch: int, pos: int, iters: int) -> float:
    """Seconds per decode step with no scheduler: the step (graph or eager) back to back."""
    import numpy as np

    from engine.scheduler.request import COL_LEN, COL_SLOT, COL_START, COL_WRITE, NUM_INT_COLS
    cfg = eng.config
    runner = getattr(eng.device, "runner", None)
    if runner is None:            # CPU device process: time the same step in this process
        from engine.devices.cpu_process import build_runner
        torch.set_num_threads(cfg.cpu_threads)
        runner = build_runner(eng.device_init)[1]
    pad = batch
    if eng.device_name == "cuda":
        from engine.scheduler.request import decode_bucket
        pad = decode_bucket(batch, cfg.max_batch_size)
    ints = np.zeros((pad, NUM_INT_COLS + cfg.pages_per_seq), dtype=np.int64)
    ints[:, COL_SLOT] = np.arange(pad) % cfg.max_batch_size
    ints[:, COL_START], ints[:, COL_LEN] = pos, 1
    ints[:, COL_WRITE] = 0                              # keep no token: the pool stays untouched
    ints[:, NUM_INT_COLS:] = np.arange(cfg.pages_per_seq)[None, :]
    floats = np.ones((pad, 2), dtype=np.float32)
    dev = runner.device
    t_ints, t_floats = torch.from_numpy(ints).to(dev), torch.from_numpy(floats).to(dev)
    kv_pages = cfg.pages_per_seq if eng.device_name == "cuda" else -(-(pos + 1) // cfg.page_size)
    graphs = getattr(eng.device, "graphs", None)

    def one():
        if graphs is not None:
            from engine.scheduler.request import StepMeta
            meta = StepMeta(0, Phase.DECODE, batch, 1, kv_pages, True, ints, floats,
                            np.zeros((3, 0), dtype=np.int64))
            return graphs.lookup(meta).replay(t_ints, t_floats)
        return runner.step(t_ints, t_floats, 1, kv_pages, True)

    for _ in range(3):
        one()
    if dev.type == "cuda":
        return ms_per_call(one, iters, 1)[0] / 1e3
    t0 = time.perf_counter()
    for _ in range(iters):
        one()
    return (time.perf_counter() - t0) / iters


def engine_rows(eng, label: str, sweep: Sweep, work: Workload) -> list[dict]:
    """Normal and overlap rows for each batch size and extra CPU work, on one engine."""
    rows = []
    for batch in sweep.batches:
        batch_work = replace(work, requests=batch)
        prompts, params = batch_work.prompts(eng), batch_work.sampling()
        step_s = forward_ceiling(eng, batch, work.prompt_tokens + work.max_new_tokens // 2,
                                 sweep.ceiling_iters)
        ceiling = batch / step_s
        for extra in sweep.extra_cpu_us:
            results = {}
            for loop in (Loop.NORMAL, Loop.OVERLAP):
                runs = [fresh(eng).generate(prompts, params, LoopSpec(loop, 1, extra))
                        for _ in range(sweep.repeats)]
                results[loop] = median_run(runs)
            for loop in (Loop.NORMAL, Loop.OVERLAP):
                med, best = results[loop]
                m = best.metrics
                rows.append(dict(model=label, batch=batch, graph=eng.config.cuda_graph,
                                 step_ms=step_s * 1e3, floor_ms=weight_floor_ms(eng),
                                 extra_us=extra, mode=loop,
                                 decode_tok_s=med, busy=steady_busy(best.timeline),
                                 ceiling_tok_s=ceiling, frac_ceiling=med / ceiling,
                                 t_fwd_ms=m["t_fwd_us"] / 1e3, t_cpu_ms=m["t_cpu_us"] / 1e3,
                                 predicted=results[Loop.NORMAL][1].metrics[
                                     "predicted_overlap_speedup"],
                                 measured=med / results[Loop.NORMAL][0]))
    return rows


_COPY_GBS: dict[str, float] = {}


def weight_floor_ms(eng) -> float:
    """Milliseconds to read every parameter once at the copy bandwidth measured in this run."""
    dev = eng.device_name
    if dev not in _COPY_GBS:
        _COPY_GBS[dev] = copy_bandwidth_gbs(dev, mib=1024 if dev == "cuda" else 256)
    nbytes = eng.spec.num_parameters() * torch.finfo(getattr(torch, eng.dtype)).bits // 8
    return nbytes / (_COPY_GBS[dev] * 1e9) * 1e3


def print_floor_table(rows: list[dict]) -> None:
    """Forward-only step beside the weight-read floor, once per (model, B, graphs)."""
    seen: dict[tuple, dict] = {}
    for r in rows:
        seen.setdefault((r["model"], r["batch"], r["graph"]), r)
    bw = ", ".join(f"{k} {v:.0f} GB/s" for k, v in _COPY_GBS.items())
    print(f"\nweight-read floor = parameter bytes / copy bandwidth measured in this run ({bw}, "
          "read + write)\n")
    print("| model | B | graph | weight-read floor ms | decode step ms (forward only) | "
          "step / floor |\n|---|---|---|---|---|---|")
    for (model, batch, graph), r in seen.items():
        print(f"| {model} | {batch} | {graph} | {r['floor_ms']:.3f} | {r['step_ms']:.3f} | "
              f"{r['step_ms'] / r['floor_ms']:.2f}x |")


def print_table(rows: list[dict], header: bool = True) -> None:
    head = (f"| {'model':<20} | {'B':>3} | {'graph':<5} | {'cpu+us':>6} | {'mode':<7} | "
            f"{'decode tok/s':>12} | {'busy':>6} | {'of ceiling':>10} | {'T_fwd ms':>8} | "
            f"{'T_cpu ms':>8} | {'pred':>5} | {'meas':>5} |")
    if header:
        print(head)
        print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    for r in rows:
        print(f"| {r['model']:<20} | {r['batch']:>3} | {str(r['graph']):<5} | {r['extra_us']:>6} |"
              f" {r['mode']:<7} | {r['decode_tok_s']:>12.0f} | {100 * r['busy']:>5.1f}% | "
              f"{100 * r['frac_ceiling']:>9.1f}% | {r['t_fwd_ms']:>8.3f} | {r['t_cpu_ms']:>8.3f} |"
              f" {r['predicted']:>4.2f}x | {r['measured']:>4.2f}x |", flush=True)


def run(device: str, sweep: Sweep, work: Workload) -> int:
    """Every (model, graphs) engine: its rows as they come, then the whole table."""
    from engine import Engine
    from engine.__main__ import format_startup
    rows: list[dict] = []
    for model in sweep.models:
        for graph in sweep.graphs:
            cfg = work.engine_config(model=model, device=device, cuda_graph=graph,
                                     max_batch_size=max(sweep.batches),
                                     compile=sweep.compile and device == "cuda")
            with Engine(cfg) as eng:
                print(f"{model} ({eng.device_label()}) start-up: {format_startup(eng.startup_s)}",
                      file=sys.stderr, flush=True)
                eng.generate(replace(work, requests=2).prompts(eng),
                             SamplingParams(max_new_tokens=4))   # warm-up
                new_rows = engine_rows(eng, model, sweep, work)
                print_table(new_rows, header=not rows)
                rows += new_rows
            print(f"done {model} graph={graph}", file=sys.stderr, flush=True)
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"\ndevice: {name}, torch {torch.__version__}; decode tok/s = median of "
          f"{sweep.repeats}; busy = union of the GPU streams over the middle 80% of decode\n")
    print_table(rows)
    print_floor_table(rows)
    return 0


def main(argv: list[str]) -> int:
    p = cli.parser("python -m bench loops", __doc__)
    cli.add_device(p)
    p.add_argument("--models", nargs="+", default=None,
                   help="default: bundled (on CUDA also the SmolLM2-135M and Qwen2.5-0.5B shapes)")
    p.add_argument("--batches", nargs="+", type=int, default=None,
                   help="requests decoded together (default: 1 8 64 on CUDA, 8 on CPU)")
    p.add_argument("--extra-cpu-us", nargs="+", type=int, default=None,
                   help="extra scheduler work a step (default: 0 200 on CUDA, 0 4000 on CPU)")
    p.add_argument("--graphs", nargs="+", choices=["eager", "graph"], default=None,
                   help="CUDA graphs off, on or both (default: both on CUDA, eager on CPU)")
    p.add_argument("--compile", action="store_true", help="CUDA: compiled decode regions")
    p.add_argument("--quick", action="store_true", help="small CPU settings, one run each")
    cli.add_work(p)
    args = p.parse_args(argv)
    cuda = cli.device_of(args) == "cuda"
    if args.quick:
        args.new_tokens = min(args.new_tokens, 48)
    graphs = args.graphs or (["eager", "graph"] if cuda else ["eager"])
    sweep = Sweep(models=args.models or (["bundled", "smollm2-135m-shape", "qwen2.5-0.5b-shape"]
                                         if cuda else ["bundled"]),
                  batches=args.batches or ([1, 8, 64] if cuda else [8]),
                  extra_cpu_us=(args.extra_cpu_us if args.extra_cpu_us is not None
                                else [0, 200] if cuda else [0, 4000]),
                  graphs=[g == "graph" for g in graphs],
                  repeats=1 if args.quick else args.repeats,
                  ceiling_iters=10 if args.quick else 50, compile=args.compile)
    return run(args.device, sweep, cli.workload(args))
