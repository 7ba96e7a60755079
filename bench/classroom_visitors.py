"""The classroom benchmark's visitors: real pages in Chromium, and ``gradio_client`` callers. Each
presses Run with the defaults at its moment (``at``, on one clock for all) and notes what it was
told, and when (``Seen``). A page is watched by a few lines of JS in it (``WATCH_JS``), which also
presses Run; a ``gradio_client`` visitor makes the Run button's calls and asks where it stands each
second, as the page's line timer does. The words looked for are the page's English ones and its
data attributes."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from scripts.screenshots import CHROMIUM, CHROMIUM_ARGS

PRESS_RUN = "Press Run"          # the idle page's words: never while a run waits in line
POLL_S = 0.05
TICK_S = 1.0                     # the page's line timer asks where its run stands this often


@dataclass
class Seen:
    """What one visitor's page showed, with times in seconds since the epoch."""

    position: int                              # the order of the clicks, 1 first
    kind: str                                  # "browser" | "client"
    click: float | None = None
    places: list[tuple[float, int, int]] = field(default_factory=list)   # (when, place, s)
    recording: float | None = None             # the recording first drawn
    start: float | None = None                 # its own run's first status
    chart: float | None = None                 # its own timeline first drawn
    done: float | None = None
    press_run_waiting: bool = False
    error: str = ""

    def place(self, when: float, place: int, eta: int) -> None:
        if not self.places or self.places[-1][1:] != (place, eta):
            self.places.append((when, place, eta))


# ---- gradio_client ---------------------------------------------------------------------------

LINE = re.compile(r'data-line-place="(\d+)" data-line-eta="(\d+)"')


def _payload(value: Any) -> dict[str, Any] | None:
    """The live canvas's payload in one output (a value or an update), parsed; None: none."""
    if isinstance(value, dict):
        value = value.get("value", value.get("props", {}).get("value"))
    if not isinstance(value, str) or not value.startswith("{"):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def observe(seen: Seen, view: Any, when: float) -> None:
    """One view of the Run handler as ``gradio_client`` hands it over (status, timeline, live
    canvas, step window, ...): what it tells the visitor."""
    view = view if isinstance(view, (list, tuple)) else [view]
    status = view[0] if isinstance(view[0], str) else ""
    line = LINE.search(status)
    if line:
        seen.place(when, int(line.group(1)), int(line.group(2)))
        if PRESS_RUN in json.dumps(view, default=str):
            seen.press_run_waiting = True
    elif 'class="bar"' in status and seen.start is None:
        seen.start = when
    payload = _payload(view[2]) if len(view) > 2 else None
    if payload is not None and any(run["spans"] for run in payload.get("runs", [])):
        if payload.get("recording"):
            seen.recording = seen.recording or when
        elif seen.start is not None:
            seen.chart = seen.chart or when
    if "status-error" in status and not seen.error:
        seen.error = re.sub(r"<[^>]+>", "", status)[:160]
    elif "status-ok" in status and seen.start is not None:
        seen.done = seen.done or when


def make_client(url: str, budget_s: float) -> Any:
    """A ``gradio_client`` visitor with its own session, no downloads, no analytics."""
    from gradio_client import Client

    # ssl_verify off: the app is served over plain HTTP on this machine, and gradio_client
    # makes an HTTP client for each call, which with verification on reads the certificate
    # authorities anew each time (most of a class's own CPU time, and none of the server's).
    client = Client(url, verbose=False, download_files=False, analytics_enabled=False,
                    ssl_verify=False, httpx_kwargs={"timeout": budget_s})
    # The server makes a visitor's session when it first hears from it: a page does that
    # when it loads, long before Run; so does this visitor, by asking where it stands.
    client.predict("English", api_name="/line_said")
    return client


def client_visitor(client: Any, seen: Seen, at: float, deadline: float) -> None:
    """Press Run at ``at`` through ``client`` and watch the views until done or ``deadline``."""
    time.sleep(max(0.0, at - time.time()))
    seen.click = time.time()
    try:
        job = client.submit(api_name="/run_live")
        read, tick = 0, seen.click + TICK_S
        while time.time() < deadline:
            finished = job.done()
            views = job.outputs()
            for view in views[read:]:
                observe(seen, view, time.time())
            read = len(views)
            if seen.places and seen.start is None and not finished and time.time() >= tick:
                # What the page's line timer asks each second, in this visitor's session.
                said = client.predict("English", api_name="/line_said")
                observe(seen, [said], time.time())
                tick = time.time() + TICK_S
            if finished:
                error = job.exception()
                if error is not None and not seen.error:
                    seen.error = f"{type(error).__name__}: {error}"[:160]
                if seen.done is None and not seen.error:      # ended some other way: how
                    last = views[-1] if views else [""]
                    said = last[0] if isinstance(last, (list, tuple)) else last
                    seen.error = "ended: " + re.sub(r"<[^>]+>", "", str(said))[:120]
                return
            time.sleep(POLL_S)
        seen.error = seen.error or "not done within the budget"
    except Exception as error:  # noqa: BLE001 - a visitor's failure is a row of the table
        seen.error = f"{type(error).__name__}: {error}"[:160]


