"""The web UI end to end, in a real browser: start ``python app.py``, drive it with headless
Chromium through Playwright, read the numbers off the page, and save screenshots to look at
($TEST_SCREENSHOTS, default a temp folder).
A few handler-level checks (bad input, a failing run, recorded runs) run without a browser.

Browser tests skip cleanly where Chromium or Playwright is missing. They are slow: they run the
real engine on CPU.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUSY_WAIT_MS = 120_000
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# Screenshots to look at after a run (not committed: the README's pictures come from scripts.screenshots).
SCREENSHOTS = Path(os.environ.get("TEST_SCREENSHOTS",
                                  Path(tempfile.gettempdir()) / "overlap-demo-test-screenshots"))
SCREENSHOTS.mkdir(parents=True, exist_ok=True)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RUN_TIMEOUT_MS = 240_000
# How fast the page is served and draws is printed by ``python -m scripts.screenshots --readme``,
# not judged here: a test must not depend on how busy the machine is.


def _sync_api():
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``python app.py --port N`` as a subprocess; the URL once it answers."""
    _sync_api()
    port = _free_port()
    log = tmp_path_factory.mktemp("app") / "app.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/"
    started = time.monotonic()
    try:
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read(100)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() - started > 300:   # a hang guard
                    pytest.fail(f"app did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()                       # an orderly stop (ui.stopping)
        try:
            proc.wait(timeout=120)             # a hang guard, not a bound
        except subprocess.TimeoutExpired:
            proc.kill()
        if os.environ.get("SHOW_APP_LOG"):
            print(log.read_text()[-5000:])


@pytest.fixture(scope="module")
def browser():
    with _sync_api().sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    # Every wait without its own limit: long enough for a 2-core machine that is also running
    # other work (a handler's round trip then took over 30 s, Playwright's default, once).
    page.set_default_timeout(BUSY_WAIT_MS)
    page.goto(server)
    page.wait_for_selector("#run")
    yield page
    page.close()


def _status(page) -> str:
    return page.inner_text("#status")


def _metric(page, mode: str, name: str) -> float:
    cell = page.locator(f'#metrics td[data-mode="{mode}"][data-metric="{name}"]')
    return float(cell.get_attribute("data-value"))


def _plot_data(page, plot: str, expression: str):
    """Evaluate ``expression`` over the plotly figure's ``data`` (traces) of ``#plot``."""
    return page.evaluate(f"() => {{ const data = document.querySelector('#{plot} .js-plotly-plot')"
                         f".data; return {expression}; }}")


def _trace_names(page, plot: str) -> list[str]:
    return _plot_data(page, plot, "data.map(d => d.name)")


def _subplot_titles(page, plot: str) -> list[str]:
    return page.locator(f"#{plot} .annotation-text").all_text_contents()


def test_both_runs_side_by_side_as_they_run(page):
    page.click("#run")
    # The timeline grows while the engine runs: bars appear before the run has finished.
    # The first spans on the live canvas (it says how many it drew).
    page.wait_for_function("() => Number(document.querySelector('#live-chart canvas')"
                           "?.dataset.spans || 0) > 0", timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector('#metrics td[data-metric="idle_us_total"]', timeout=RUN_TIMEOUT_MS)
    # The table can land a moment before plotly has drawn the axes: wait for a lane's label.
    page.locator("#timeline .ytick text", has_text="engine stream").first.wait_for()
    page.screenshot(path=str(SCREENSHOTS / "app-both.png"), full_page=True)
    titles = _subplot_titles(page, "timeline")
    assert len(titles) == 2 and titles[0].startswith("normal") and titles[1].startswith("overlap")
    lanes = page.locator("#timeline .ytick text").all_text_contents()
    assert lanes[:3] == ["CPU (scheduler thread)", "scheduler stream", "engine stream"]
    assert len(_subplot_titles(page, "zoomed")) == 2
    # Both loops measured (how much each idled depends on what else the machine runs: the
    # engine's tests check the overlap loop's hiding under control, not this page).
    idles = [_metric(page, mode, "idle_us_total") for mode in ("normal", "overlap")]
    assert all(idle >= 0 for idle in idles), idles
    assert "Done" in _status(page)
    # The lesson's order: the formula, open, above the folds of what it does not need.
    formula = page.locator('#metrics details[data-fold="formula"]')
    assert formula.evaluate("e => e.open")
    assert formula.bounding_box()["y"] < page.locator("#steps-fold").bounding_box()["y"] < \
        page.locator("#more-of-run").bounding_box()["y"]
    _open_fold(page, "more-of-run")                 # the generated texts, folded below
    page.wait_for_selector("#texts td")
    # Requests stop early by default: the overlap run's lag-one forwards are starred.
    names = _trace_names(page, "timeline")
    assert "forward after a stop (token dropped)" in names and "stop token read" in names
    page.locator("#timeline").screenshot(path=str(SCREENSHOTS / "timeline-both.png"))
    with page.expect_download() as download:
        page.click("#download-record")
    record = json.loads(Path(download.value.path()).read_text())
    assert record["schema"] == 1 and [run["loop"] for run in record["runs"]] == ["normal",
                                                                                "overlap"]
    with page.expect_download() as download:
        page.click("#download-trace")
    assert "traceEvents" in json.loads(Path(download.value.path()).read_text())
    page.locator("#zoomed").screenshot(path=str(SCREENSHOTS / "timeline-steps.png"))
    # The language toggle redraws the explanations and the charts from the same record.
    page.get_by_text("中文", exact=True).click()
    page.wait_for_function("document.querySelector('#explain').innerText.includes('看什么')")
    page.wait_for_function(
        "[...document.querySelectorAll('#timeline .annotation-text')]"
        ".some(e => e.textContent.includes('GPU 空闲'))")
    page.screenshot(path=str(SCREENSHOTS / "app-both-zh.png"), full_page=True)


def _show_recorded(page, stem: str) -> None:
    page.get_by_role("tab", name="Recorded GPU runs").click()
    page.click("#recorded input")
    page.get_by_role("option", name=f"{stem}:", exact=False).first.click()
    page.wait_for_selector("#status .status-ok")


def _open_fold(page, elem_id: str) -> None:
    """Open a folded part of the run view (a Gradio accordion) by its label."""
    page.locator(f"#{elem_id} .label-wrap").first.click()
    page.wait_for_selector(f"#{elem_id} .label-wrap.open")


def _caption(page) -> str:
    return page.inner_text("#step-caption")


def test_step_through_a_recorded_run(page):
    # Our engine's record beside the peers': its CPU work a step (0.2 ms) fits under its forward
    # (1 ms) with room, so a step shows the processing and the next batch's building hidden.
    _show_recorded(page, "h200-ours-qwen05-b16")
    _open_fold(page, "steps-fold")
    page.wait_for_function("document.querySelector('#step-caption')?.innerText.includes('Step 20')")
    assert "(overlap)" in _caption(page) and "forward(B20)" in _caption(page)
    page.click("#next-step")
    page.wait_for_function("document.querySelector('#step-caption')?.innerText.includes('Step 21')")
    assert "while the CPU processes B20" in _caption(page)
    page.wait_for_function(
        "document.querySelector('#step-plot .js-plotly-plot').data"
        ".some(d => d.meta === 'forward' && d.hovertext[0].includes('forward(B21)'))")
    outlined = _plot_data(page, "step-plot", "data.filter(d => d.meta).map(d => d.meta)")
    # Under forward(B21): process_last(B20), then B22's receiving and building, here its launch
    # too (what the caption counts as hidden).
    assert {"forward", "upload", "copy", "wait", "hidden0", "then0", "then1"} <= set(outlined)
    assert set(outlined) <= {"forward", "upload", "copy", "wait", "hidden0", "then0", "then1",
                             "then2"}
    hover = _plot_data(page, "step-plot", "data.find(d => d.meta === 'forward').hovertext[0]")
    assert "metadata upload(B21)" in hover and "process_last(B20)" in hover
    assert "schedule(B22)" in hover
    page.locator("#step-plot .annotation-text", has_text="copy_done").first.wait_for()
    labels = page.locator("#step-plot .annotation-text").all_text_contents()
    assert {"wait_stream", "copy_done", "hidden under forward(B21)"} <= set(labels)
    for _ in range(2):
        page.click("#prev-step")
    page.wait_for_function("document.querySelector('#step-caption')?.innerText.includes('Step 19')")
    assert "while the CPU processes B18" in _caption(page)
    page.locator("#unrolled .annotation-text", has_text="drain").first.wait_for()
    titles = _subplot_titles(page, "unrolled")
    assert [title.split(":")[0] for title in titles] == ["fill", "steady state", "drain"]
    page.locator("#replay-run input").click()
    page.get_by_role("option", name="normal").click()
    page.wait_for_function(
        "document.querySelector('#step-caption')?.innerText.includes('(normal loop)')")
    assert "the GPU idles" in _caption(page)


def test_hazard_lab_safe_engine_in_the_browser(page):
    page.get_by_role("tab", name="Hazard lab").click()
    page.wait_for_selector("#lab-switch label")
    assert "finished-request guard" in page.inner_text("#lab-switch")
    page.click("#lab-safe")
    page.wait_for_selector('#lab-result .lab-verdict[data-switch="safe"]', timeout=RUN_TIMEOUT_MS)
    verdict = page.locator("#lab-result .lab-verdict")
    assert verdict.get_attribute("data-fault") == "false"
    assert "No fault" in verdict.inner_text()


def test_out_of_range_input_shows_a_message(page):
    page.fill("#requests input", "0")
    page.click("#run")
    page.wait_for_selector("#status .status-error")
    assert "Requests must be from 1 to 64; got 0" in _status(page)


def _synthetic_trace(path: Path) -> Path:
    """A small torch.profiler-style Chrome trace: 4 steps, one kernel stream, gaps between."""
    events = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
              {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7,
               "args": {"name": "stream 7"}}]
    for step in range(4):
        t0 = 1000.0 + step * 400
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 1, "tid": 1, "ts": t0, "dur": 390})
        for k in range(3):
            events.append({"ph": "X", "cat": "kernel", "name": f"void gemm_kernel_{k}<float>",
                           "pid": 0, "tid": 7, "ts": t0 + 50 + k * 80, "dur": 70,
                           "args": {"device": 0, "stream": 7}})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_upload_a_profiler_trace(page, tmp_path):
    page.get_by_role("tab", name="Import a trace").click()
    page.set_input_files("#upload input[type=file]", str(_synthetic_trace(tmp_path / "t.json")))
    page.wait_for_selector("#status .status-ok")
    assert "Imported" in _status(page)
    # The status can land a moment before plotly has drawn the axes: wait for the lane label.
    page.locator("#timeline .ytick text", has_text="GPU 0 stream 7").first.wait_for()
    lanes = page.locator("#timeline .ytick text").all_text_contents()
    assert "GPU 0 stream 7" in lanes
    page.locator("#timeline").screenshot(path=str(SCREENSHOTS / "timeline-imported.png"))


