"""What a reader sees first after a run: the one-line headline (a claim, a plain "not faster",
or a refusal when the machine was too busy), the busy-machine badge in the panel titles, the
metrics a student needs with the rest one click away, and phase colours that stay apart."""

from __future__ import annotations

import itertools
import math
import re
from html import unescape

import pytest

pytest.importorskip("plotly", reason="viz needs plotly")

import viz  # noqa: E402
from record.host_load import machine_load  # noqa: E402
from viz.headline import busy_badge_lines  # noqa: E402
from viz.panels import KEY_ROWS  # noqa: E402
from viz.style import PHASE_COLORS  # noqa: E402

GPU = ("scheduler_stream", "engine_stream")


def _run(loop: str, step_us: float, idle_us: float, host: dict | None = None) -> dict:
    """A run of ``loop`` with decode steps of ``step_us`` and GPU idle of ``idle_us`` between
    its ten forwards (5000 µs each)."""
    spans, t = [], 0.0
    gap = idle_us / 9
    for step in range(10):
        spans.append({"lane": "engine_stream", "phase": "decode", "step": step, "start_us": t,
                      "end_us": t + 5000.0})
        t += 5000.0 + gap
    metrics = {"steady_step_us": step_us, "t_fwd_us": 5000.0, "t_cpu_us": 3000.0,
               "tokens_per_s": 100.0, "gpu_busy_frac": 0.8, "idle_us_total": idle_us}
    run = {"loop": loop, "decode_steps": 1, "extra_cpu_us": 0, "label": loop,
           "lanes": ["cpu", *GPU],
           "gpu_lanes": list(GPU), "metrics": metrics, "spans": spans, "outputs": []}
    if host is not None:
        run["host"] = host
    return run


def _record(*runs: dict, kind: str = "cpu-process") -> dict:
    return {"schema": 1, "env": {"device_kind": kind}, "config": {}, "runs": list(runs)}


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


QUIET = {"cpus": 2.0, "other_cpu_frac": 0.05, "device_cpu_frac": 0.97}
BUSY = {"cpus": 2.0, "other_cpu_frac": 0.55, "device_cpu_frac": 0.95}
STARVED = {"cpus": 2.0, "other_cpu_frac": 0.10, "device_cpu_frac": 0.40}


def test_a_faster_overlap_is_claimed_in_one_line_naming_the_device_that_plays_the_gpu():
    record = _record(_run("normal", 8000, 27000, QUIET), _run("overlap", 5000, 4500, QUIET))
    line = _text(viz.headline_html(record, "en"))
    assert line.startswith("GPU (here the device process playing it) idle 27.0 → 4.5 ms, "
                           "overlap 1.60× faster per decode step")
    assert "the CPU's work now runs under the GPU's forward" in line
    zh = _text(viz.headline_html(record, "zh"))
    assert "GPU（此处由设备进程扮演） 空闲 27.0 → 4.5 ms" in zh and "1.60×" in zh
    on_gpu = _text(viz.headline_html(_record(*record["runs"], kind="cuda"), "en"))
    assert on_gpu.startswith("GPU idle 27.0 → 4.5 ms")


def test_overlap_not_faster_is_said_plainly():
    record = _record(_run("normal", 8000, 27000, QUIET), _run("overlap", 8800, 20000, QUIET))
    html = viz.headline_html(record, "en")
    assert 'data-verdict="not-faster"' in html and "was not faster per decode step (0.91×)" in html


@pytest.mark.parametrize("host, why", [
    (BUSY, "other programs used 55% of this machine's 2 cores"),
    (STARVED, "the device process had its core only 40% of its working time")])
def test_a_busy_machine_makes_the_headline_refuse_to_compare_and_badges_the_panel(host, why):
    record = _record(_run("normal", 8000, 27000, QUIET), _run("overlap", 5000, 4500, host))
    html = viz.headline_html(record, "en")
    assert 'data-verdict="busy"' in html and "Not a fair comparison" in html and why in html
    assert "faster per decode step" not in html
    assert "这次比较不可信" in viz.headline_html(record, "zh")
    assert busy_badge_lines(record["runs"][0], "en") == []             # the quiet run has none
    titles = [unescape(a["text"]) for a in viz.side_by_side_figure(record["runs"]).to_dict()["layout"]
              ["annotations"]]
    assert why in titles[1] and "busy machine" not in titles[0]
    assert machine_load(record["runs"][1]).busy and not machine_load(record["runs"][0]).busy


