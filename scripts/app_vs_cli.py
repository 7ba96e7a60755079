"""The app against the CLI on the same machine and workload: the numbers behind the README's
first-click caption and the walkthrough's live sections, with their spread.

    python scripts/app_vs_cli.py --clicks 5 --cli-runs 3
    python scripts/app_vs_cli.py --imports 5 --import-trace big.json.gz --build-trace 2


1. The CLI on the app's default workload (``python -m engine ... --prompt-words 24
   --stop-early``), ``--cli-runs`` times.
2. ``python app.py`` on a free port (how long until the page is served), then ``--clicks`` first
   clicks on Run with the defaults, each in a fresh headless Chromium page on this machine:
   when the first bars appeared, when the run finished, and the page's own figures.
Prints one table: overlap GPU busy (whole run and steady window), the speedup per decode step
(steady window, as the page's headline) and the whole run's tokens/s ratio, min-max over runs.

3. With ``--imports N``: N imports of ``--import-trace`` on the page's *Import a trace* tab, each
   in a fresh page: seconds from choosing the file to the status, and to both charts drawn.
   ``--build-trace K`` first writes that file from the real transformers ``generate`` trace in
   tests/data (its events K times over, each copy shifted after the last, ids kept unique):
   K = 2 gives a 3.4 MB gzip trace of 185k events.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from cli_spread import one_run, spread  # noqa: E402 - the CLI's side, one definition

from record.schema import Loop  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def cli_run() -> dict[str, float]:
    """One CLI run of the app's workload (``cli_spread.APP_WORKLOAD``); its figures."""
    return figures(one_run([]))