def test_upload_of_a_file_that_is_no_trace_shows_a_message(page, tmp_path):
    page.get_by_role("tab", name="Import a trace").click()
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    page.set_input_files("#upload input[type=file]", str(bad))
    page.wait_for_selector("#status .status-error")
    assert "Cannot show notes.json" in _status(page)
    assert "traceEvents" in page.inner_html("#status")     # the detail, folded beneath


def test_an_image_uploaded_after_a_bad_file_gets_its_own_answer(page, tmp_path):
    """Every upload is answered: a PNG (the browser's type filter used to drop it silently and
    leave the previous error on screen) is said to be a PNG image."""
    page.get_by_role("tab", name="Import a trace").click()
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    page.set_input_files("#upload input[type=file]", str(bad))
    page.wait_for_function("document.querySelector('#status').innerText.includes('notes.json')")
    image = tmp_path / "chart.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    page.click("#upload button[aria-label='Clear']")          # as a person does: x, then pick
    page.set_input_files("#upload input[type=file]", str(image))
    page.wait_for_function("document.querySelector('#status').innerText.includes('chart.png')")
    assert "it is a PNG image, not a run record or a trace" in _status(page)
    assert "notes.json" not in _status(page)


def test_the_lab_and_serving_tabs_show_their_own_results_and_mark_cuda_switches(page):
    assert page.is_visible("#run-view")                       # the live run tab shows runs
    page.get_by_role("tab", name="Hazard lab").click()
    page.wait_for_selector("#lab-switch label")
    page.wait_for_function("() => !document.querySelector('#run-view') || "
                           "document.querySelector('#run-view').offsetParent === null")
    assert not page.is_visible("#status")                     # no "Press Run ..." here
    marked = page.locator("#lab-switch label", has_text="(needs CUDA: not here)")
    assert marked.count() >= 2                                # wait_stream, the deferred frees
    marked.first.click()
    page.wait_for_function("document.querySelector('#lab-guards').innerText"
                           ".includes('This machine has no GPU')")
    assert page.locator("#lab-run").is_disabled()
    page.locator("#lab-switch label", has_text="finished-request guard").click()
    page.wait_for_function("!document.querySelector('#lab-run').disabled")
    page.get_by_role("tab", name="Serving: latency vs rate").click()
    page.wait_for_selector("#serving-table table")
    assert not page.is_visible("#status")
    page.get_by_role("tab", name="Recorded GPU runs").click()
    page.wait_for_selector("#status", state="visible")