def test_both_reasons_go_on_lines_of_their_own_under_the_panel_title():
    """A title line is as wide as the chart: each reason the machine was busy gets its own."""
    both = {"cpus": 2.0, "other_cpu_frac": 0.51, "device_cpu_frac": 0.71}
    record = _record(_run("normal", 8000, 27000, QUIET), _run("overlap", 5000, 4500, both))
    for lang in ("en", "zh"):
        title = viz.side_by_side_figure(record["runs"], lang=lang).to_dict()["layout"][
            "annotations"][1]["text"]
        lines = [_text(line) for line in title.split("<br>")]
        badge = [line for line in lines if "51%" in line or "71%" in line]
        assert len(badge) == 2 and all(len(line) < 80 for line in badge), badge


def test_the_live_canvas_puts_the_badge_under_the_title_a_line_a_reason():
    """The canvas drawn while a run is on carries the same badge lines as the finished panels."""
    import json

    both = {"cpus": 2.0, "other_cpu_frac": 0.51, "device_cpu_frac": 0.71}
    runs = [_run("normal", 8000, 27000, QUIET), _run("overlap", 5000, 4500, both)]
    for lang in ("en", "zh"):
        quiet, busy = json.loads(viz.live_payload(runs, lang))["runs"]
        assert len(quiet["titles"]) == 1 and "27.0 ms" in quiet["titles"][0]
        assert len(busy["titles"]) == 3 and busy["titles"][1:] == busy_badge_lines(runs[1], lang)
        assert "51%" in busy["titles"][1] and "71%" in busy["titles"][2]
        assert "51%" not in busy["titles"][0] and "71%" not in busy["titles"][0]


def test_one_loop_or_a_trace_gets_no_comparison():
    single = _text(viz.headline_html(_record(_run("overlap", 5000, 4500)), "en"))
    assert "overlap alone: choose normal and overlap to compare them" in single
    assert viz.headline_html(None, "en") == ""
    other = {**_run("normal", 5000, 4500), "loop": "other"}
    assert viz.headline_html(_record(other), "en") == ""       # a loop this code does not know


def _trace(verdict: str, step_us: float, wait_us: float, busy: float, name: str) -> dict:
    """An imported trace's run as the import makes it: its loop read from its timing, its
    terms the GPU's busy time and its wait for the host per step."""
    run = _run("imported", step_us, 0.0)
    run["metrics"] = {**run["metrics"], "t_fwd_us": step_us - wait_us, "t_cpu_us": None,
                      "gpu_wait_us": wait_us, "steady_busy_frac": busy}
    return {**run, "label": f"imported: {name}", "source": name,
            "loop_seen": {"verdict": verdict}}


@pytest.mark.parametrize("verdict, said, zh", [
    ("serial", "a serial loop, GPU busy 40% of its steady steps</b>: of each 5.00 ms step the GPU "
               "waited 3.00 ms for the host; overlapping the host's part with the forward would "
               "make a step about 1.67× faster", "串行循环，稳定阶段 GPU 忙碌 40%"),
    ("overlapped", "an overlapped loop, GPU busy 40% of its steady steps", "重叠循环"),
    ("unknown", "its timing does not tell a serial loop from an overlapped one", "看不出"),
])
def test_an_imported_trace_gets_a_headline_of_its_loop(verdict, said, zh):
    record = _record(_trace(verdict, 5000.0, 3000.0, 0.4, "sglang.json.gz"), kind="cuda")
    assert said in viz.headline_html(record, "en")
    assert zh in viz.headline_html(record, "zh")
    assert "imported: sglang.json.gz" in _text(viz.headline_html(record, "en"))


def test_two_traces_side_by_side_get_their_per_step_ratio():
    serial = _trace("serial", 5000.0, 3000.0, 0.4, "a.json")
    overlapped = _trace("overlapped", 2500.0, 500.0, 0.8, "b.json")
    line = _text(viz.headline_html(_record(overlapped, serial, kind="cuda"), "en"))
    assert line.startswith("GPU busy 40% → 80%, imported: b.json 2.00× faster per step than "
                           "imported: a.json: its GPU waited 0.50 ms a step for the host, "
                           "against 3.00 ms.")
    slower = _trace("overlapped", 6000.0, 500.0, 0.8, "b.json")
    assert "was not faster per step" in _text(viz.headline_html(_record(serial, slower), "en"))
    assert "并不比" in viz.headline_html(_record(serial, slower), "zh")


