"""The page's default click beside busy loops: does overlap stay faster per decode step, and when
it does not, does the page refuse to claim it?

    python scripts/click_beside_busy_loop.py --busy 1 --clicks 3

Starts ``--busy`` programs that only spin (``python -c "while True: pass"``), runs the page's
handler (``ui.live_runs.run_live``, the real scheduler and device processes) with the page's defaults
``--clicks`` times, then ends the spinners. For each click it prints the overlap run's speed per
decode step against the serial run's (``record.metrics.compare_runs``), what the runs measured of
the machine (``record.host_load``: other programs' share of the cores, the device process's share
of its working time) and the headline the page showed: a claim, or a refusal to compare.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _click(controls) -> dict:
    from ui import live_runs
    from ui.view import MainView

    names = [f.name for f in fields(MainView)]
    final = None
    for out in live_runs.run_live(controls):
        final = dict(zip(names, out))
    if not final or not isinstance(final["record"], dict):
        raise SystemExit(f"the click did not finish: {final and final['status']}")
    return final


def _plain(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=1, help="spinning programs beside the app")
    parser.add_argument("--clicks", type=int, default=3)
    args = parser.parse_args()

    from record.metrics import compare_runs
    from ui import live_runs, scheduler_link
    from ui.controls import Controls

    live_runs.prewarm()                                   # what app.py starts in the background
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.busy)]
    speedups = []
    try:
        time.sleep(1.0)
        for i in range(args.clicks):
            final = _click(Controls.page_defaults(device="cpu"))
            normal, overlap = final["record"]["runs"]
            speedup = compare_runs(normal, overlap)["measured_speedup"]
            speedups.append(speedup)
            loads = [(run.get("host") or {}) for run in (normal, overlap)]
            print(f"click {i + 1}: overlap {speedup:.2f}x per decode step; other programs "
                  + " / ".join(f"{100 * h.get('other_cpu_frac', float('nan')):.0f}%" for h in loads)
                  + " of the cores (serial / overlap run); device process had its core "
                  + " / ".join(f"{100 * h.get('device_cpu_frac', float('nan')):.0f}%" for h in loads)
                  + " of its working time", flush=True)
            print(f"  headline: {_plain(final.get('headline') or '')}", flush=True)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        scheduler_link.shutdown()
    print(f"\n{args.busy} busy loop(s), {args.clicks} clicks: overlap per decode step median "
          f"{statistics.median(speedups):.2f}x [{min(speedups):.2f}-{max(speedups):.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
