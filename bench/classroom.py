"""A class on one server: N visitors press Run with the page's defaults at about the same moment.

    python -m bench classroom --visitors 30 --browsers 3   # 3 Chromium pages, 27 gradio_client callers

After a teacher's run (the warm-up) the class clicks ``CLICK_GAP_S`` apart, so the line's order is
the table's; ``--browsers`` of them are real Chromium pages, the rest ``gradio_client`` callers.
Per position: when each thing the visitor was told came, and any error; then the slowest
recording, the server's peak memory and how busy the machine was."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import cli
from bench.classroom_visitors import (
    PRESS_RUN,
    BrowserVisitors,
    Seen,
    client_visitor,
    make_client,
)
from bench.classroom_watch import CpuShares, ServerWatch
from scripts.screenshots import free_port, serve_app

MOST_VISITORS = 64               # the engine's line holds this many waiting runs (ui.turns)
MOST_BROWSERS = 8
CLICK_GAP_S = 0.05               # between two visitors' clicks: "about the same moment"
RECORDING_WITHIN_S = 2.0         # a waiting page shows the recording this soon after its click
START_AFTER_S = 2.0              # the first click comes this long after every page is ready,
PAGE_SET_S = 1.5                 # and this much later for each page told its moment first


def run(visitors: int, browsers: int, budget_s: float) -> int:
    """The class, its table and summary; 0 where every visitor's run was done, else 1."""
    if not 1 <= visitors <= MOST_VISITORS or not 0 <= browsers <= min(visitors, MOST_BROWSERS):
        print(f"python -m bench classroom takes 1 to {MOST_VISITORS} visitors and 0 to "
              f"{MOST_BROWSERS} browsers (no more than visitors)", file=sys.stderr)
        return 2
    deadline = time.time() + budget_s
    log = Path(tempfile.mkdtemp(prefix="classroom-")) / "app.log"
    port = free_port()
    with log.open("w") as out:
        try:
            server = serve_app(port, out, budget_s)
        except RuntimeError:
            print(f"the app did not start (see its log {log})", file=sys.stderr)
            return 1
    try:
        return _class(f"http://127.0.0.1:{port}/", server.pid, visitors, browsers, deadline, log)
    finally:
        server.terminate()                       # an orderly stop (ui.stopping)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()


def _class(url: str, server_pid: int, visitors: int, browsers: int, deadline: float,
           log: Path) -> int:
    print(f"{os.cpu_count()} cores; load average at the start "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; app log {log}", flush=True)
    teacher = time.time()
    make_client(url, deadline - time.time()).submit(api_name="/run_live").result(
        timeout=max(1.0, deadline - time.time()))
    print(f"teacher's run (after the warm-up): done {time.time() - teacher:.1f} s after its "
          "click", flush=True)
    in_browser = _browser_positions(visitors, browsers)
    seen = [Seen(i + 1, "browser" if i in in_browser else "client") for i in range(visitors)]
    clients = {i: make_client(url, deadline - time.time()) for i in range(visitors)
               if i not in in_browser}
    pages = BrowserVisitors(url, [seen[i] for i in sorted(in_browser)], deadline)
    if in_browser:
        pages.start()
        pages.ready.wait(max(0.0, deadline - time.time()))   # every page loaded
    start = time.time() + START_AFTER_S + PAGE_SET_S * len(in_browser)
    at = [start + i * CLICK_GAP_S for i in range(visitors)]
    pages.begin([at[i] for i in sorted(in_browser)])
    watch = ServerWatch(server_pid)
    watch.start()
    threads = [threading.Thread(target=client_visitor, args=(client, seen[i], at[i], deadline),
                                daemon=True) for i, client in clients.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.time()))
    if in_browser:
        pages.done.wait(max(0.0, deadline - time.time()))
    shares = watch.stop()
    pages.release.set()
    if in_browser:
        pages.join(60)
    _table(seen)
    if pages.error:
        print(f"note: the browser failed: {pages.error}")
    clicks = [s.click for s in seen if s.click is not None]
    if clicks:
        late = max(s.click - at[s.position - 1] for s in seen if s.click is not None)
        print(f"the clicks came within {max(clicks) - min(clicks):.2f} s, meant {CLICK_GAP_S} s "
              f"apart in the order of the table (the latest {late:.2f} s after its moment)")
    return _summary(seen, watch, shares)


