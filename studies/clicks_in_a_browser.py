"""The page's default first click, as a class makes it: the app and a browser on one machine.

    python -m studies clicks-in-a-browser --clicks 10 [--busy 0] [--lang en|zh]

Each of ``--clicks`` visitors opens the page afresh in headless Chromium and presses **Run** once;
prints what a class sees above the fold. Passes where at least 9 in 10 clicks show overlap faster
per decode step and every click shows the lesson (a fair comparison, or the recording beside).
"""

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


def _first_click(browser, url: str, lang: str) -> dict:
    """A new visitor: open the page, press Run once, read what the page says."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(url)
        page.wait_for_selector("#run")
        if lang == "zh":
            page.locator("#language label", has_text="中文").click()
        page.click("#run")
        page.wait_for_selector("#status .status-ok, #status .status-error",
                               timeout=RUN_TIMEOUT_MS)
        return _read(page)
    finally:
        page.close()


def _read(page) -> dict:
    """What the page says of the run that has just ended."""
    headline = page.locator("#headline").inner_text()
    disturbed = any(d in headline for d in DISTURBED.values())
    busy = re.search(r"(\d+)%", headline) if disturbed else None
    gain = re.search(r"(\d+\.\d+)\s*×", headline)
    idle = re.search(r"(\d+(?:\.\d+)?) → (\d+(?:\.\d+)?) ms", headline)
    return {"ok": page.locator("#status .status-ok").count() > 0,
            "gain": float(gain.group(1)) if gain else None,
            "idle": f"{idle.group(1)} → {idle.group(2)} ms" if idle else None,
            "disturbed": disturbed,
            "busy_pct": int(busy.group(1)) if busy else None,
            "beside": page.locator("#headline .ov-headline-quiet").count() > 0
            and page.locator("#live-chart").is_visible()}


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
            spinners = start_spinning(args.busy)
            for i in range(args.clicks):
                row = _first_click(browser, f"http://127.0.0.1:{port}", args.lang)
                rows.append(row)
                print(f"click {i + 1:2d}: " + ("finished" if row["ok"] else "REFUSED")
                      + f", idle {row['idle'] or '-'}, overlap "
                      + (f"{row['gain']:.2f}x" if row["gain"] else "no figure")
                      + (f", disturbed (other programs {row['busy_pct']}%)" if row["disturbed"]
                         else ", fair")
                      + (", quiet recording beside" if row["beside"] else ""), flush=True)
            browser.close()
    finally:
        stop_spinning(spinners)
        app.send_signal(signal.SIGINT)
        try:
            app.wait(30)
        except subprocess.TimeoutExpired:
            app.kill()
    faster = sum(1 for r in rows if r["ok"] and (r["gain"] or 0.0) > 1.0)
    taught = sum(1 for r in rows if r["ok"] and r["gain"] and r["idle"]
                 and (not r["disturbed"] or r["beside"]))
    disturbed = sum(r["disturbed"] for r in rows)
    print(f"\n{len(rows)} first clicks ({args.busy} spinning programs beside app and browser): "
          f"{faster} showed overlap faster per decode step; {disturbed} were marked disturbed; "
          f"{taught} showed the lesson (a fair comparison, or the quiet recording beside)")
    return 0 if 10 * faster >= 9 * len(rows) and taught == len(rows) else 1
