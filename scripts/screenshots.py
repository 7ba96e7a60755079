"""The classroom walkthrough's screenshots, taken from the real app in headless Chromium.

    python -m scripts.screenshots                # writes assets/screenshots/walkthrough-*.png
    python -m scripts.screenshots --help         # the flags for one section's pictures

Starts ``python app.py`` on a free port, drives it with Playwright as ``docs/walkthrough.md`` does,
saves one screenshot per step, and stops the server. The Chinese pictures need a CJK font where
Chromium runs (Debian: ``apt-get install fonts-noto-cjk``), or their text is boxes."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

from record.schema import Loop

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RUN_MS = 300_000


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_app(port: int, log: IO[str] | int = subprocess.DEVNULL,
              within_s: float = 90.0) -> subprocess.Popen:
    """``python app.py`` on 127.0.0.1:``port``, its output to ``log``, returned once the page
    answers (a RuntimeError if it dies or does not answer within ``within_s``)."""
    proc = subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1",
                                 "GRADIO_ANALYTICS_ENABLED": "False"})
    started = time.monotonic()
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read(100)
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() - started > within_s:
                proc.kill()
                raise RuntimeError("the app did not start") from None
            time.sleep(0.3)


def _union(page, selectors: list[str], path: Path, pad: int = 8) -> None:
    """One screenshot of the box around several elements (a caption and its chart)."""
    boxes = [page.evaluate("s => { const r = document.querySelector(s).getBoundingClientRect();"
                           " return [r.left + scrollX, r.top + scrollY, r.right + scrollX,"
                           " r.bottom + scrollY]; }", sel) for sel in selectors]
    x0, y0 = min(b[0] for b in boxes) - pad, min(b[1] for b in boxes) - pad
    x1, y1 = max(b[2] for b in boxes) + pad, max(b[3] for b in boxes) + pad
    page.screenshot(path=str(path), full_page=True,
                    clip={"x": max(x0, 0), "y": max(y0, 0), "width": x1 - x0, "height": y1 - y0})


def _settle(page, ms: int = 800) -> None:
    page.wait_for_timeout(ms)   # let plotly finish drawing


def _drag_zoom(page, plot: str, spans: list[tuple[float, float]]) -> None:
    """Drag across the first subplot, as a student zooms in: fractions of its width, in turn."""
    for a, b in spans:
        box = page.locator(f"{plot} .nsewdrag").first.bounding_box()
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + a * box["width"], y)
        page.mouse.down()
        page.mouse.move(box["x"] + b * box["width"], y, steps=8)
        page.mouse.up()
        _settle(page, 600)
    page.mouse.move(0, 0)                           # no hover label in the picture


def _set_number(page, selector: str, value: float) -> None:
    box = page.locator(selector)
    box.fill(str(value))
    box.press("Enter")


def _caption_has(page, text: str) -> None:
    page.wait_for_function("t => document.querySelector('#step-caption').innerText.includes(t)",
                           arg=text, timeout=60_000)


def _choose_replay_run(page, loop: str) -> None:
    page.locator("#replay-run input").click()
    page.get_by_role("option", name=loop, exact=True).click()
    _caption_has(page, "(normal loop)" if loop == Loop.NORMAL else f"({loop}")


def _teaching_step(page) -> int:
    """The first steady-state overlap step (from 10 on) where most of the CPU's processing hid
    under the forward and a stopped request rode along (★): one picture shows both ideas."""
    for step in range(10, 49):                      # the replay starts on the overlap run
        _set_number(page, "#step input[type=number]", step)
        _caption_has(page, f"Step {step} (")
        caption = page.inner_text("#step-caption")
        hidden = re.search(r"([0-9.]+) ms of the CPU's work ran hidden", caption)
        processed = re.search(r"processes B[0-9]+ \(([0-9.]+) ms\)", caption)
        if "★" in caption and hidden and processed \
                and float(hidden.group(1)) >= 0.8 * float(processed.group(1)):
            break
    _settle(page)
    return step


def _show_recorded(page, stem: str) -> None:
    """Choose a recorded run and wait until its timeline (a different time range) is drawn."""
    before = page.evaluate(_X_RANGE)
    page.get_by_role("tab", name="Recorded GPU runs").click()
    page.click("#recorded input")
    page.get_by_role("option", name=f"{stem}:", exact=False).first.click()
    page.wait_for_function(f"before => ({_X_RANGE})() !== before", arg=before, timeout=60_000)
    _settle(page)


def _zoom_steps(page, first: int, last: int) -> None:
    """Zoom the step view to steps first..last and wait until it is drawn."""
    _set_number(page, "#first-step input", first)
    _set_number(page, "#last-step input", last)
    page.click("#zoom")
    page.wait_for_function("t => [...document.querySelectorAll('#zoomed .annotation-text')]"
                           ".some(e => e.textContent.includes(t))", arg=f"steps {first}–{last}")
    _settle(page)


_X_RANGE = ("() => { const plot = document.querySelector('#timeline .js-plotly-plot');"
            " return plot && plot.layout ? JSON.stringify(plot.layout.xaxis.range) : ''; }")


def _live_run(page) -> None:
    """Press Run and watch it to the end, as a visitor does."""
    page.get_by_role("tab", name="Live run").click()
    page.click("#run")
    # A run before this one left "Done" in the status: wait for this run to replace it first.
    page.wait_for_function("() => !document.querySelector('#status').innerText.includes('Done')",
                           timeout=60_000)
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('Done')",
                           timeout=RUN_MS)
    _settle(page, 2500)


def _titles(page) -> list[str]:
    """The timeline's titles, each one's two lines joined."""
    return page.locator("#timeline .annotation-text").evaluate_all(
        "els => els.map(e => [...e.querySelectorAll('tspan.line')].map(l => l.textContent)"
        ".join(' · ') || e.textContent)")


def _report(page, what: str) -> None:
    """Print what the page says about the run on screen (the walkthrough quotes these)."""
    print(f"--- {what}")
    print("\n".join(_titles(page)[:3]))
    print(page.inner_text("#metrics"), flush=True)


def lesson(page, out: Path) -> None:
    # 1. The serial picture and overlap: a live run with the defaults.
    page.get_by_role("tab", name="Live run").click()
    page.locator("#tab-live").screenshot(path=str(out / "walkthrough-0-controls.png"))
    _live_run(page)
    _report(page, "section 1: the defaults")
    page.locator("#timeline").screenshot(path=str(out / "walkthrough-1-run.png"))
    _open_fold(page, "steps-fold")
    _caption_has(page, "Step 20")
    step = _teaching_step(page)                     # a steady step with a lag-one rider
    _union(page, ["#step-caption", "#step-plot"], out / "walkthrough-3-overlap-step.png")
    # The article's unrolled rounds of the overlap run (taken before the replay switches runs).
    page.locator("#unrolled").screenshot(path=str(out / "walkthrough-4-unrolled.png"))
    _choose_replay_run(page, Loop.NORMAL)
    _set_number(page, "#step input[type=number]", step)
    _caption_has(page, f"Step {step} (")
    _settle(page)
    _union(page, ["#step-caption", "#step-plot"], out / "walkthrough-2-serial-step.png")
    _open_formula(page)                             # section 6 reads the formula, open
    _settle(page)
    page.locator("#metrics").screenshot(path=str(out / "walkthrough-5-formula.png"))
    recorded_lesson(page, out)
    multistep_lesson(page, out)
    memory_lesson(page, out)
    hazard_shots(page, out)                         # section 10
    zh_step_view(page, out)


def multistep_lesson(page, out: Path) -> None:
    """Section 9: a live run of all three loops with a scheduler heavier than the forward."""
    page.get_by_role("tab", name="Live run").click()
    page.click("#preset-multistep")      # all three loops, k = 4, about 3 forwards, 64 new tokens
    page.wait_for_function("() => Number(document.querySelector("
                           "'#extra-cpu-us input[type=number]').value) > 4000")
    _live_run(page)
    _report(page, "section 9: the heavy-scheduler preset, multi-step k=4: "
            + page.input_value("#extra-cpu-us input[type=number]") + " us")
    page.locator("#timeline").screenshot(path=str(out / "walkthrough-8-multistep.png"))
    _open_formula(page)                             # the formulas and the lag cost
    _settle(page)
    page.locator("#metrics").screenshot(path=str(out / "walkthrough-8-cost.png"))


def _open_fold(page, elem_id: str) -> None:
    """Open a folded part of the run view (a Gradio accordion) by its label."""
    label = page.locator(f"#{elem_id} .label-wrap").first
    if "open" not in (label.get_attribute("class") or ""):
        label.click()
    page.wait_for_selector(f"#{elem_id} .label-wrap.open")


def _open_formula(page) -> None:
    """The metrics' "Why: the article's formula" fold, open (it opens with the run; a student
    may have folded it)."""
    if not page.evaluate("() => document.querySelector('#metrics details[data-fold=\"formula\"]')"
                         ".open"):
        page.locator('#metrics details[data-fold="formula"] > summary').click()
    page.wait_for_function("() => document.querySelector('#metrics details[data-fold=\"formula\"]')"
                           ".open")


def _open_more_settings(page) -> None:
    """The live tab's "More settings" fold, open (the memory controls live there)."""
    if not page.locator("#shared-prefix").is_visible():
        page.locator("#more-settings").get_by_role("button").first.click()
        page.locator("#shared-prefix input").wait_for(state="visible")