# ---- handlers, without a browser -----------------------------------------------------------------

sys.path.insert(0, str(ROOT))
live = pytest.importorskip("ui.live_runs")


def _args(**overrides):
    from ui.controls import Controls

    values = {"loops": ["normal", "overlap"], "decode_steps": 4, "stop_early": False,
              "device": "cpu", "model": "bundled", "requests": 2, "batch": 2, "prompt_len": 4,
              "prompts_text": "", "max_new": 2, "temperature": 0.0, "cuda_graph": False,
              "extra_cpu_us": 0, "lang_choice": "English"}
    return Controls(**{**values, **overrides})


def _fields(values: tuple) -> dict:
    from dataclasses import fields

    from ui.view import MainView

    return dict(zip([f.name for f in fields(MainView)], values))


class _FailingScheduler:
    """Stands in for the scheduler process's client: the request fails as a dead device would."""

    def __init__(self, event):
        self.event = event

    def submit(self, _request):
        yield self.event

    def ready(self):
        from engine.scheduler_process.messages import SchedulerReady

        return SchedulerReady(0, False, "CPU", "")


@pytest.mark.parametrize("kind, said", [
    ("device", "The device process stopped during the run"),
    ("cancelled", "Stopped: the run was ended before it finished"),
    ("error", "The run failed."),
])
def test_a_failed_run_gives_a_message_in_the_users_language(monkeypatch, kind, said):
    from engine.scheduler_process.messages import RequestFailed
    from ui import scheduler_link

    event = RequestFailed(kind, "the CPU device process died while running step 3 (SIGKILL)")
    monkeypatch.setattr(scheduler_link, "scheduler", lambda: _FailingScheduler(event))
    final = _fields(list(live.run_live(_args()))[-1])
    assert said in final["status"]
    zh = _fields(list(live.run_live(_args(lang_choice="中文")))[-1])
    assert "Stopped" not in zh["status"] and "The run" not in zh["status"].split("<details>")[0]