def _browser_positions(visitors: int, browsers: int) -> set[int]:
    """Where the real pages stand in line: first, last, and evenly between."""
    if browsers == 1:
        return {0}
    return {round(k * (visitors - 1) / (browsers - 1)) for k in range(browsers)}


def _after(seen: Seen, when: float | None) -> str:
    return "-" if when is None or seen.click is None else f"{when - seen.click:.1f}"


def _rise(seen: Seen) -> float:
    """The largest rise of the estimate while the visitor kept its place (0: it only fell)."""
    rises = [b[2] - a[2] for a, b in zip(seen.places, seen.places[1:]) if a[1] == b[1]]
    return max([0, *rises])


def _table(seen: list[Seen]) -> None:
    print("\n| pos | page | recording | first told | last told | start | first chart | done "
          "| estimate | Press Run | error |")
    print("|---:|---|---:|---|---|---:|---:|---:|---|---|---|")
    for s in seen:
        first = f"{s.places[0][1]}, {s.places[0][2]} s" if s.places else "-"
        last = f"{s.places[-1][1]}, {s.places[-1][2]} s" if s.places else "-"
        if not s.places:
            counted = "-"
        elif len(s.places) > 1 and s.places[-1][2] < s.places[0][2]:
            counted = "down" + (f" (rose {_rise(s)} s once)" if _rise(s) else "")
        else:
            counted = "did not move"
        print(f"| {s.position} | {s.kind} | {_after(s, s.recording)} | {first} | {last} "
              f"| {_after(s, s.start)} | {_after(s, s.chart)} | {_after(s, s.done)} | {counted} "
              f"| {'yes' if s.press_run_waiting else 'no'} | {s.error or '-'} |")
    print("\ntimes in s after the visitor's click; told: place in line, estimate")


def _summary(seen: list[Seen], watch: ServerWatch, shares: CpuShares) -> int:
    waited = [s for s in seen if s.places]
    done = sum(s.done is not None and not s.error for s in seen)
    late = [s.position for s in waited
            if s.recording is None or s.click is None or s.recording - s.click > RECORDING_WITHIN_S]
    slowest = max((s.recording - s.click for s in waited if s.recording and s.click),
                  default=0.0)
    still = [s.position for s in waited if len(s.places) < 2 or s.places[-1][2] >= s.places[0][2]]
    print(f"\ndone: {done} of {len(seen)}; errors: {sum(bool(s.error) for s in seen)}")
    print(f"waited in line: {len(waited)}; told place and estimate: {len(waited)}; estimate "
          f"counted down: {len(waited) - len(still)}{f' (not: {still})' if still else ''}")
    print(f"recording shown within {RECORDING_WITHIN_S:.0f} s of the click: "
          f"{len(waited) - len(late)} of {len(waited)} (slowest {slowest:.1f} s)"
          f"{f'; late: {late}' if late else ''}")
    print(f"'{PRESS_RUN}' in the run view while waiting: "
          f"{sum(s.press_run_waiting for s in seen)} pages")
    print(f"server peak memory (web server + scheduler + device process, PSS): "
          f"{watch.peak_mib:.0f} MiB")
    loads = watch.loads or [0.0]
    print(f"machine: load average (1 min) {min(loads):.2f} to {max(loads):.2f} during the class; "
          f"CPU busy {shares.busy:.0f}% of all cores: server {shares.server:.0f}%, "
          f"browsers {shares.browsers:.0f}%, gradio_client callers {shares.clients:.0f}%, "
          f"other programs {shares.others:.0f}%")
    return 0 if done == len(seen) else 1


def main(argv: list[str]) -> int:
    p = cli.parser("python -m bench classroom", __doc__)
    p.add_argument("--visitors", type=int, default=30, help="how many press Run (default 30)")
    p.add_argument("--browsers", type=int, default=3,
                   help="how many of them are real Chromium pages (default 3)")
    p.add_argument("--budget-s", type=float, default=900.0,
                   help="the whole class's bound in seconds (default 900)")
    args = p.parse_args(argv)
    return run(args.visitors, args.browsers, args.budget_s)