def memory_lesson(page, out: Path) -> None:
    """Section 12: a shared system prompt on a pool too small for every request at full length,
    so the KV-memory chart shows the prefix cache's pages and dotted retraction lines."""
    page.get_by_role("tab", name="Live run").click()
    page.click("#preset-overlap")                  # the defaults (after section 9's preset)
    _settle(page, 1500)                            # the preset's values reach the controls
    _open_more_settings(page)
    _set_number(page, "#shared-prefix input", 256)
    page.locator("#stop-early input").uncheck()
    _set_number(page, "#kv-pages input", 40)
    _live_run(page)
    _report(page, "section 12: shared system prompt 256, no early stops, 40 KV pages")
    _open_fold(page, "more-of-run")                 # the KV memory, folded below
    print("\n".join(page.locator("#memory .annotation-text").all_text_contents()), flush=True)
    page.locator("#memory").scroll_into_view_if_needed()
    page.mouse.move(0, 0)                           # no hover label in the picture
    _settle(page)
    page.locator("#memory").screenshot(path=str(out / "walkthrough-12-memory.png"))
    # Back to the defaults for the scenes after this one.
    _set_number(page, "#shared-prefix input", 0)
    page.locator("#stop-early input").check()
    _set_number(page, "#kv-pages input", 0)