def test_no_loop_chosen_gives_a_message():
    outputs = list(live.run_live(_args(loops=[])))
    assert "choose at least one scheduling loop" in _fields(outputs[-1])["status"]


def test_cuda_without_a_gpu_gives_a_message(monkeypatch):
    from engine.scheduler_process.messages import RequestFailed
    from ui import scheduler_link

    monkeypatch.setattr(scheduler_link, "scheduler", lambda: _FailingScheduler(RequestFailed("x", "")))
    outputs = list(live.run_live(_args(device="cuda")))
    assert "no GPU was found on this machine" in _fields(outputs[-1])["status"]


def test_recorded_runs_are_listed_and_labelled_with_hardware_and_date(monkeypatch,
                                                                       tmp_path):
    from record.metrics import compute_metrics
    from record.run_record import make_record, save_record
    from ui import recorded_runs

    spans = [{"lane": "engine_stream", "phase": "decode", "step": 0, "start_us": 0.0,
              "end_us": 30.0}, {"lane": "engine_stream", "phase": "decode", "step": 1,
                                "start_us": 40.0, "end_us": 70.0}]
    run = {"loop": "overlap", "decode_steps": 1, "extra_cpu_us": 0, "spans": spans, "outputs": [],
           "metrics": compute_metrics(spans, [])}
    env = {"device_name": "NVIDIA H200", "torch_version": "2.11.0", "date": "2025-06-01"}
    save_record(make_record(env, {}, [run]), tmp_path / "h200-overlap.json")
    monkeypatch.setattr(recorded_runs, "RECORDED_DIR", tmp_path)
    choices = recorded_runs.list_recorded()["choices"]
    assert choices == [("h200-overlap: NVIDIA H200 · torch 2.11.0 · 2025-06-01",
                        "h200-overlap.json")]
    status, timeline, *_ = recorded_runs.show_recorded("h200-overlap.json", "English")
    assert "Recorded on NVIDIA H200 · torch 2.11.0 · 2025-06-01" in status
    assert len(json.loads(timeline["value"].plot)["data"]) >= 2   # the gap band and the bars
    monkeypatch.setattr(recorded_runs, "RECORDED_DIR", tmp_path / "empty")
    assert recorded_runs.list_recorded()["choices"] == []


