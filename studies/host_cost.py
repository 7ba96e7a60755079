"""Where our ``generate()`` spends host time beyond the forward, and what the recorder costs.

    python -m studies host-cost --out DIR [--models qwen2.5-0.5b-shape] [--batches 1 64]

Both loops, recording on and off alternated, ``generate()`` timed as a user calls it and the loop
alone; then a ``cProfile`` of each loop and a ``torch.profiler`` trace, under ``--out``."""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import subprocess
import time
from pathlib import Path


def _machine() -> dict[str, str]:
    """The GPU's name and UUID, the driver, the host's CPU model and load: where a row ran."""
    def sh(cmd: str) -> str:
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                                  timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"gpu": sh("nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader"),
            "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
            "loadavg": sh("cat /proc/loadavg")}


def _timed(eng, prompts, params, spec, record: bool):
    from record.recorder import Timeline
    eng.clear_prefix_cache()
    start = time.perf_counter()
    result = eng.generate(prompts, params, spec, timeline=None if record else Timeline(False))
    return time.perf_counter() - start, result


def measure(model: str, batch: int, rounds: int, out: Path, device: str = "cuda") -> list[dict]:
    from engine import Engine
    from engine.config import EngineConfig, LoopSpec, SamplingParams
    from engine.models.loader import describe_model
    from engine.workloads import make_prompts
    from record.metrics import cpu_phase_times
    from record.schema import Loop

    prompt_len, new = 32, 128
    cfg = EngineConfig(model=model, device=device, cuda_graph=device == "cuda", max_batch_size=batch,
                       max_seq_len=prompt_len + new + 16)
    prompts = make_prompts(None, batch, prompt_len, 0, describe_model(model)[0].vocab_size)
    params = SamplingParams(max_new_tokens=new, temperature=0.0, ignore_eos=True)
    loops = {Loop.NORMAL: LoopSpec(Loop.NORMAL), Loop.OVERLAP: LoopSpec(Loop.OVERLAP)}
    rows = []
    with Engine(cfg) as eng:
        for spec in loops.values():
            for record in (True, False):
                _timed(eng, prompts, params, spec, record)          # warm-up
        timed: dict[tuple, list] = {(lp, rec): [] for lp in loops for rec in (True, False)}
        for i in range(rounds):
            order = [True, False] if i % 2 == 0 else [False, True]
            for lp, spec in loops.items():
                for rec in order:
                    timed[(lp, rec)].append(_timed(eng, prompts, params, spec, rec))
        tokens = batch * new
        for (lp, rec), runs in timed.items():
            tps = [tokens / s for s, _ in runs]
            loop_share = statistics.median(r.wall_s / s for s, r in runs)
            row = {"model": model, "batch": batch, "loop": str(lp), "recording": rec,
                   "tok_s": statistics.median(tps), "tok_s_min": min(tps), "tok_s_max": max(tps),
                   "runs": tps, "loop_share": loop_share}
            if rec:
                m = [r.metrics for _, r in runs]
                for key in ("steady_step_us", "t_fwd_us", "t_cpu_us", "gpu_busy_frac"):
                    row[key] = statistics.median(x[key] for x in m)
                phases = [cpu_phase_times(r.timeline) for _, r in runs]
                row["cpu_phases_us"] = {p: statistics.median(ph.get(p, 0.0) for ph in phases)
                                        for p in sorted({p for ph in phases for p in ph})}
            rows.append(row)
        for lp, spec in loops.items():
            prof = cProfile.Profile()
            prof.enable()
            _timed(eng, prompts, params, spec, True)
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(40)
            pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
            (out / f"cprofile-{model}-b{batch}-{lp}.txt").write_text(text.getvalue())
        if batch == 1 and device == "cuda":
            import torch
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                _timed(eng, prompts, params, loops[Loop.OVERLAP], True)
            torch.cuda.synchronize()
            p.export_chrome_trace(str(out / f"trace-{model}-b1-overlap.json"))
            subprocess.run(["gzip", "-f", str(out / f"trace-{model}-b1-overlap.json")])
    return rows


def main(argv: list[str] | None = None) -> int:
    from record.schema import Loop

    ap = argparse.ArgumentParser(prog="python -m studies host-cost", description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", nargs="+", default=["qwen2.5-0.5b-shape"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    machine = _machine()
    rows = [row for model in a.models for b in a.batches
            for row in measure(model, b, a.rounds, a.out, a.device)]
    (a.out / "host_cost.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    print(machine)
    print(f"{'model':22} {'B':>3} {'loop':8} {'rec':>4} {'tok/s':>9} {'[min-max]':>17} "
          f"{'loop/gen':>8} {'step us':>8} {'fwd us':>7} {'cpu us':>7}")
    for r in rows:
        print(f"{r['model']:22} {r['batch']:>3} {r['loop']:8} {'on' if r['recording'] else 'off':>4} "
              f"{r['tok_s']:>9.0f} {r['tok_s_min']:>8.0f}-{r['tok_s_max']:<8.0f} "
              f"{r['loop_share']:>8.3f} {r.get('steady_step_us', 0):>8.0f} "
              f"{r.get('t_fwd_us', 0):>7.0f} {r.get('t_cpu_us', 0):>7.0f}")
    by_key = {(r["model"], r["batch"], r["loop"], r["recording"]): r for r in rows}
    for model in a.models:
        for b in a.batches:
            for lp in (Loop.NORMAL, Loop.OVERLAP):
                on, off = by_key[(model, b, lp, True)], by_key[(model, b, lp, False)]
                print(f"recorder cost {model} B={b} {lp}: {100 * (1 - on['tok_s'] / off['tok_s']):+.1f}%"
                      f"  phases {on.get('cpu_phases_us')}")
    return 0


if __name__ == "__main__":
    main()
