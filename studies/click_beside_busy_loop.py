"""The page's default click beside programs that only spin: the gain, and what the page says.

    python -m studies click-beside-busy-loop --busy 1 --clicks 3

Starts ``--busy`` spinning programs, runs the page's handler with its defaults ``--clicks`` times,
and prints per click the speedup per decode step, what the runs measured of the machine
(``record.host_load``) and the headline the page showed: a claim, or a refusal to compare."""

from __future__ import annotations

import re
import statistics
import time

from bench import cli
from studies.page_clicks import click, start_spinning, stop_spinning


def _plain(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).strip()


def main(argv: list[str]) -> int:
    parser = cli.parser("python -m studies click-beside-busy-loop", __doc__)
    parser.add_argument("--busy", type=int, default=1, help="spinning programs beside the app")
    parser.add_argument("--clicks", type=int, default=3)
    args = parser.parse_args(argv)

    from record.metrics import compare_runs
    from ui import live_runs, scheduler_link
    from ui.controls import Controls

    live_runs.prewarm()                                   # what app.py starts in the background
    spinners = start_spinning(args.busy)
    speedups: list[float] = []
    try:
        time.sleep(1.0)
        for i in range(args.clicks):
            final = click(Controls.page_defaults(device="cpu"))
            normal, overlap = final["record"]["runs"]
            speedup = compare_runs(normal, overlap)["measured_speedup"] or float("nan")
            speedups.append(speedup)
            loads = [(run.get("host") or {}) for run in (normal, overlap)]
            print(f"click {i + 1}: overlap {speedup:.2f}x per decode step; other programs "
                  + " / ".join(f"{100 * h.get('other_cpu_frac', float('nan')):.0f}%" for h in loads)
                  + " of the cores (serial / overlap run); device process had its core "
                  + " / ".join(f"{100 * h.get('device_cpu_frac', float('nan')):.0f}%" for h in loads)
                  + " of its working time", flush=True)
            print(f"  headline: {_plain(final.get('headline') or '')}", flush=True)
    finally:
        stop_spinning(spinners)
        scheduler_link.shutdown()
    print(f"\n{args.busy} busy loop(s), {args.clicks} clicks: overlap per decode step median "
          f"{statistics.median(speedups):.2f}x [{min(speedups):.2f}-{max(speedups):.2f}]")
    return 0