# ---- the whole page in 中文, and hostile files ----------------------------------------------------

# Technical terms the Chinese text keeps in English (as the source article does), and the figure
# and file names that are names, not sentences.
TERMS = {"CUDA Graph", "CUDA stream", "Chrome trace", "GPU stream", "KV Cache", "copy stream",
         "engine stream", "scheduler stream", "token id", "token pool"}
VISIBLE_TEXT = """() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, parent = node.parentElement;
    // .sr-only: Gradio's screen-reader announcements ("In queue: 1 of 2" for a second while an
    // event waits), not on screen; in Gradio 6 that one has no zh-CN string.
    if (!parent || parent.closest('code, pre, script, style, .ov-text, .sr-only')) continue;
    if (parent.closest('details:not([open])') && !parent.closest('summary')) continue;
    const style = getComputedStyle(parent);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    const text = node.textContent.trim();
    if (text) out.push(text);
  }
  return out;
}"""


def _latin_runs(page) -> set[str]:
    """Runs of two or more Latin words in the visible text, outside code, identifiers (with _ or
    digits), numbers, units, the generated texts, and the terms above."""
    import re

    found = set()
    for text in page.evaluate(VISIBLE_TEXT):
        run: list[str] = []
        for word in re.findall(r"[\w'’.+-]+|[^\w\s]", text) + ["。"]:
            if re.fullmatch(r"[A-Za-z][A-Za-z'’-]*", word):
                run.append(word)
            elif word in (",", ":", ";") and run:
                continue
            else:
                if len(run) >= 2 and " ".join(run) not in TERMS:
                    found.add(" ".join(run))
                run = []
    return found


def _latin_left(page) -> set[str]:
    """``_latin_runs`` once the page has had its chance to answer: the language switch is
    answered by several handlers in several queues (the labels, the explanations, each tab's
    results), in no fixed order on a loaded machine, so this polls until no English is left or
    the page's wait is spent, and returns what is left then (empty: the page speaks Chinese)."""
    deadline = time.monotonic() + BUSY_WAIT_MS / 1000
    while (left := _latin_runs(page)) and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    return left


def _to_chinese(page) -> None:
    """Switch the page to Chinese and wait for handlers of the switch's chain (the
    explanations, the serving tab's table), not for a guessed delay."""
    page.locator("#language label", has_text="中文").click()
    page.wait_for_function("document.querySelector('#explain').innerText.includes('看什么')")
    page.wait_for_function("() => { const t = document.querySelector('#serving-table');"
                           " return !t || t.innerText.includes('请求速率'); }")
    _settled(page)


def _settled(page) -> None:
    """No event of the page is queued or running (Gradio's progress overlays are gone)."""
    page.wait_for_function("() => !document.querySelector('.progress-text, .eta-bar, .meta-text,"
                           " .meta-text-center')")


@pytest.fixture
def zh_page(browser, server):
    """A page in a Chinese reader's browser: Gradio's own words (its queue notices) follow the
    browser's locale; the page's follow its language switch."""
    context = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(BUSY_WAIT_MS)
    page.goto(server)
    page.wait_for_selector("#run")
    yield page
    context.close()


