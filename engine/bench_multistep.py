"""Multi-step overlap: how many decode steps per scheduling iteration (k) hide a heavy CPU?

    python -m engine.bench --multistep --device cuda --models bundled --batches 8 \\
        --graphs graph --extra-cpu-us 200

One-step overlap hides at most T_fwd of CPU work per step: T ~ max(T_fwd, T_sched + T_post).
Launching k forwards per iteration divides the CPU's share: T ~ max(T_fwd, (T_sched + T_post) / k),
paid for with lag k: a request that stops runs up to 2k-1 extra forwards (wasted tokens), and its
first output reaches the CPU later. Requests here stop on stop tokens at varied steps, so the
waste is real; every k must give the same tokens as the normal loop.
"""

from __future__ import annotations

import statistics

from engine.bench import steady_busy
from engine.config import EngineConfig
from engine.workload import stop_params_from_probe


def main(a) -> int:
    from engine import Engine
    from engine.workload import make_prompts

    model = (a.models or ["bundled"])[0]
    batch = (a.batches or [8])[0]
    graph = (a.graphs or ["graph" if a.device == "cuda" else "eager"])[0] == "graph"
    extra = (a.extra_cpu_us or [200 if a.device == "cuda" else 4000])[0]
    ks = [1, 2, 3, 4, 6, 8]
    cfg = EngineConfig(model=model, device=a.device, cuda_graph=graph, max_batch_size=batch,
                       max_seq_len=a.prompt_len + a.new_tokens + 16)
    rows = []
    with Engine(cfg) as eng:
        prompts = make_prompts(eng.tokenizer, batch, a.prompt_len, 0, eng.spec.vocab_size)
        params = stop_params_from_probe(eng, prompts, a.new_tokens, lo=a.new_tokens // 4,
                                        hi=a.new_tokens)
        normal = eng.generate(prompts, params, overlap=False, extra_cpu_us=extra)
        ref = [o.token_ids for o in normal.outputs]
        t_fwd, t_cpu = normal.metrics["t_fwd_us"], normal.metrics["t_cpu_us"]
        serial_step = normal.metrics["mean_step_us"]
        rows.append(("normal", normal, serial_step, True))
        for k in ks:
            runs = [eng.generate(prompts, params, overlap=True, extra_cpu_us=extra, decode_steps=k)
                    for _ in range(a.repeats)]
            med = statistics.median(r.metrics["decode_tokens_per_s"] for r in runs)
            best = min(runs, key=lambda r: abs(r.metrics["decode_tokens_per_s"] - med))
            same = all([o.token_ids for o in r.outputs] == ref for r in runs)
            rows.append((f"k={k}", best, max(t_fwd, t_cpu / k), same))
    out_tokens = sum(len(t) for t in ref)
    print(f"model {model}, B={batch}, graph={graph}, extra CPU {extra} us/step; normal run: "
          f"T_fwd {t_fwd / 1e3:.3f} ms, T_sched+T_post {t_cpu / 1e3:.3f} ms\n")
    print("| loop | decode tok/s | GPU busy (steady) | predicted step ms | measured step ms | "
          "wasted tokens | TTFT ms | same tokens as normal |\n|---|---|---|---|---|---|---|---|")
    for name, r, pred, same in rows:
        m = r.metrics
        print(f"| {name} | {m['decode_tokens_per_s']:.0f} | {100 * steady_busy(r.timeline):.1f}% | "
              f"{pred / 1e3:.3f} | {m['mean_step_us'] / 1e3:.3f} | {m['wasted_tokens']} "
              f"({100 * m['wasted_tokens'] / out_tokens:.1f}%) | {m['ttft_ms_mean']:.2f} | "
              f"{'yes' if same else 'NO'} |")
    return 0
