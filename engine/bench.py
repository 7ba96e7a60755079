"""Benchmark: normal vs overlap, eager vs CUDA graphs, against two baselines, in one table.

- **forward-only ceiling**: the same decode step replayed back to back with no scheduler at all
  (what the device could do if the CPU cost nothing). Each engine row is reported as a fraction.
- **transformers ``generate``**: what a user would otherwise run, on the same weights, batch and
  prompts (greedy), eager and with its static cache; tokens are compared with ours.

    python -m engine.bench --device cuda                      # the H200 table in the README
    python -m engine.bench --device cpu --quick               # a 2-core CPU in about a minute
    python -m engine.bench --overhead                         # span recording on vs off
    python -m engine.bench --multistep                        # k decode steps per iteration

Every engine number is the median of ``--repeats`` runs of a steady decode workload (``B``
requests, all admitted at once, ``--new-tokens`` tokens each, no early stops).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from engine.config import EngineConfig, SamplingParams
from engine.metrics import busy_fraction
from engine.timeline import GPU_LANES


def steady_busy(spans, first_frac: float = 0.1, last_frac: float = 0.9) -> float:
    """GPU busy (union of both stream lanes) over the middle of the decode phase."""
    fwd = sorted((s for s in spans if s.lane == "engine_stream" and s.phase == "decode"),
                 key=lambda s: s.start_us)
    if len(fwd) < 5:
        return busy_fraction(spans, GPU_LANES)
    a, b = fwd[int(len(fwd) * first_frac)], fwd[int(len(fwd) * last_frac) - 1]
    return busy_fraction(spans, GPU_LANES, window=(a.start_us, b.end_us))


def materialise(model: str, device: str, dtype: str, workdir: Path) -> str:
    """Presets become real HF checkpoints (random weights) so transformers can load the same."""
    from engine.loader import PRESETS, resolve_model_dir
    if model not in PRESETS:
        return str(resolve_model_dir(model))     # "bundled" -> assets/bundled, a dir -> itself
    out = workdir / model
    if not (out / "config.json").exists():
        from engine.checkpoint import save_hf_checkpoint
        from engine.loader import load_model
        loaded = load_model(model, device, getattr(torch, dtype if dtype != "auto" else
                                                    ("bfloat16" if device == "cuda" else "float32")))
        save_hf_checkpoint(loaded.model, out)
    return str(out)


def forward_ceiling(eng, batch: int, pos: int, iters: int) -> float:
    """Seconds per decode step with no scheduler: the step (graph or eager) back to back."""
    import numpy as np

    from engine.request import NUM_INT_COLS
    cfg = eng.config
    runner = getattr(eng.device, "runner", None)
    if runner is None:            # CPU device process: time the same step in this process
        from engine.device_process import build_runner
        torch.set_num_threads(cfg.cpu_threads)
        runner = build_runner(eng.device_init)[1]
    pad = batch
    if eng.device_name == "cuda":
        from engine.request import decode_bucket
        pad = decode_bucket(batch, cfg.max_batch_size)
    ints = np.zeros((pad, NUM_INT_COLS + cfg.pages_per_seq), dtype=np.int64)
    ints[:, 0] = np.arange(pad) % cfg.max_batch_size
    ints[:, 1], ints[:, 2], ints[:, 3] = pos, 1, 0     # write_out=0: the pool stays untouched
    ints[:, NUM_INT_COLS:] = np.arange(cfg.pages_per_seq)[None, :]
    floats = np.ones((pad, 2), dtype=np.float32)
    dev = runner.device
    t_ints, t_floats = torch.from_numpy(ints).to(dev), torch.from_numpy(floats).to(dev)
    kv_pages = cfg.pages_per_seq if eng.device_name == "cuda" else -(-(pos + 1) // cfg.page_size)
    graphs = getattr(eng.device, "graphs", None)

    def one():
        if graphs is not None:
            from engine.request import StepMeta
            meta = StepMeta(0, "decode", batch, 1, kv_pages, True, ints, floats,
                            np.zeros((3, 0), dtype=np.int64))
            return graphs.lookup(meta).replay(t_ints, t_floats)
        return runner.step(t_ints, t_floats, 1, kv_pages, True)

    for _ in range(3):
        one()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            one()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        one()
    return (time.perf_counter() - t0) / iters


def run_engine_rows(eng, label: str, batches, extras, args, prompts_for) -> list[dict]:
    rows = []
    for batch in batches:
        prompts = prompts_for(batch)
        params = SamplingParams(max_new_tokens=args.new_tokens, ignore_eos=True)
        ceiling = batch / forward_ceiling(eng, batch, args.prompt_len + args.new_tokens // 2,
                                          args.ceiling_iters)
        for extra in extras:
            results = {}
            for overlap in (False, True):
                runs = [eng.generate(prompts, params, overlap=overlap, extra_cpu_us=extra)
                        for _ in range(args.repeats)]
                med = statistics.median(r.metrics["decode_tokens_per_s"] for r in runs)
                best = min(runs, key=lambda r: abs(r.metrics["decode_tokens_per_s"] - med))
                results[overlap] = (med, best, [r.outputs for r in runs])
            for overlap in (False, True):
                med, best, _ = results[overlap]
                m = best.metrics
                rows.append(dict(model=label, batch=batch, graph=eng.config.cuda_graph,
                                 extra_us=extra, mode="overlap" if overlap else "normal",
                                 decode_tok_s=med, busy=steady_busy(best.timeline),
                                 ceiling_tok_s=ceiling, frac_ceiling=med / ceiling,
                                 t_fwd_ms=m["t_fwd_us"] / 1e3, t_cpu_ms=m["t_cpu_us"] / 1e3,
                                 predicted=results[False][1].metrics["predicted_overlap_speedup"],
                                 measured=med / results[False][0],
                                 tokens=[o.token_ids for o in best.outputs]))
    return rows


def hf_generate_rows(path: str, device: str, dtype: str, prompts, new_tokens: int,
                     ours: list[list[int]], static: bool) -> dict:
    """transformers generate, timed as decode tok/s = B*(N-1) / (T(N) - T(1))."""
    from transformers import AutoModelForCausalLM
    dt = getattr(torch, dtype)
    hf_model = AutoModelForCausalLM.from_pretrained(path, dtype=dt).to(device).eval()
    ids = torch.tensor(prompts, device=device)
    kw = dict(do_sample=False, eos_token_id=None, pad_token_id=0)
    if static:
        kw["cache_implementation"] = "static"

    def timed(n):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = hf_model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, out

    timed(2)
    t1, _ = timed(1)
    tn, out = timed(new_tokens)
    gen = out[:, ids.shape[1]:].tolist()
    agree = sum(a == b for a, b in zip(gen, ours)) / len(ours)
    prefix = statistics.mean(_common_prefix(a, b) for a, b in zip(gen, ours))
    return dict(decode_tok_s=len(prompts) * (new_tokens - 1) / max(tn - t1, 1e-9),
                agree=agree, prefix=prefix)


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def print_table(rows: list[dict], hf: list[dict], header: bool = True) -> None:
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
    if hf:
        print("\n| model | B | transformers generate | decode tok/s | our best | ours / theirs "
              "| same tokens | mean common prefix |\n|---|---|---|---|---|---|---|---|")
        for h in hf:
            print(f"| {h['model']} | {h['batch']} | {h['variant']} | {h['decode_tok_s']:.0f} | "
                  f"{h['ours']:.0f} | {h['ours'] / h['decode_tok_s']:.1f}x | "
                  f"{100 * h['agree']:.0f}% | {h['prefix']:.1f} |")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available()
                   else "cpu")
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--batches", nargs="+", type=int, default=None)
    p.add_argument("--extra-cpu-us", nargs="+", type=int, default=None)
    p.add_argument("--graphs", nargs="+", choices=["eager", "graph"], default=None)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ceiling-iters", type=int, default=50)
    p.add_argument("--hf", action="store_true", help="also time transformers generate")
    p.add_argument("--quick", action="store_true", help="small CPU settings")
    p.add_argument("--overhead", action="store_true", help="recording on vs off only")
    p.add_argument("--multistep", action="store_true", help="k decode steps per iteration")
    p.add_argument("--workdir", default=tempfile.gettempdir())
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.multistep:
        from engine.bench_multistep import main as multistep_main
        return multistep_main(a)
    if a.overhead:
        from engine.bench_overhead import main as overhead_main
        return overhead_main(a)
    cuda = a.device == "cuda"
    models = a.models or (["bundled", "smollm2-135m-shape", "qwen2.5-0.5b-shape"] if cuda
                          else ["bundled"])
    batches = a.batches or ([1, 8, 64] if cuda else [8])
    extras = a.extra_cpu_us if a.extra_cpu_us is not None else ([0, 200] if cuda else [0, 4000])
    graphs = [g == "graph" for g in (a.graphs or (["eager", "graph"] if cuda else ["eager"]))]
    if a.quick:
        a.new_tokens, a.repeats, a.ceiling_iters = min(a.new_tokens, 48), 1, 10
    from engine import Engine
    from engine.workload import make_prompts
    rows, hf = [], []
    for model in models:
        path = materialise(model, a.device, "auto", Path(a.workdir))
        for graph in graphs:
            cfg = EngineConfig(model=path, device=a.device, cuda_graph=graph,
                               max_batch_size=max(batches),
                               max_seq_len=a.prompt_len + a.new_tokens + 16)
            with Engine(cfg) as eng:
                def prompts_for(b, eng=eng):
                    return make_prompts(eng.tokenizer, b, a.prompt_len, 0, eng.spec.vocab_size)
                eng.generate(prompts_for(2), SamplingParams(max_new_tokens=4))   # warm-up
                new_rows = run_engine_rows(eng, model, batches, extras, a, prompts_for)
                print_table(new_rows, [], header=not rows)     # rows as they come, then the whole
                rows += new_rows
                dtype = eng.dtype
            print(f"done {model} graph={graph}", file=sys.stderr, flush=True)
        if a.hf:
            big = max(batches)
            ours = [r for r in rows if r["model"] == model and r["batch"] == big and r["extra_us"] == 0]
            best = max(ours, key=lambda r: r["decode_tok_s"])
            for static in (False, True):
                try:
                    res = hf_generate_rows(path, a.device, dtype, prompts_for(big), a.new_tokens,
                                           best["tokens"], static)
                except Exception as err:  # noqa: BLE001 - report, don't die
                    print(f"transformers static={static} failed: {err}", file=sys.stderr)
                    continue
                hf.append(dict(model=model, batch=big, ours=best["decode_tok_s"],
                               variant="static cache" if static else "eager (dynamic cache)", **res))
    device = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"\ndevice: {device}, torch {torch.__version__}; decode tok/s = median of {a.repeats}; "
          f"busy = union of both streams over the middle 80% of decode\n")
    print_table(rows, hf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