def test_an_imports_what_to_look_for_describes_its_lanes_not_ours():
    from texts import t
    from viz.headline import look_for_key

    trace = _record(_trace("serial", 5000.0, 3000.0, 0.4, "a.json"))
    assert look_for_key(trace) == "timeline_help_import"
    assert look_for_key(_record(_run("normal", 8000, 27000))) == "timeline_help"
    assert look_for_key(None) == "timeline_help"
    for lang in ("en", "zh"):
        said = t(lang, "timeline_help_import")
        assert "GPU 0 stream 7" in said and "token pool" not in said and "token_pool" not in said
        assert "scheduler stream" not in said and "wait_stream" not in said


def test_the_table_shows_what_a_student_needs_and_folds_the_rest():
    normal, overlap = _run("normal", 8000, 27000), _run("overlap", 5000, 4500)
    html = viz.metrics_html([normal, overlap])
    folded = html.index('data-fold="all-metrics"')
    shown = html[:folded]
    assert all(f'data-metric="{key}"' in shown for key in KEY_ROWS
               if normal["metrics"].get(key) is not None)
    assert 'data-metric="tokens_per_s"' in html[folded:]        # one click away
    assert html.index('data-fold="formula" open') < folded       # why, open before the numbers
    assert "All metrics" in html and "全部指标" in viz.metrics_html([normal, overlap], "zh")


def _lab(hex_color: str) -> tuple[float, float, float]:
    """CIE L*a*b* of an sRGB colour (D65)."""
    rgb = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_the_scheduler_threads_phases_are_colours_a_reader_tells_apart():
    """Phases of the CPU lane differ by more than 35 (CIE76 ΔE; about 2.3 is the smallest
    difference a person notices side by side, and thin bars need far more: receive and launch,
    two light blues, were 15 apart)."""
    phases = ("receive", "schedule", "launch", "process_last")
    for a, b in itertools.combinations(phases, 2):
        distance = math.dist(_lab(PHASE_COLORS[a]), _lab(PHASE_COLORS[b]))
        assert distance > 35, (a, b, round(distance, 1))


def test_a_gpu_that_still_waits_is_not_said_to_have_its_cpu_work_hidden():
    """Faster, but no loop kept the GPU busy (steady): the line says how busy the busiest loop
    kept it, in both languages, instead of claiming the CPU's work runs under the forward."""
    normal, overlap = _run("normal", 8000, 27000, QUIET), _run("overlap", 5000, 4500, QUIET)
    normal["metrics"]["steady_busy_frac"], overlap["metrics"]["steady_busy_frac"] = 0.45, 0.63
    line = _text(viz.headline_html(_record(normal, overlap), "en"))
    assert "1.60× faster per decode step" in line and "now runs under" not in line
    assert "the busiest loop kept it busy 63% of the time" in line
    assert "最忙的循环也只让它忙了 63% 的时间" in _text(viz.headline_html(_record(normal, overlap),
                                                                      "zh"))
    overlap["metrics"]["steady_busy_frac"] = 0.97
    assert "now runs under" in _text(viz.headline_html(_record(normal, overlap), "en"))


def test_beside_other_engines_only_our_own_loops_are_added_to_the_gain():
    """Three engines side by side: the line's gain is our overlap over our serial loop, with our
    own other loops after it; another engine's loops are no gain of ours."""
    ours = [_run("normal", 8000, 27000, QUIET), _run("overlap", 5000, 4500, QUIET),
            _run("multistep", 4000, 3000, QUIET)]
    theirs = [_run("normal", 16000, 60000, QUIET), _run("overlap", 9000, 9000, QUIET)]
    for run in ours:
        run["label"] = f"{run['loop']} (this project, CUDA graphs)"
    for run in theirs:
        run["label"] = f"{run['loop']} (Mini-SGLang 20fcd7f)"
    line = _text(viz.headline_html(_record(*ours, *theirs, kind="cuda"), "en"))
    assert "2.00×" in line                                    # our multistep over our serial
    assert "0.50×" not in line and "0.89×" not in line        # their loops over our serial
