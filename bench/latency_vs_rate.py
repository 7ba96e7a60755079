"""Latency against request rate, normal vs overlap, on the same arrivals (the engine in process).

    python -m bench rates --rates 2 4 8 16 inf --requests 32 --device cpu
    python -m bench rates --rates 4 --arrivals trace.json       # a replayed trace instead
    python -m bench rates --rates 4 --shared-prefix 512 --prefix-cache both   # the cache's gain

For each rate both loops run one seeded arrival sequence (or a trace's) on one engine,
``--repeats`` times in alternating order. Per rate and loop: output tokens/s, TTFT and inter-token
latency, GPU busy; ``--json`` writes the rows ``viz.latency`` draws. ``--prefix-cache both``
compares TTFT without and with the cache, and each run's TTFT drift."""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import cli
from engine.config import NORMAL, OVERLAP, EngineConfig, SamplingParams
from engine.scheduler.arrivals import Arrival, describe, load_trace, poisson_times
from engine.workloads import Workload
from record.latency_rows import format_table, rate_label, row_from_metrics, summarize
from record.metrics import ttft_drift
from record.schema import Lane, Phase


@dataclass(frozen=True)
class RateGrid:
    """What is measured on the workload: each rate, ``repeats`` times in each loop, with the
    prefix cache, without it, or both."""

    rates: tuple[float, ...]          # requests/s; inf = a burst
    repeats: int = 3
    prefix_caches: tuple[bool, ...] = (True,)


def run(device: str, model: str, batch: int, extra_cpu_us: int, grid: RateGrid, work: Workload,
        json_path: str | None = None, graph: bool = False) -> int:
    rows: list[dict] = []
    env: dict[str, Any] = {}
    cfg: EngineConfig | None = None
    for cache in grid.prefix_caches:
        cfg = work.engine_config(model=model, device=device, max_batch_size=batch,
                                 seed=work.seed, prefix_cache=cache, cuda_graph=graph)
        found, env = _run_engine(cfg, extra_cpu_us, grid, work)
        rows += [{**row, "prefix_cache": cache} for row in found]
    for cache in grid.prefix_caches:
        if len(grid.prefix_caches) > 1:
            print(f"\nprefix cache {'on' if cache else 'off'}:")
        print()
        print(format_table(summarize([r for r in rows if r["prefix_cache"] == cache])))
    if len(grid.prefix_caches) > 1:
        print()
        print(compare_caches(rows))
    if json_path and cfg is not None:
        doc = {"kind": "latency_vs_rate", "env": env, "config": {**cfg.to_dict(),
               "extra_cpu_us": extra_cpu_us, "requests": work.requests,
               "prompt_tokens": work.prompt_tokens, "max_new_tokens": work.max_new_tokens,
               "repeats": grid.repeats, "arrivals_file": work.arrivals_file,
               "shared_prefix": work.shared_prefix,
               "prefix_caches": list(grid.prefix_caches)}, "rows": rows}
        Path(json_path).write_text(json.dumps(doc, indent=1))
        print(f"wrote {json_path}")
    return 0


def _run_engine(cfg: EngineConfig, extra_cpu_us: int, grid: RateGrid,
                work: Workload) -> tuple[list[dict], dict]:
    """Every rate, loop and repeat on one engine of ``cfg``; the rows and the environment."""
    from bench.decode import fresh
    from engine import Engine

    rows = []
    with Engine(cfg) as eng:
        n, batch = work.requests, cfg.max_batch_size
        prompts, params = work.prompts(eng), work.sampling()
        for loop in (NORMAL, OVERLAP):                         # warm-up, not measured
            eng.generate(prompts[:batch], SamplingParams(max_new_tokens=8, ignore_eos=True), loop)
        lengths = (f"lengths from {work.arrivals_file}" if work.arrivals else
                   f"{work.prompt_tokens} prompt + {work.max_new_tokens} output tokens each")
        shared = f", a shared {work.shared_prefix}-token prefix" if work.shared_prefix else ""
        print(f"device: {eng.device_label()}  model: {cfg.model}  batch {batch}  extra CPU "
              f"{extra_cpu_us} us/step  {n} requests, {lengths}{shared}  prefix cache "
              f"{'on' if cfg.prefix_cache else 'off'}")
        for rate in grid.rates:
            times = _times(rate, work)
            print(f"  {rate_label(rate)}: {describe([Arrival(t) for t in times])}", flush=True)
            for repeat in range(grid.repeats):
                order = (NORMAL, OVERLAP) if repeat % 2 == 0 else (OVERLAP, NORMAL)
                for loop in order:
                    result = fresh(eng).generate(prompts, params, loop, arrivals=times)
                    row = row_from_metrics(result.loop, rate, len(times), result.metrics)
                    row["other_cpu_frac"] = result.host.get("other_cpu_frac")
                    row["prefix_hit_rate"] = result.metrics.get("prefix_hit_rate")
                    row["prefill_ms_p50"] = _prefill_ms_p50(result.timeline)
                    row["ttft_drift"] = ttft_drift(result.outputs)
                    rows.append({**row, "repeat": repeat})
        env = eng.env_info()
    return rows, env


