"""The page's first click on a GPU, through the page's own handler, with its spread over clicks.

    python -m studies gpu-first-click --clicks 3 --out DIR      # on a machine with CUDA

The app's warm-up, the controls as a page load sets them, then Run pressed ``--clicks`` times
(``ui.live_runs.run_live``). Per click and as median [min-max]: GPU busy, the speedup per decode
step, the loops' prefills, and whether every click met ``TARGETS``; the first record goes to DIR.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from bench import cli
from record.schema import Lane, Phase
from studies.page_clicks import click
from studies.peers.table import gpu_tag

# What a visitor's first click on a GPU should show over each click's steady window (the page
# sizes its extra CPU work for 1.5x; unequal prefills would mean the loops ran different work).
TARGETS = {
    "overlap busy, all streams": (0.95, "min"), "overlap busy, engine stream": (0.90, "min"),
    "speedup per decode step": (1.5, "min"), "prefill normal / overlap": (0.2, "within"),
}


def _median_us(run: dict, phase: str) -> float:
    spans = [s["end_us"] - s["start_us"] for s in run["spans"]
             if s["lane"] == Lane.ENGINE_STREAM and s["phase"] == phase]
    return statistics.median(spans) if spans else float("nan")


def _row(record: dict) -> dict[str, float]:
    from record.metrics import compare_runs

    normal, overlap = record["runs"]
    n, o = normal["metrics"], overlap["metrics"]
    speedups = compare_runs(normal, overlap)
    return {
        "normal busy, all streams": n["gpu_busy_frac"],
        "overlap busy, all streams (whole run)": o["gpu_busy_frac"],
        "overlap busy, engine stream (whole run)": o["engine_busy_frac"],
        "normal busy, steady": n["steady_busy_frac"],
        "overlap busy, all streams": o["steady_busy_frac"],
        "overlap busy, engine stream": o["steady_engine_busy_frac"],
        "speedup per decode step": speedups["measured_speedup"],
        "predicted": speedups["predicted_speedup"],
        "whole-run speedup (tokens/s)": speedups["whole_run_speedup"] or 0,
        "prefill us, normal": _median_us(normal, Phase.PREFILL),
        "prefill us, overlap": _median_us(overlap, Phase.PREFILL),
        "decode us, normal": _median_us(normal, Phase.DECODE),
        "decode us, overlap": _median_us(overlap, Phase.DECODE),
        "gap between decode forwards us, overlap": o.get("decode_gap_us_p50") or 0,
    }


def main(argv: list[str]) -> int:
    parser = cli.parser("python -m studies gpu-first-click", __doc__)
    parser.add_argument("--clicks", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="where the first record goes")
    parser.add_argument("--name", default=None,
                        help="the record's file name (default: GPU-first-click-defaults.json, "
                             "the GPU's model first, as h100-first-click-defaults.json)")
    parser.add_argument("--allow-cpu", action="store_true")
    args = parser.parse_args(argv)

    from ui import inputs, live_runs, presets, scheduler_link
    from ui.controls import Controls

    t0 = time.perf_counter()
    cuda = scheduler_link.scheduler().ready().cuda
    if not cuda and not args.allow_cpu:
        print("no CUDA GPU here (--allow-cpu runs the same on this CPU)")
        return 2
    live_runs.prewarm()                       # what app.py starts in the background
    print(f"warm-up (scheduler process, engine, probe): {time.perf_counter() - t0:.1f} s")
    d = inputs.DEFAULTS
    slider, graphs, said = presets.device_defaults("auto", d["extra_cpu_us"], False, "English")
    values = Controls.page_defaults(cuda_graph=graphs.get("value", False),
                                    extra_cpu_us=slider.get("value", d["extra_cpu_us"]))
    print("the page's sizing line: " + said.strip("*"))
    print(f"controls after the page load: extra CPU work {values.extra_cpu_us} us, CUDA graphs "
          f"{values.cuda_graph}, {values.requests} requests, batch {values.batch}, "
          f"{values.max_new} new tokens, stop early\n")
    rows, records = [], []
    for i in range(args.clicks):
        started = time.perf_counter()
        records.append(click(values)["record"])
        seconds = time.perf_counter() - started
        row = _row(records[-1])
        rows.append(row)
        print(f"click {i + 1} ({seconds:.1f} s): " + ", ".join(
            f"{k} {v:.3f}" if v < 10 else f"{k} {v:.1f}" for k, v in row.items()), flush=True)
    first = records[0]
    print(f"\n{first['env'].get('device_name', '?')}, the page's defaults, {args.clicks} clicks: "
          "median [min-max]\n\n| figure | median [min-max] |\n|---|---|")
    for key in rows[0]:
        vals = [r[key] for r in rows]
        fmt = "{:.1%}" if "busy" in key else ("{:.2f}x" if "speedup" in key or key == "predicted"
                                              else "{:.1f}")
        print(f"| {key} | {fmt.format(statistics.median(vals))} "
              f"[{fmt.format(min(vals))}-{fmt.format(max(vals))}] |")
    print()
    for key, (target, how) in TARGETS.items():
        if how == "within":
            vals = [abs(r["prefill us, normal"] / r["prefill us, overlap"] - 1) for r in rows]
            ok = all(v <= target for v in vals)
            print(f"{'met' if ok else 'NOT met'}: median prefill spans within {target:.0%} in "
                  f"every click (largest difference {max(vals):.1%})")
        else:
            vals = [r[key] for r in rows]
            ok = min(vals) >= target
            print(f"{'met' if ok else 'NOT met'}: {key} >= {target:g} in every click "
                  f"(lowest {min(vals):.3f})")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        first["env"]["made_by"] = (
            "python -m studies gpu-first-click: the page's handler (ui.live_runs.run_live) with "
            "the page's defaults after the warm-up, first click")
        name = args.name or (gpu_tag(str(first["env"].get("device_name", "")))
                             + "-first-click-defaults.json")
        (args.out / name).write_text(json.dumps(first, separators=(",", ":")))
        print(f"\nfirst click's record: {args.out / name}")
    scheduler_link.shutdown()
    return 0

