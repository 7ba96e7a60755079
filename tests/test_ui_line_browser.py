"""The engine's line in real browsers: two visitors on one server (``python app.py``), each in
a Chromium page of their own. B's Stop, pressed while A's run draws, leaves A's run to finish; B's
Stop while B waits in line takes B's run out of the line and nobody else's; a page closed while
waiting leaves the line.

A's run is made long by the clock, not by the machine's speed: its requests arrive over half a
minute (seed 0: the last one comes 33 s after the first), so whatever B does in the meantime
happens while A's run is drawing. Every other wait is bounded generously (a busy 2-core machine
passes; a hang fails), and nothing is judged by how long it took.
"""

from __future__ import annotations

import pytest
from test_app_browser import (  # noqa: F401 - the fixtures: one app server, one browser
    BUSY_WAIT_MS,
    RUN_TIMEOUT_MS,
    SCREENSHOTS,
    browser,
    server,
)

# Watches a page's status line for the whole test: every text it showed, whether it ever showed
# a run's progress bar (a run of this page started), whether it ever said where it stands, and
# each place and estimate it was told.
WATCH_JS = """() => {
  window.__said = []; window.__ran = false; window.__placed = false; window.__told = [];
  const status = document.querySelector('#status');
  const look = () => {
    window.__said.push(status.innerText);
    if (status.querySelector('.bar')) window.__ran = true;
    const line = status.querySelector('[data-line-place]');
    if (line) {
      window.__placed = true;
      window.__told.push([Number(line.dataset.linePlace), Number(line.dataset.lineEta)]);
    }
  };
  new MutationObserver(look).observe(status, {subtree: true, childList: true, characterData: true});
}"""
OWN_SPANS_JS = ("() => { const c = document.querySelector('#live-chart canvas');"
                " return !!c && Number(c.dataset.spans || 0) > 0 && !c.dataset.recording; }")
RECORDING_JS = ("() => { const c = document.querySelector('#live-chart canvas');"
                " return !!c && c.dataset.recording === '1' && Number(c.dataset.spans || 0) > 0; }")


def _visitor(browser, url):      # noqa: F811 - the fixture, passed in
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(BUSY_WAIT_MS)
    page.goto(url)
    page.wait_for_selector("#status")
    page.evaluate(WATCH_JS)
    return page


def _long_run(page) -> None:
    """Start the overlap loop alone on 3 requests that arrive at 0.1 per second (over 33 s),
    and wait until it draws."""
    page.locator("#loops label", has_text="normal (serial)").click()
    page.fill("#requests input", "3")
    page.locator("#more-settings").get_by_text("More settings").click()
    _type(page, "#request-rate input", "0.1")
    page.click("#run")
    page.wait_for_function(OWN_SPANS_JS, timeout=RUN_TIMEOUT_MS)          # it draws
    assert "the requests arrive over about 30 s" in page.inner_text("#status")


def _type(page, box: str, value: str) -> None:
    """Type ``value`` into a number box and leave it; again where the box was drawn anew under
    the typing or just after it (the folded settings are drawn when first opened, and on a busy
    machine that may land after the typing), as a person would: done when the box still shows
    the value a moment later."""
    for _ in range(40):
        page.fill(box, value)
        page.locator(box).press("Tab")
        page.wait_for_timeout(500)
        if page.input_value(box) == value:
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"{box} does not keep {value!r}")


def _in_line(page, other) -> None:
    """Press Run on ``page`` and wait until it is told its place (saying what both pages said,
    should it never be)."""
    page.click("#run")
    try:
        page.wait_for_selector("#status [data-line-place]")
    except Exception as error:
        raise AssertionError(f"never told its place: {page.evaluate('window.__said')}; the "
                             f"other page says {other.inner_text('#status')!r}") from error


def _place(page) -> int:
    return int(page.get_attribute("#status [data-line-place]", "data-line-place"))


@pytest.fixture
def visitors(browser, server):   # noqa: F811 - the fixtures above
    pages = []

    def open_page():
        pages.append(_visitor(browser, server))
        return pages[-1]

    yield open_page
    for page in pages:
        if not page.is_closed():
            page.close()


def test_b_stops_while_a_runs_and_while_b_waits_a_runs_to_the_end_and_b_never_runs(visitors):
    a, b = visitors(), visitors()
    _long_run(a)                                                       # A's run draws
    b.click("#stop")                                                   # B has no run
    _in_line(b, a)                                                     # B joins the line
    assert _place(b) == 1 and "1st in line" in b.inner_text("#status")
    b.wait_for_function(RECORDING_JS)                  # meanwhile the same work, recorded
    assert "Press Run" not in b.inner_text("#run-view")
    b.screenshot(path=str(SCREENSHOTS / "line-b-waiting.png"), full_page=True)
    b.click("#stop")                                                   # B's Stop while B waits
    b.wait_for_function("document.querySelector('#status').innerText"
                        ".includes('your run left the line')")
    assert "Done" not in a.inner_text("#status")                       # A still running
    a.wait_for_function("document.querySelector('#status').innerText.includes('Done')",
                        timeout=RUN_TIMEOUT_MS)
    said = a.evaluate("window.__said")
    assert not [text for text in said if "Stopping" in text or "Stopped" in text], said
    # A runs again, with the defaults: were B's run still in line, it would run first (B's page
    # would show its progress) and A's page would say where it stands.
    a.evaluate(WATCH_JS)
    a.locator("#loops label", has_text="normal (serial)").click()
    _type(a, "#request-rate input", "0")
    a.click("#run")
    a.wait_for_function("document.querySelector('#status').innerText.includes('Done')",
                        timeout=RUN_TIMEOUT_MS)
    assert not a.evaluate("window.__placed")
    assert b.evaluate("window.__placed") and not b.evaluate("window.__ran")
    assert "your run left the line" in b.inner_text("#status")


def test_a_page_closed_while_waiting_leaves_the_line_and_the_next_moves_up(visitors):
    a, b, c = visitors(), visitors(), visitors()
    _long_run(a)
    _in_line(b, a)
    _in_line(c, a)
    assert _place(c) == 2
    b.close()                                                          # B's tab is closed
    c.wait_for_function("document.querySelector('#status [data-line-place]')"
                        "?.dataset.linePlace === '1'")
    assert "Done" not in a.inner_text("#status")                       # A still running
    # C's page is told each second where it stands: the estimate counts down while A runs.
    c.wait_for_function("() => new Set(window.__told.filter(t => t[0] === 1).map(t => t[1]))"
                        ".size >= 2")
    first_place = [eta for place, eta in c.evaluate("window.__told") if place == 1]
    assert first_place == sorted(first_place, reverse=True), first_place
    a.click("#stop")                                                   # A's own Stop
    a.wait_for_function("document.querySelector('#status').innerText.includes('Stopped')",
                        timeout=RUN_TIMEOUT_MS)
    c.wait_for_function("document.querySelector('#status').innerText.includes('Done')",
                        timeout=RUN_TIMEOUT_MS)                        # C's turn came
    assert c.evaluate("window.__ran")