def zh_step_view(page, out: Path) -> None:
    """The walkthrough's first picture: a first click with the defaults (the controls are back on
    them after section 12), its step view in Chinese."""
    _live_run(page)
    page.get_by_text("中文", exact=True).click()
    page.wait_for_function("() => document.querySelector('#explain') === null || document"
                           ".querySelector('#explain').innerText.includes('看什么')",
                           timeout=60_000)
    page.get_by_role("tab", name="现场运行").click()
    _open_fold(page, "steps-fold")
    page.wait_for_function("() => document.querySelector('#step-caption')?.innerText"
                           ".includes('第')", timeout=60_000)
    _settle(page, 1500)
    _union(page, ["#step-caption", "#step-plot"], out / "walkthrough-zh-step.png")
    busy = page.locator("#step-plot .annotation-text", has_text="机器繁忙").count()
    print("zh step view: " + ("the machine was busy (badge shown)" if busy else "no busy badge"))


def hazard_shots(page, out: Path) -> None:
    """Section 10's two pictures: the finished-request guard removed, then the safe engine."""
    page.get_by_role("tab", name="Hazard lab").click()
    page.locator("#lab-switch label", has_text="finished-request guard").click()
    page.click("#lab-run")
    page.wait_for_selector('#lab-result .lab-verdict[data-switch="no_finished_guard"]',
                           timeout=RUN_MS)
    _union(page, ["#lab-switch", "#lab-result"], out / "walkthrough-9-hazard.png")
    page.click("#lab-safe")
    page.wait_for_selector('#lab-result .lab-verdict[data-switch="safe"]', timeout=RUN_MS)
    page.locator("#lab-result").screenshot(path=str(out / "walkthrough-9-safe.png"))


def recorded_lesson(page, out: Path) -> None:
    """The walkthrough's pictures of the bundled H200 recordings (no live run: the same every
    time, so ``--recorded-only`` can refresh them without changing the live numbers quoted)."""
    # 2. Small vs large models, eager vs CUDA graphs: recorded H200 runs.
    for stem, name in [("h200-bundled-graph-cpu200", "walkthrough-6-small.png"),
                       ("h200-qwen05-graph-b64", "walkthrough-6-large.png")]:
        _show_recorded(page, stem)
        page.locator("#metrics").screenshot(path=str(out / name))
    for stem, name in [("h200-smollm-graph-kernels", "walkthrough-7-graph.png"),
                       ("h200-smollm-eager-kernels", "walkthrough-7-eager.png")]:
        _show_recorded(page, stem)
        _zoom_steps(page, 25, 26)                   # inside the profiled steps 24-27
        page.locator("#zoomed").screenshot(path=str(out / name))
    _drag_zoom(page, "#zoomed", [(0.30, 0.32), (0.35, 0.58)])       # eager: a few kernels
    page.locator("#zoomed").screenshot(path=str(out / "walkthrough-7-eager-zoom.png"))
    # 3. Multi-step: k=4 at 200 us of extra work; all three loops with a heavy scheduler.
    _show_recorded(page, "h200-bundled-graph-cpu200-multistep4")
    page.locator("#metrics").screenshot(path=str(out / "walkthrough-8-h200-multistep.png"))
    _show_recorded(page, "h200-smollm-graph-cpu4000-all")
    page.locator("#timeline").screenshot(path=str(out / "walkthrough-8-h200-heavy.png"))
    page.locator("#metrics").screenshot(path=str(out / "walkthrough-8-h200-heavy-metrics.png"))
    _zoom_steps(page, 40, 45)
    page.locator("#zoomed").screenshot(path=str(out / "walkthrough-8-h200-heavy-steps.png"))
    # The README's serving figure: the tab's first measurement (assets/serving, the bench with
    # 4000 us of extra CPU work per step).
    page.get_by_role("tab", name="Serving: latency vs rate").click()
    _settle(page, 1500)
    page.locator("#serving-plot").screenshot(path=str(out / "latency-vs-rate-cpu.png"))


