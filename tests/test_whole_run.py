"""The whole-run timeline as a specification: which loop kept the GPU busier reads at a glance.

At the whole-run zoom a gap of a millisecond is a pixel or less. Drawn with an outline each, the
overlap loop's ninety short gaps looked as red as the serial loop's ninety long ones. Now:

- each panel of a comparison adds its GPU time up under its lanes: the idle gaps laid end to end
  from 0 (red, as long as the measured idle time), then the busy time (grey), on the shared axis;
- each gap is drawn at its own width, as light as it is thin, so the red a panel draws is its
  idle time, and none of the gaps vanishes;
- the step window (zoomed) draws each gap as it always did, outlined, at its width;
- a run of more gaps than the plot has columns (a few hundred steps) draws, under its lanes, its
  idle share column by column instead of a wash of pink bands, and a whole run's legend names
  only what holds time at that zoom; lag marks a few pixels apart are one mark.

The workload below is the page's default one as a CPU run measures it (90 decode steps, a
3.9 ms forward; the serial loop waits 4.4 ms for the CPU after each, the overlap loop 0.15 ms or
1.5 ms). The browser checks measure what Chromium draws for it: plotly.js decides the pixels.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="viz needs plotly")

import viz  # noqa: E402
from record.metrics import compute_metrics  # noqa: E402
from record.schema import Lane, Loop, Phase  # noqa: E402
from viz.pixels import FAINTEST_BAND  # noqa: E402
from viz.style import IDLE_FILL, IDLE_FILL_OPAQUE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GPU = [Lane.SCHEDULER_STREAM, Lane.ENGINE_STREAM]
FORWARD_US, UPLOAD_US, CPU_US = 3900.0, 50.0, 4400.0
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHART_PX = 900          # the page's timeline on a 1280-1400 px laptop screen


def _span(lane: str, phase: str, step: int, start: float, end: float) -> dict:
    return {"lane": lane, "phase": phase, "step": step, "start_us": start, "end_us": end,
            "batch_size": 16, "num_tokens": 16}


def _run(loop: Loop, gaps_us: list[float]) -> dict:
    """A step a gap: the upload, the forward, then ``gaps_us[step]`` with no GPU lane busy (the
    CPU's work, which the serial loop waits for), measured as the engine measures a run."""
    spans, t0 = [], 0.0
    for step, gap in enumerate(gaps_us):
        spans += [_span(Lane.SCHEDULER_STREAM, Phase.UPLOAD, step, t0, t0 + UPLOAD_US),
                  _span(Lane.ENGINE_STREAM, Phase.DECODE, step, t0 + UPLOAD_US,
                        t0 + UPLOAD_US + FORWARD_US),
                  _span(Lane.CPU, Phase.PROCESS_LAST, step, t0 + UPLOAD_US + FORWARD_US,
                        t0 + UPLOAD_US + FORWARD_US + min(gap, CPU_US))]
        t0 += UPLOAD_US + FORWARD_US + gap
    spans.append(_span(Lane.ENGINE_STREAM, Phase.DECODE, len(gaps_us), t0, t0 + FORWARD_US))
    return {"loop": loop, "decode_steps": 1, "extra_cpu_us": 0, "label": loop,
            "lanes": [Lane.CPU, *GPU],
            "gpu_lanes": list(GPU), "spans": spans, "outputs": [],
            "metrics": compute_metrics(spans, [])}


def default_workload() -> list[dict]:
    """The serial loop idles 90 x 4.4 = 396 ms; the overlap loop 45 x (0.15 + 1.5) = 74 ms."""
    return [_run(Loop.NORMAL, [CPU_US] * 90),
            _run(Loop.OVERLAP, [150.0 if step % 2 else 1500.0 for step in range(90)])]


def _sums(figure) -> dict[str, list[dict]]:
    """The parts of each panel's sum, by part ("sum_idle", "sum_busy"), top panel first."""
    found: dict[str, list[dict]] = {}
    for trace in figure.to_dict()["data"]:
        if trace.get("legendgroup", "").startswith("sum_"):
            found.setdefault(trace["legendgroup"], []).append(trace)
    return found


def _idle_bands(figure) -> list[dict]:
    return [trace for trace in figure.to_dict()["data"] if trace.get("legendgroup") == "gpu_idle"]


# ---- the sum under each panel -------------------------------------------------------------------

def test_each_panel_adds_its_idle_up_from_zero_as_long_as_it_measured():
    runs = default_workload()
    figure = viz.side_by_side_figure(runs)
    sums = _sums(figure)
    assert len(sums["sum_idle"]) == len(sums["sum_busy"]) == 2          # one a panel
    for run, idle, busy in zip(runs, sums["sum_idle"], sums["sum_busy"]):
        metrics = run["metrics"]
        assert idle["base"] == [0.0]                  # both reds start at 0: compare the lengths
        assert idle["x"][0] == pytest.approx(metrics["idle_us_total"] / 1000.0, rel=1e-9)
        extent_ms = (run["spans"][-1]["end_us"] - run["spans"][0]["start_us"]) / 1000.0
        assert busy["base"][0] == pytest.approx(idle["x"][0])           # the grey follows it
        assert busy["x"][0] == pytest.approx(metrics["gpu_busy_frac"] * extent_ms, rel=1e-9)
        assert idle["yaxis"] == busy["yaxis"]
    normal, overlap = (trace["x"][0] for trace in sums["sum_idle"])
    assert (normal, overlap) == pytest.approx((396.0, 74.25))
    layout = figure.to_dict()["layout"]
    assert layout["xaxis"]["matches"] == "x2"        # one time axis: the lengths compare


def test_the_sum_sits_under_the_lanes_and_leaves_their_labels_alone():
    figure = viz.side_by_side_figure(default_workload())
    layout = figure.to_dict()["layout"]
    for axis in ("yaxis", "yaxis2"):
        assert layout[axis]["tickvals"] == [0, 1, 2]                   # the lanes, no more
        bottom, top = layout[axis]["range"]
        assert (bottom, top) == (3.5, -0.5)                            # a row more below them
    for trace in _sums(figure)["sum_idle"]:
        assert 2.5 < trace["y"][0] < 3.5


def test_the_sum_is_labelled_in_both_languages():
    for lang, row, idle, busy in (("en", "GPU time, added up", "idle", "busy"),
                                  ("zh", "GPU 时间合计", "空闲", "忙碌")):
        figure = viz.side_by_side_figure(default_workload(), lang=lang)
        data = figure.to_dict()["data"]
        assert [trace["text"] for trace in data if trace.get("mode") == "text"] == \
            [[row + "  "]] * 2
        sums = _sums(figure)
        # The serial red is long enough for its words; the overlap red is not, so the grey
        # beside it says both, starting at the red's end.
        assert sums["sum_idle"][0]["text"] == [f"{idle} 396.0 ms"]
        assert sums["sum_busy"][0]["text"][0].startswith(busy)
        assert sums["sum_idle"][1]["text"] == [""]
        said = sums["sum_busy"][1]
        assert said["text"][0].startswith(f"◂ {idle} 74.2") and busy in said["text"][0]
        assert said["insidetextanchor"] == "start"
        for trace in sums["sum_idle"] + sums["sum_busy"]:
            words = trace["text"][0] + trace["hovertext"][0]
            if lang == "zh":      # no English left but the units and the name of the GPU
                assert not re.findall(r"[A-Za-z]+", words.replace("GPU", "").replace("ms", "")
                                      .replace("<b>", "").replace("</b>", "")
                                      .replace("<br>", "")), words
    runs = default_workload()
    hover = _sums(viz.side_by_side_figure(runs))["sum_idle"][0]["hovertext"][0]
    share = 100 * (1 - runs[0]["metrics"]["gpu_busy_frac"])           # 396 ms of 755 ms
    assert "396.0 ms" in hover and f"({share:.0f}% of the GPU's time)" in hover
    assert "laid end to end" in hover


def test_one_run_or_a_step_window_has_no_sum():
    """The sum compares loops on one axis: a single run has nothing to compare against, and the
    step window draws every gap at its width already."""
    runs = default_workload()
    assert not _sums(viz.side_by_side_figure([runs[0]]))
    assert not _sums(viz.side_by_side_figure(runs, window=(40, 43)))
    assert viz.side_by_side_figure([runs[0]]).to_dict()["layout"]["yaxis"]["range"] == [2.5, -0.5]


def test_a_recorded_h200_first_click_adds_up_as_its_metrics_say():
    record = json.loads((ROOT / "assets/recorded/h200-first-click-defaults.json").read_text())
    figure = viz.side_by_side_figure(record["runs"])
    figure.to_plotly()                                                 # plotly validates it
    reds = [trace["x"][0] for trace in _sums(figure)["sum_idle"]]
    measured = [run["metrics"]["idle_us_total"] / 1000.0 for run in record["runs"]]
    assert reds == pytest.approx(measured, rel=1e-9)
    assert reds[1] < reds[0] / 5


# ---- the gaps themselves ------------------------------------------------------------------------

def test_whole_run_gaps_keep_their_widths_and_are_as_light_as_they_are_thin():
    normal, overlap = _idle_bands(viz.side_by_side_figure(default_workload()))
    for band, gap_count in ((normal, 90), (overlap, 90)):
        marker = band["marker"]
        assert marker["color"] == IDLE_FILL_OPAQUE and marker["line"]["width"] == 0
        assert len(band["x"]) == gap_count
    assert sum(normal["x"]) == pytest.approx(396.0) and sum(overlap["x"]) == pytest.approx(74.25)
    assert "opacity" not in normal["marker"]        # 4.4 ms is more than two pixels: opaque
    faint = overlap["marker"]["opacity"]            # 0.15 and 1.5 ms: under a pixel each
    assert max(faint) < 0.5 and min(faint) == FAINTEST_BAND


def test_the_step_window_draws_each_gap_as_it_did():
    normal, overlap = _idle_bands(viz.side_by_side_figure(default_workload(), window=(40, 43)))
    assert overlap["x"] == pytest.approx([1.5, 0.15, 1.5, 0.15])      # steps 40-43, in ms
    for band in (normal, overlap):
        assert band["marker"]["color"] == IDLE_FILL and band["marker"]["line"]["width"] == 0.6
        assert "opacity" not in band["marker"]


# ---- what Chromium draws ------------------------------------------------------------------------

DRAWN = """async (figure) => {
  const gd = document.getElementById('chart');
  await Plotly.newPlot(gd, figure.data, figure.layout);
  const panels = [];
  gd.querySelectorAll('g.trace.bars').forEach((group) => {
    const trace = group.__data__[0].trace;
    if (trace.legendgroup !== 'gpu_idle') return;
    const axis = gd._fullLayout[trace.xaxis === 'x' ? 'xaxis' : 'xaxis' + trace.xaxis.slice(1)];
    const bands = [...group.querySelectorAll('g.point path')].map((path) =>
        [path.getBBox().width, Number(getComputedStyle(path).opacity)]);
    panels.push({pxPerMs: axis._length / (axis.range[1] - axis.range[0]), bands});
  });
  return panels;
}"""


PLOT_AREAS = r"""() => {
  const layout = document.getElementById('chart')._fullLayout;
  return Object.keys(layout).filter((key) => /^yaxis\d*$/.test(key)).sort().map((key) => {
    const y = layout[key], x = layout['xaxis' + key.slice(5)];
    return [x._offset, y._offset, x._length, y._length];
  });
}"""


@pytest.fixture(scope="module")
def browser_page():
    """A page of the page's timeline width with plotly.js loaded."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    import plotly.offline

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": CHART_PX, "height": 900})
        page.set_content(f"<script>{plotly.offline.get_plotlyjs()}</script>"
                         f"<div id='chart' style='width:{CHART_PX}px;height:800px'></div>")
        yield page
        browser.close()


@pytest.fixture
def chart(browser_page):
    """``chart(figure)`` draws a figure and returns, per panel, its pixels per ms and its idle
    bands' (width, opacity) as drawn."""
    return lambda figure: browser_page.evaluate(DRAWN, figure.to_dict())


@pytest.fixture
def redness(browser_page):
    """``redness(figure)`` draws a figure's idle bands alone and returns, per panel, how much
    red its plot area shows: the sum over its pixels of how far each is from white."""
    image = pytest.importorskip("PIL.Image")
    numpy = pytest.importorskip("numpy")

    def measure(figure) -> list[float]:
        spec = figure.to_dict()
        spec["data"] = [trace for trace in spec["data"] if trace.get("legendgroup") == "gpu_idle"]
        browser_page.evaluate(DRAWN, spec)
        areas = browser_page.evaluate(PLOT_AREAS)
        png = browser_page.locator("#chart").screenshot()
        pixels = numpy.asarray(image.open(io.BytesIO(png)).convert("RGB")).astype(float)
        return [float(((255 - pixels[int(y):int(y + h), int(x):int(x + w), 1]) / 255).sum())
                for x, y, w, h in areas]
    return measure


def test_the_red_each_panel_draws_is_its_idle_time(chart):
    """Width drawn times opacity, summed over a panel's bands, in pixels: within a quarter of
    its idle time in pixels; the overlap panel draws about a fifth of the serial one's red."""
    runs = default_workload()
    panels = chart(viz.side_by_side_figure(runs))
    drawn = []
    for run, panel in zip(runs, panels):
        ink = sum(width * opacity for width, opacity in panel["bands"])
        idle_px = run["metrics"]["idle_us_total"] / 1000.0 * panel["pxPerMs"]
        assert ink == pytest.approx(idle_px, rel=0.25), (run["loop"], ink, idle_px)
        drawn.append(ink)
    assert drawn[1] / drawn[0] < 0.3


def test_a_gap_that_would_vanish_is_still_drawn_a_pixel_wide_and_light(chart):
    gaps = [0.0] * 90
    gaps[45] = 20.0                  # 20 µs in a run of 360 ms: a fortieth of a pixel
    panels = chart(viz.side_by_side_figure([_run(Loop.NORMAL, gaps),
                                           _run(Loop.OVERLAP, gaps)]))
    for panel in panels:
        [(width, opacity)] = panel["bands"]
        assert width >= 1.0 and opacity == pytest.approx(FAINTEST_BAND)


def test_the_overlap_panel_shows_as_much_less_red_as_it_idled(redness):
    """What the eye sees, in pixels: the overlap loop idled 19% as long as the serial one, and
    its panel shows between half and one and a half times that share of the serial one's red.
    (Outlined, its ninety one-pixel gaps showed 65% of it.)"""
    runs = default_workload()
    serial, overlap = redness(viz.side_by_side_figure(runs))
    idle_share = runs[1]["metrics"]["idle_us_total"] / runs[0]["metrics"]["idle_us_total"]
    assert 0.5 * idle_share < overlap / serial < 1.5 * idle_share, (overlap / serial, idle_share)


# ---- a few hundred steps: the idle share, column by column ------------------------------------

def long_workload(steps: int = 500) -> list[dict]:
    """The default workload run for ``steps`` decode steps: more gaps than the plot has columns."""
    return [_run(Loop.NORMAL, [CPU_US] * steps),
            _run(Loop.OVERLAP, [150.0 if step % 2 else 1500.0 for step in range(steps)])]


def _idle_rows(figure) -> list[dict]:
    """Each panel's idle-over-time bars (the GPU idle trace that is not a band over lanes)."""
    return [trace for trace in figure.to_dict()["data"] if trace.get("meta") == "idle_over_time"]


def test_hundreds_of_steps_draw_each_panels_idle_share_column_by_column():
    """500 steps on a 450-pixel plot: a row under the lanes, one bar per column of three
    pixels (neighbours of the same share one bar), as tall as the share of that column the GPU
    was idle. The bars' area is the idle time measured; the serial row stands about half high,
    the overlapped one low."""
    from viz.whole_run import IDLE_HEIGHT

    runs = long_workload()
    figure = viz.side_by_side_figure(runs)
    rows = _idle_rows(figure)
    assert len(rows) == 2 and not [t for t in _idle_bands(figure) if t not in rows]  # no bands
    means = []
    for run, row in zip(runs, rows):
        heights = [h / IDLE_HEIGHT for h in row["width"]]
        assert all(0 < h <= 1 + 1e-9 for h in heights)
        idle_ms = sum(h * x for h, x in zip(heights, row["x"]))
        assert idle_ms == pytest.approx(run["metrics"]["idle_us_total"] / 1000.0, rel=1e-6)
        means.append(idle_ms / (run["spans"][-1]["end_us"] / 1000.0))
    assert means[0] > 0.5 and means[1] < means[0] / 2.5          # 53% and 17% idle
    layout = figure.to_dict()["layout"]
    for axis, row in zip(("yaxis", "yaxis2"), rows):
        assert layout[axis]["tickvals"] == [0, 1, 2]                  # the lanes, then the rows
        assert layout[axis]["range"] == [4.5, -0.5]                   # idle over time, the sum
        assert all(2.5 < y < 3.5 for y in row["y"])
    labels = [trace["text"][0].strip() for trace in figure.to_dict()["data"]
              if trace.get("mode") == "text"]
    assert labels.count("GPU idle over time") == 2 and labels.count("GPU time, added up") == 2


def test_ninety_steps_keep_each_gap_and_no_idle_row():
    assert not _idle_rows(viz.side_by_side_figure(default_workload()))
    assert not _idle_rows(viz.side_by_side_figure(long_workload(), window=(40, 43)))


def test_the_idle_row_is_said_in_chinese():
    figure = viz.side_by_side_figure(long_workload(), lang="zh")
    labels = [trace["text"][0].strip() for trace in figure.to_dict()["data"]
              if trace.get("mode") == "text"]
    assert "GPU 空闲随时间" in labels
    assert "有" in _idle_rows(figure)[0]["hovertext"][0]


def test_a_whole_runs_legend_names_what_holds_time():
    """The forward and the CPU's processing hold most of each step; an upload of 50 µs a step
    (0.6% of it) is named in the step window's legend, not the whole run's."""
    figure = viz.side_by_side_figure(long_workload()).to_dict()
    named = {trace["name"] for trace in figure["data"] if trace.get("showlegend", True)
             and trace.get("name") and trace.get("mode") != "text"}
    assert named == {"GPU idle", "decode", "process_last"}, named
    window = viz.side_by_side_figure(long_workload(), window=(40, 43)).to_dict()
    assert "upload" in {trace["name"] for trace in window["data"] if trace.get("showlegend")}


def test_lag_marks_closer_than_a_few_pixels_are_one_mark_listing_them():
    from viz.gantt import MARK_LINES, _clustered

    marks = [(float(x), f"request {x}") for x in (0, 1, 2, 30, 31)]
    assert _clustered(marks, 5.0) == [(0.0, "request 0<br>request 1<br>request 2"),
                                      (30.0, "request 30<br>request 31")]
    assert _clustered(marks, 0.0) == marks                      # a step window: every mark
    many = _clustered([(0.0, f"r{i}") for i in range(MARK_LINES + 3)], 1.0)
    assert many[0][1].endswith("… +3")


def test_the_serial_row_shows_as_much_more_red_as_it_idled(redness):
    """What the eye sees of 500 steps: the overlapped row's red against the serial one's, in
    pixels, within a factor of 1.5 of their idle times' ratio."""
    runs = long_workload()
    serial, overlap = redness(viz.side_by_side_figure(runs))
    idle_share = runs[1]["metrics"]["idle_us_total"] / runs[0]["metrics"]["idle_us_total"]
    assert idle_share / 1.5 < overlap / serial < 1.5 * idle_share, (overlap / serial, idle_share)


def test_a_long_runs_bars_too_thin_to_see_are_left_out_merged_or_not():
    """800 steps, 2,400 spans: neighbours of one phase closer than half a pixel are merged, and
    what is still under a third of a pixel (a 50 µs upload a step) is left out, as in a short
    run: drawn, a browser widened each such sliver to a whole pixel, and five hundred of them
    painted a lane in a colour that held 1% of its time."""
    from viz.gantt import CHART_PX, INVISIBLE_PX

    runs = long_workload(800)
    figure = viz.side_by_side_figure(runs).to_dict()
    span_ms = min(run["spans"][-1]["end_us"] for run in runs) / 1000.0     # the shorter run
    drawn = [trace for trace in figure["data"] if trace.get("type") == "bar"
             and trace.get("legendgroup") in ("decode", "process_last", "upload")]
    assert {trace["legendgroup"] for trace in drawn} == {"decode", "process_last"}
    for trace in drawn:
        assert min(trace["x"]) >= INVISIBLE_PX * span_ms / CHART_PX * 0.999