def figures(runs: list[dict]) -> dict[str, float]:
    """Busy and speedups of a record's normal and overlap runs (a record written by older code
    is brought up to date first, so both are measured by today's definitions)."""
    from record.metrics import compare_runs
    from record.run_record import upgrade_run

    runs = [upgrade_run(dict(r)) for r in runs]
    normal, overlap = ({r["loop"]: r for r in runs}[k]["metrics"] for k in (Loop.NORMAL, Loop.OVERLAP))
    c = compare_runs(normal, overlap)
    return {"busy": overlap["gpu_busy_frac"], "steady_busy": overlap["steady_busy_frac"],
            "normal_busy": normal["gpu_busy_frac"], "speedup": c["measured_speedup"],
            "predicted": c["predicted_speedup"], "whole": c["whole_run_speedup"]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(port: int, app_dir: Path = ROOT) -> tuple[subprocess.Popen, float]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=app_dir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read(100)
            return proc, time.monotonic() - started
        except OSError:
            if proc.poll() is not None or time.monotonic() - started > 120:
                raise RuntimeError("the app did not start") from None
            time.sleep(0.1)


def click(browser, url: str) -> dict[str, float]:
    """A first click on Run with the defaults: timings and the page's own figures."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(url)
        page.wait_for_selector("#run")
        page.wait_for_timeout(1000)
        t0 = time.monotonic()
        page.click("#run")
        # The first spans on the live canvas (it says how many it drew), or, in an app from
        # before the canvas (--app-dir), the first bars of the plotly timeline.
        page.wait_for_function("() => Number(document.querySelector('#live-chart canvas')"
                               "?.dataset.spans || 0) > 0 || document.querySelectorAll("
                               "'#timeline .barlayer .point').length > 0", timeout=120_000)
        first_bars = time.monotonic() - t0
        page.wait_for_selector("#status .status-ok", timeout=240_000)
        done = time.monotonic() - t0
        with page.expect_download() as download:       # the record the page offers
            page.click("#download-record")
        record = json.loads(Path(download.value.path()).read_text())
        return {**figures(record["runs"]), "first_bars_s": first_bars, "done_s": done}
    finally:
        page.close()


def build_trace(out: Path, copies: int,
                source: Path = ROOT / "tests" / "data" / "traces" / "hf-generate-qwen05-b8.json.gz"
                ) -> int:
    """A bigger real trace: ``source``'s events ``copies`` times, each copy after the last in
    time, its flow and correlation ids made unique; the bytes written (gzip)."""
    import gzip

    doc = json.loads(gzip.decompress(source.read_bytes()))
    events = doc["traceEvents"]
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
    period = 1.05 * (max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed)
                     - min(float(e["ts"]) for e in timed))
    out_events = [e for e in events if e.get("ph") == "M"]
    for copy in range(copies):
        shift = copy * 10_000_000
        for event in events:
            if event.get("ph") == "M":
                continue
            event = dict(event)
            if "ts" in event:
                event["ts"] = float(event["ts"]) + copy * period
            if copy and isinstance(event.get("id"), int):
                event["id"] += shift
            args = event.get("args")
            if copy and isinstance(args, dict) and isinstance(args.get("correlation"), int):
                event["args"] = dict(args, correlation=args["correlation"] + shift)
            out_events.append(event)
    data = gzip.compress(json.dumps({**doc, "traceEvents": out_events}).encode(), compresslevel=6)
    out.write_bytes(data)
    return len(data)


def import_once(browser, url: str, path: Path) -> dict[str, float]:
    """One import on the page: seconds to the status, and to both charts drawn."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(url)
        page.wait_for_selector("#run")
        page.get_by_role("tab", name="Import a trace").click()
        t0 = time.monotonic()
        page.set_input_files("#upload input[type=file]", str(path))
        page.wait_for_selector("#status .status-ok, #status .status-error", timeout=300_000)
        status = time.monotonic() - t0
        if page.locator("#status .status-error").count():
            raise RuntimeError(page.inner_text("#status"))
        page.wait_for_function("() => ['timeline', 'zoomed'].every(id => document.querySelector("
                               "'#' + id + ' .barlayer .trace'))", timeout=300_000)
        return {"status_s": status, "drawn_s": time.monotonic() - t0}
    finally:
        page.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=5)
    parser.add_argument("--cli-runs", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--imports", type=int, default=0,
                        help="import --import-trace this many times on the page (no clicks)")
    parser.add_argument("--import-trace", type=Path, default=Path("/tmp/overlap-demo-trace.json.gz"))
    parser.add_argument("--settle-s", type=float, default=20.0,
                        help="before the first import, let the app's background warm-up finish")
    parser.add_argument("--build-trace", type=int, default=0, metavar="K",
                        help="first write --import-trace from tests/data's generate trace, K copies")
    parser.add_argument("--app-dir", type=Path, default=ROOT,
                        help="the checkout whose app.py to serve (e.g. an older commit's "
                             "worktree, for a before/after comparison)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    if args.build_trace:
        size = build_trace(args.import_trace, args.build_trace)
        print(f"wrote {args.import_trace}: {size / 2**20:.2f} MiB")
    cli = [cli_run() for _ in range(args.cli_runs)]
    port = free_port()
    proc, served = start_app(port, args.app_dir)
    clicks, imports = [], []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            for _ in range(args.clicks):
                clicks.append(click(browser, f"http://127.0.0.1:{port}/"))
            if args.imports:
                time.sleep(args.settle_s)            # the warm-up builds the engine meanwhile
            for i in range(args.imports):
                imports.append(import_once(browser, f"http://127.0.0.1:{port}/",
                                           args.import_trace))
                print(f"  import {i + 1}: status {imports[-1]['status_s']:.1f} s, charts "
                      f"drawn {imports[-1]['drawn_s']:.1f} s", flush=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if imports:
        size = args.import_trace.stat().st_size / 2**20
        print(f"import of {args.import_trace.name} ({size:.2f} MiB) on the page, "
              f"{len(imports)} times: status {spread([r['status_s'] for r in imports], '.1f')} s, "
              f"charts drawn {spread([r['drawn_s'] for r in imports], '.1f')} s")
    print(f"machine: {os.cpu_count()} cores; app from {args.app_dir}; page served {served:.1f} s "
          "after `python app.py`")
    print("| source | runs | overlap busy | steady busy | normal busy | speedup per step | "
          "predicted | whole run | first bars s | done s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, rows in (("CLI", cli), ("app (first clicks)", clicks)):
        if not rows:                                # --cli-runs 0: the app alone
            continue
        cells = [spread([r["busy"] for r in rows], ".1%"),
                 spread([r["steady_busy"] for r in rows], ".1%"),
                 spread([r["normal_busy"] for r in rows], ".1%"),
                 spread([r["speedup"] for r in rows], ".2f", "x"),
                 spread([r["predicted"] for r in rows], ".2f", "x"),
                 spread([r["whole"] for r in rows], ".2f", "x")]
        times = [spread([r[k] for r in rows], ".1f") if k in rows[0] else "-"
                 for k in ("first_bars_s", "done_s")]
        print(f"| {name} | {len(rows)} | " + " | ".join(cells + times) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