# ---- real pages --------------------------------------------------------------------------------

# Installed in a page before the class: it presses Run at ``at`` (ms since the epoch) and notes,
# every 100 ms, what the page shows (window.__class).
WATCH_JS = """(at) => {
  const log = window.__class = {click: null, places: [], recording: null, start: null,
                                chart: null, done: null, error: '', pressRun: false};
  const view = document.querySelector('#run-view'), status = document.querySelector('#status');
  let pressRunBefore = false;            // "Press Run" at the previous tick too: on screen
  const look = (tick) => {
    const now = Date.now(), canvas = document.querySelector('#live-chart canvas');
    const spans = canvas ? Number(canvas.dataset.spans || 0) : 0;
    const recording = !!canvas && canvas.dataset.recording === '1';
    const line = status.querySelector('[data-line-place]');
    if (line) {
      const place = Number(line.dataset.linePlace), eta = Number(line.dataset.lineEta);
      const last = log.places[log.places.length - 1];
      if (!last || last[1] !== place || last[2] !== eta) log.places.push([now, place, eta]);
      if (tick === true) {                // a frame's flash between two updates is not seen
        const said = view.innerText.includes('PRESS_RUN');
        if (said && pressRunBefore) log.pressRun = true;
        pressRunBefore = said;
      }
    } else if (status.querySelector('.bar') && log.start === null) log.start = now;
    if (recording && spans > 0 && log.recording === null) log.recording = now;
    if (!recording && spans > 0 && log.start !== null && log.chart === null) log.chart = now;
    if (status.querySelector('.status-error') && !log.error) log.error = status.innerText.slice(0, 160);
    if (status.querySelector('.status-ok') && log.start !== null && log.done === null) log.done = now;
    if (status.querySelector('.status-warn') && log.start !== null && !log.error)
      log.error = 'ended: ' + status.innerText.slice(0, 120);
  };
  setInterval(() => look(true), 100);
  // and at each change of the canvas or the status, so a short-lived state is not missed
  new MutationObserver(() => look(false)).observe(view, {subtree: true, childList: true, attributes: true,
                                            attributeFilter: ['data-spans', 'data-recording']});
  setTimeout(() => { document.querySelector('#run').click(); log.click = Date.now(); look(); },
             Math.max(0, at - Date.now()));
}""".replace("PRESS_RUN", PRESS_RUN)


class BrowserVisitors(threading.Thread):
    """Real pages, one browser context each, driven from one thread (Playwright's sync API keeps
    to its thread): ``ready``, then ``begin`` gives each its moment, and it closes on ``release``."""

    def __init__(self, url: str, seen: list[Seen], deadline: float) -> None:
        super().__init__(name="browsers", daemon=True)
        self.url, self.seen, self.deadline = url, seen, deadline
        self.ready = threading.Event()            # every page is loaded
        self.done = threading.Event()             # every page is done, or the budget is spent
        self.release = threading.Event()          # the browser may close
        self._at: list[float] = []
        self._go = threading.Event()
        self.error = ""

    def begin(self, at: list[float]) -> None:
        self._at = at
        self._go.set()

    def run(self) -> None:
        try:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                                 args=CHROMIUM_ARGS)
                pages = [self._open(browser) for _ in self.seen]
                self.ready.set()
                self._go.wait(max(0.0, self.deadline - time.time()))
                for page, at in zip(pages, self._at):
                    page.evaluate(WATCH_JS, at * 1000)
                self._watch(pages)
                self.done.set()
                self.release.wait(max(0.0, self.deadline - time.time()) + 60)
                browser.close()
        except Exception as error:  # noqa: BLE001 - said in the report, the clients go on
            self.error = f"{type(error).__name__}: {error}"[:300]
            for seen in self.seen:
                seen.error = seen.error or "the browser failed"
        finally:
            self.ready.set()
            self.done.set()

    def _open(self, browser: Any) -> Any:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.set_default_timeout(max(1.0, self.deadline - time.time()) * 1000)
        page.goto(self.url)
        page.wait_for_selector("#status")
        return page

    def _watch(self, pages: list[Any]) -> None:
        while time.time() < self.deadline:
            logs = [page.evaluate("window.__class") for page in pages]
            for seen, log in zip(self.seen, logs):
                _copy(seen, log)
            if all(log["done"] or log["error"] for log in logs):
                return
            time.sleep(0.5)
        for seen in self.seen:
            if seen.done is None:
                seen.error = seen.error or "not done within the budget"


def _copy(seen: Seen, log: dict[str, Any]) -> None:
    """A page's own notes (ms since the epoch) into its ``Seen``."""
    def s(ms: float | None) -> float | None:
        return None if ms is None else ms / 1000

    seen.click, seen.recording, seen.start = s(log["click"]), s(log["recording"]), s(log["start"])
    seen.chart, seen.done = s(log["chart"]), s(log["done"])
    seen.places = [(ms / 1000, place, eta) for ms, place, eta in log["places"]]
    seen.press_run_waiting, seen.error = bool(log["pressRun"]), log["error"] or seen.error
