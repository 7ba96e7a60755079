"""Serving benchmark: latency against request rate, normal vs overlap, on the same arrivals.

    python -m bench --rates 2 4 8 16 inf --requests 32 --device cpu
    python -m bench --rates 4 --arrivals trace.json             # a replayed trace instead

A trace's prompt and output lengths replace ``--prompt-len`` and ``--new-tokens``; its arrival
times, where it has them, replace the Poisson process (the rate then only names the row).

For each rate, one Poisson arrival sequence (seeded) is generated and both loops run it, back to
back on one engine, ``--repeats`` times (the order alternates, so neither loop always runs
second). Every request asks for ``--new-tokens`` tokens (EOS ignored), so both loops do the same
work; what differs is when tokens reach the client. Reported per rate and loop, as serving
benchmarks do: output tokens/s, TTFT and inter-token latency (mean, p50, p99; median over repeats
with min-max), and GPU busy. ``--json`` writes the rows that ``viz.latency.latency_figure`` draws.

At low rates the GPU idles between requests whatever the loop; the loops differ in each step's
length (ITL) and in the lag before a request's first token is read (TTFT). Near saturation, the
shorter step of the overlap loop is more throughput, and queues form later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.config import EngineConfig, SamplingParams
from engine.scheduler.arrivals import Arrival, describe, load_trace, poisson_times
from record.serving import format_table, rate_label, row_from_metrics, summarize


@dataclass(frozen=True)
class ServingWorkload:
    rates: tuple[float, ...]          # requests/s; inf = a burst
    requests: int = 32
    prompt_len: int = 32
    new_tokens: int = 64
    repeats: int = 3
    seed: int = 0
    arrivals_file: str | None = None


def run(device: str, model: str, batch: int, extra_cpu_us: int, work: ServingWorkload,
        json_path: str | None = None) -> int:
    from engine import Engine
    from engine.teach.workload import make_prompts

    trace = load_trace(work.arrivals_file, limit=work.requests,
                       rate=work.rates[0]) if work.arrivals_file else []
    longest = max([work.prompt_len + work.new_tokens]
                  + [(a.prompt_tokens or work.prompt_len) + (a.output_tokens or work.new_tokens)
                     for a in trace])
    cfg = EngineConfig(model=model, device=device, max_batch_size=batch,
                       max_seq_len=max(64, longest + 16), extra_cpu_us=extra_cpu_us,
                       seed=work.seed)
    rows = []
    with Engine(cfg) as eng:
        n = len(trace) or work.requests
        prompts = [make_prompts(eng.tokenizer, 1, a.prompt_tokens or work.prompt_len,
                                work.seed + i, eng.spec.vocab_size)[0]
                   for i, a in enumerate(trace)] or make_prompts(
            eng.tokenizer, n, work.prompt_len, work.seed, eng.spec.vocab_size)
        params = [SamplingParams(max_new_tokens=(trace[i].output_tokens if trace else None)
                                 or work.new_tokens, ignore_eos=True) for i in range(n)]
        for overlap in (False, True):                          # warm-up, not measured
            eng.generate(prompts[:batch], SamplingParams(max_new_tokens=8, ignore_eos=True),
                         overlap=overlap)
        lengths = (f"lengths from {work.arrivals_file}" if trace else
                   f"{work.prompt_len} prompt + {work.new_tokens} output tokens each")
        print(f"device: {eng.device_label()}  model: {model}  batch {batch}  extra CPU "
              f"{extra_cpu_us} us/step  {n} requests, {lengths}")
        for rate in work.rates:
            times = _times(rate, work, n)
            print(f"  {rate_label(rate)}: {describe([Arrival(t) for t in times])}", flush=True)
            for repeat in range(work.repeats):
                order = (False, True) if repeat % 2 == 0 else (True, False)
                for overlap in order:
                    result = eng.generate(prompts, params, overlap=overlap, arrivals=times)
                    row = row_from_metrics(result.loop, rate, len(times), result.metrics)
                    row["other_cpu_frac"] = result.host.get("other_cpu_frac")
                    rows.append({**row, "repeat": repeat})
        env = eng.env_info()
    summary = summarize(rows)
    print()
    print(format_table(summary))
    if json_path:
        doc = {"kind": "latency_vs_rate", "env": env, "config": {**cfg.to_dict(),
               "requests": work.requests, "prompt_len": work.prompt_len,
               "new_tokens": work.new_tokens, "repeats": work.repeats,
               "arrivals_file": work.arrivals_file}, "rows": rows}
        Path(json_path).write_text(json.dumps(doc, indent=1))
        print(f"wrote {json_path}")
    return 0


def _times(rate: float, work: ServingWorkload, n: int) -> list[float]:
    """The rate's arrival times: a trace's own, or a Poisson process (the same for both loops)."""
    if work.arrivals_file:
        trace = load_trace(work.arrivals_file, rate, work.seed, limit=work.requests)
        return [a.at_s for a in trace]
    return poisson_times(rate, n, work.seed)