def whole_run_shots(page, out: Path, record: Path) -> None:
    """The whole-run chart of a long record the CLI wrote (``python -m engine ... --json RECORD``),
    through the import tab: ``whole-run-<max new tokens>-en.png`` and ``-zh.png``."""
    steps = json.loads(record.read_text())["config"]["max_new_tokens"]     # a token a step
    page.get_by_role("tab", name="Import a trace").click()
    page.set_input_files("#upload input[type=file]", str(record))
    page.wait_for_selector("#status .status-ok", timeout=RUN_MS)
    page.locator("#timeline .annotation-text", has_text="GPU idle").first.wait_for()
    page.mouse.move(0, 0)
    _settle(page, 1500)
    page.locator("#timeline").screenshot(path=str(out / f"whole-run-{steps}-en.png"))
    page.get_by_text("中文", exact=True).click()
    page.wait_for_function("[...document.querySelectorAll('#timeline .annotation-text')]"
                           ".some(e => e.textContent.includes('GPU 空闲'))", timeout=60_000)
    page.mouse.move(0, 0)
    _settle(page, 1500)
    page.locator("#timeline").screenshot(path=str(out / f"whole-run-{steps}-zh.png"))


def readme_shot(page, out: Path) -> None:
    """The README's picture: a first click with the defaults, watched live as a visitor does,
    and its timings (when the first bars appeared, when the run finished)."""
    page.wait_for_timeout(10_000)        # a visitor reads the page; the engine warms meanwhile
    started = time.monotonic()
    page.click("#run")
    # The first spans on the live canvas (it says how many it drew).
    page.wait_for_function("() => Number(document.querySelector('#live-chart canvas')"
                           "?.dataset.spans || 0) > 0", timeout=RUN_MS)
    first_bars = time.monotonic() - started
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('Done')",
                           timeout=RUN_MS)
    done = time.monotonic() - started
    _settle(page, 2500)
    page.screenshot(path=str(out / "readme-app.png"), full_page=True)
    titles = _titles(page)[:2]
    formula = [line for line in page.inner_text("#metrics").splitlines()
               if "measured" in line or "whole run" in line]
    print(f"first bars {first_bars:.1f} s after the click, done at {done:.1f} s")
    print("\n".join(titles + formula[:2]))


# --NAME-only: one section's pictures.
ONLY = {"recorded": (recorded_lesson, "the pictures of the bundled H200 recordings"),
        "multistep": (multistep_lesson, "section 9's live run (all three loops, a heavy scheduler)"),
        "memory": (memory_lesson, "section 12's live run (shared prompt, small KV pool)"),
        "hazard": (hazard_shots, "section 10's hazard lab pictures"),
        "zh": (zh_step_view, "the Chinese step view, of a first click with the defaults")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the PNG files")
    for name, (_, said) in ONLY.items():
        parser.add_argument(f"--{name}-only", action="store_true", help=f"only {said}")
    parser.add_argument("--readme", action="store_true",
                        help="only the README's picture (a timed first click on Run)")
    parser.add_argument("--whole-run", type=Path, metavar="RECORD",
                        help="only the whole-run chart of RECORD (a long run), en and zh")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    launched = time.monotonic()
    server = serve_app(port)
    print(f"page served {time.monotonic() - launched:.1f} s after starting python app.py")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                                 args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#run")
            if args.readme:
                readme_shot(page, args.out)
            elif args.whole_run:
                whole_run_shots(page, args.out, args.whole_run.resolve())
            else:
                only = [shots for name, (shots, _) in ONLY.items() if vars(args)[f"{name}_only"]]
                (only[0] if only else lesson)(page, args.out)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