def _prefill_ms_p50(spans) -> float | None:
    """The median prefill forward on the engine stream (what the cache shortens), in ms."""
    got = [s.end_us - s.start_us for s in spans
           if s.lane == Lane.ENGINE_STREAM and s.phase == Phase.PREFILL]
    return statistics.median(got) / 1e3 if got else None


def compare_caches(rows: list[dict]) -> str:
    """TTFT p50 and output tok/s without the cache against with it, per rate and loop (median
    over repeats, [min-max] of the ratio over repeats paired by repeat)."""
    lines = ["| rate | loop | TTFT p50 ms, cache off -> on | TTFT off / on | median prefill ms, "
             "off -> on | output tok/s, off -> on | prefix hit rate | TTFT late / early third, "
             "off -> on |",
             "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["request_rate"] if r["request_rate"] is not None else float("inf"),
                    r["loop"]) for r in rows})
    for rate, loop in keys:
        pick = {cache: sorted((r for r in rows if r["loop"] == loop and r["prefix_cache"] == cache
                               and (r["request_rate"] or float("inf")) == rate),
                              key=lambda r: r["repeat"]) for cache in (False, True)}
        off, on = pick[False], pick[True]
        if not off or not on:
            continue
        ratios = [a["ttft_ms_p50"] / b["ttft_ms_p50"] for a, b in zip(off, on)
                  if b["ttft_ms_p50"]]
        med = statistics.median
        lines.append(f"| {rate_label(rate)} | {loop} | {_median_cell(off, 'ttft_ms_p50')} -> "
                     f"{_median_cell(on, 'ttft_ms_p50')} | {med(ratios):.2f}x [{min(ratios):.2f}-"
                     f"{max(ratios):.2f}] | {_median_cell(off, 'prefill_ms_p50')} -> "
                     f"{_median_cell(on, 'prefill_ms_p50')} | "
                     f"{_median_cell(off, 'output_tokens_per_s', '{:.0f}')} -> "
                     f"{_median_cell(on, 'output_tokens_per_s', '{:.0f}')} | "
                     f"{100 * med(r['prefix_hit_rate'] or 0 for r in on):.0f}% | "
                     f"{_median_cell(off, 'ttft_drift', '{:.2f}')} -> "
                     f"{_median_cell(on, 'ttft_drift', '{:.2f}')} |")
    return "\n".join(lines)


def _median_cell(group: list[dict], key: str, fmt: str = "{:.1f}") -> str:
    values = [r[key] for r in group if r.get(key) is not None]
    return fmt.format(statistics.median(values)) if values else "-"


def _times(rate: float, work: Workload) -> list[float]:
    """The rate's arrival times: a trace's own, or a Poisson process (the same for both loops)."""
    if work.arrivals_file:
        trace = load_trace(work.arrivals_file, rate, work.seed, limit=work.requests)
        return [a.at_s for a in trace]
    return poisson_times(rate, work.requests, work.seed)


def main(argv: list[str]) -> int:
    p = cli.parser("python -m bench rates", __doc__)
    p.add_argument("--rates", nargs="+", type=float, required=True, metavar="R",
                   help="request rates (req/s; inf = every request at once)")
    p.add_argument("--requests", type=int, default=32, help="requests per run")
    cli.add_device(p)
    p.add_argument("--model", default="bundled")
    p.add_argument("--batch", type=int, default=16, help="requests decoded together")
    p.add_argument("--extra-cpu-us", type=int, default=0, help="extra scheduler work a step")
    cli.add_work(p)
    p.add_argument("--seed", type=int, default=0, help="the arrival process's seed")
    p.add_argument("--arrivals", metavar="FILE", help="a trace file (times, lengths)")
    p.add_argument("--shared-prefix", type=int, default=0, metavar="N",
                   help="a system prompt of N tokens in front of every request")
    p.add_argument("--prefix-cache", choices=["on", "off", "both"], default="on",
                   help="with the radix prefix cache, without it, or both (compared)")
    p.add_argument("--json", metavar="PATH", help="write the rows (viz.latency draws them)")
    args = p.parse_args(argv)
    from engine.scheduler.arrivals import check_rate

    try:
        rates = tuple(check_rate(r, "--rates") for r in args.rates)
    except ValueError as error:
        print(f"python -m bench rates: {error}", file=sys.stderr)
        return 2
    caches = {"on": (True,), "off": (False,), "both": (False, True)}[args.prefix_cache]
    trace = (load_trace(args.arrivals, limit=args.requests, rate=rates[0]) if args.arrivals
             else [])
    work = cli.workload(args, requests=len(trace) or args.requests, arrivals=tuple(trace),
                        arrivals_file=args.arrivals, shared_prefix=max(args.shared_prefix, 0),
                        seed=args.seed)
    cuda = cli.device_of(args) == "cuda"
    return run(args.device, args.model, args.batch, args.extra_cpu_us,
               RateGrid(rates, args.repeats, caches), work, args.json, graph=cuda)