def test_the_page_speaks_chinese_after_a_run_an_import_a_lab_run_and_bad_input(zh_page):
    page = zh_page
    page.fill("#requests input", "4")
    page.click("#run")
    page.wait_for_selector("#status .status-ok", timeout=RUN_TIMEOUT_MS)
    _to_chinese(page)                                  # after a run
    assert not (left := _latin_left(page)), left
    page.fill("#requests input", "2.5")                # bad input, said in Chinese
    page.click("#run")
    page.wait_for_selector("#status .status-error")
    assert "请求数必须是" in _status(page)
    assert not (left := _latin_left(page)), left
    # Numbers typed past a slider's end reach our handlers (ui.view.slider), which say so in
    # Chinese; Gradio's own check would have raised an English toast.
    extra = page.locator("#extra-cpu-us input[type=number]")
    extra.fill("999999")
    extra.press("Enter")
    page.wait_for_function("document.querySelector('#preset-said').innerText"
                           ".includes('额外 CPU 工作必须在')")
    _open_fold(page, "steps-fold")
    step = page.locator("#step input[type=number]")
    step.fill("9999")
    step.press("Enter")
    page.wait_for_function("document.querySelector('#step-caption')?.innerText"
                           ".includes('这次运行没有第 9999 步')")
    assert not (left := _latin_left(page)), left
    extra.fill("4000")
    extra.press("Enter")
    page.get_by_role("tab", name="导入 trace").click()   # an import
    page.set_input_files("#upload input[type=file]",
                         str(ROOT / "tests" / "data" / "traces" / "engine-graph-qwen05-b8.json.gz"))
    page.wait_for_function("document.querySelector('#status').innerText.includes('已导入')")
    _settled(page)
    assert not (left := _latin_left(page)), left
    page.get_by_role("tab", name="隐患实验室").click()   # a lab run
    page.click("#lab-safe")
    page.wait_for_selector("#lab-result .lab-verdict", timeout=RUN_TIMEOUT_MS)
    assert not (left := _latin_left(page)), left
    page.screenshot(path=str(SCREENSHOTS / "app-zh-after-all.png"), full_page=True)


def test_a_record_full_of_html_runs_no_script_and_injects_nothing(page, tmp_path):
    """Every string field of an uploaded record is an HTML payload: shown as text, never run."""
    from record.metrics import compute_metrics
    from record.run_record import make_record, save_record

    payload = '<img src=x id=injected onerror="window.__xss=1"><script>window.__xss=2</script>'
    spans = [{"lane": lane, "phase": payload, "step": n, "start_us": 10.0 * n + off,
              "end_us": 10.0 * n + off + 4, "req_ids": [0]}
             for n in range(8) for lane, off in (("cpu", 0.0), (payload, 4.0),
                                                 ("engine_stream", 5.0))]
    outputs = [{"token_ids": [1, 2], "text": payload, "finish_reason": payload,
                "prompt_tokens": 3, "wasted_steps": 1}]
    run = {"loop": payload, "decode_steps": 1, "extra_cpu_us": 0, "label": payload,
           "lanes": ["cpu", payload, "engine_stream"],
           "gpu_lanes": [payload, "engine_stream"], "spans": spans, "outputs": outputs,
           "metrics": compute_metrics(spans, [], [payload, "engine_stream"]), "notes": [
               {"key": "note_steps_marker", "steps": 8, "marker": payload}]}
    env = {"device_name": payload, "torch_version": payload, "date": payload}
    record = make_record(env, {"source": payload}, [run])
    save_record(record, tmp_path / "hostile.json")
    page.get_by_role("tab", name="Import a trace").click()
    page.set_input_files("#upload input[type=file]", str(tmp_path / "hostile.json"))
    page.wait_for_selector("#status .status-ok")
    _open_fold(page, "steps-fold")
    # the record's step is drawn (the caption may be drawn anew after the fold opens: wait)
    page.wait_for_function("(document.querySelector('#step-caption')?.innerText ?? 'Show a run "
                           "first').includes('Show a run first') === false")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("#injected").count() == 0
    assert page.locator("img[src=x]").count() == 0
    assert "<img src=x" in _status(page)                 # shown as text


def test_zero_gpu_is_told_by_its_environment_not_by_the_spaces_package(monkeypatch):
    """A CPU Space or a laptop may have ``spaces`` installed: only ZeroGPU's own variable counts,
    and there the engine runs inside the GPU call (an in-process scheduler, no process of ours)."""
    from ui import scheduler_link

    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert not scheduler_link.on_zero_gpu()
    for value in ("1", "true"):
        monkeypatch.setenv("SPACES_ZERO_GPU", value)
        assert scheduler_link.on_zero_gpu() and scheduler_link.cuda_seen()
