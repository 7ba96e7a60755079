"""The page's default click, as a class runs it: the app and a browser on one machine.

    python -m studies clicks-in-a-browser --clicks 10 [--busy 0] [--lang en|zh]

Starts ``app.py``, opens the page in headless Chromium, waits for the warm-up and presses **Run**
``--clicks`` times, printing what a class sees above the fold: the headline's figures, whether the
run was marked disturbed, and whether the quiet recording was offered."""

from __future__ import annotations

import re
import signal
import subprocess

import texts  # the page's own words for a disturbed run, in each language
from bench import cli
from scripts.screenshots import free_port, serve_app
from studies.page_clicks import start_spinning, stop_spinning

RUN_TIMEOUT_MS = 300_000

# "Not a fair comparison: ", "这次比较不可信：": the opening of the page's headline for a disturbed run.
DISTURBED = {lang: texts.t(lang, "headline_busy").split("{why}")[0].removeprefix("<b>")
             for lang in texts.LANGUAGES}


def _click(page) -> dict:
    """Press Run, wait for the new run's status, and read what the page says."""
    page.click("#run")
    page.wait_for_selector("#status .status-ok", state="detached", timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector("#status .status-ok, #status .status-error", timeout=RUN_TIMEOUT_MS)
    headline = page.locator("#headline").inner_text()
    busy = re.search(r"(\d+)%", headline) if any(d in headline for d in DISTURBED.values()) else None
    gain = re.search(r"(\d+\.\d+)\s*×", headline)
    idle = re.search(r"(\d+(?:\.\d+)?) → (\d+(?:\.\d+)?) ms", headline)
    return {"ok": page.locator("#status .status-ok").count() > 0,
            "gain": float(gain.group(1)) if gain else None,
            "idle": f"{idle.group(1)} → {idle.group(2)} ms" if idle else None,
            "disturbed": busy is not None or any(d in headline for d in DISTURBED.values()),
            "busy_pct": int(busy.group(1)) if busy else None,
            "way_on": page.locator("#quiet-recording").is_visible()}


def main(argv: list[str]) -> int:
    parser = cli.parser("python -m studies clicks-in-a-browser", __doc__)
    parser.add_argument("--clicks", type=int, default=10)
    parser.add_argument("--busy", type=int, default=0, help="spinning programs beside them")
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    parser.add_argument("--port", type=int, default=None, help="default: a free one")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    port = args.port or free_port()
    app = serve_app(port)
    spinners: list[subprocess.Popen] = []
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}")
            page.wait_for_selector("#run")
            if args.lang == "zh":
                page.locator("#language label", has_text="中文").click()
            spinners = start_spinning(args.busy)
            for i in range(args.clicks):
                row = _click(page)
                rows.append(row)
                print(f"click {i + 1:2d}: " + ("finished" if row["ok"] else "REFUSED")
                      + f", idle {row['idle'] or '-'}, overlap "
                      + (f"{row['gain']:.2f}x" if row["gain"] else "no figure")
                      + (f", disturbed (other programs {row['busy_pct']}%)" if row["disturbed"]
                         else ", quiet")
                      + (", quiet recording offered" if row["way_on"] else ""), flush=True)
            browser.close()
    finally:
        stop_spinning(spinners)
        app.send_signal(signal.SIGINT)
        try:
            app.wait(30)
        except subprocess.TimeoutExpired:
            app.kill()
    shown = sum(1 for r in rows if r["ok"] and r["gain"] and r["idle"])
    disturbed = [r for r in rows if r["disturbed"]]
    print(f"\n{len(rows)} clicks ({args.busy} spinning programs beside app and browser): "
          f"{shown} showed the idle time and overlap's gain; {len(disturbed)} were marked "
          f"disturbed, {sum(r['way_on'] for r in disturbed)} of them offering the quiet recording")
    return 0 if shown == len(rows) and all(r["way_on"] for r in disturbed) else 1

