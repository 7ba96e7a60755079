"""Records on screen through their handlers (no engine, no browser): the step window's Zoom
button, and what an upload of any file gets back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")

from record.run_record import load_record  # noqa: E402
from ui import recorded_runs  # noqa: E402

RECORDED = ROOT / "assets" / "recorded"


def _figure(plot_data) -> dict:
    if isinstance(plot_data, dict):            # a gr.update holding the plot
        plot_data = plot_data["value"]
    return json.loads(plot_data.plot)


def _titles(plot_data) -> list[str]:
    return [a["text"] for a in _figure(plot_data)["layout"].get("annotations", [])]


@pytest.fixture(scope="module")
def record():
    return load_record(RECORDED / "h200-bundled-graph-cpu200.json")


def test_zoom_past_both_ends_draws_the_whole_run_and_says_which_steps(record):
    first, last = recorded_runs.default_window(record["runs"])
    figure, shown_first, shown_last = recorded_runs.zoom_steps(record, -5, 99999, "English")
    forward = ("prefill", "decode")                  # a step is a forward (record.window.step_range)
    steps = sorted({s["step"] for s in record["runs"][0]["spans"] if s["phase"] in forward})
    assert (shown_first, shown_last) == (steps[0], steps[-1])       # the boxes say it too
    titles = _titles(figure)
    assert all(f"steps {steps[0]}–{steps[-1]}:" in title for title in titles[:2]), titles
    # ... and that the window was cut, never silently: the steps the runs have.
    every = sorted({s["step"] for run in record["runs"] for s in run["spans"]
                    if s["phase"] in forward})
    cut = f"These runs have steps {every[0]} to {every[-1]}: the window is cut to them"
    assert cut in titles[0]
    assert sum("the window is cut" in title for title in titles) == 1
    assert first <= last
    figure, *_ = recorded_runs.zoom_steps(record, -5, 99999, "中文")
    assert "窗口截到这个范围" in _titles(figure)[0]
    figure, *_ = recorded_runs.zoom_steps(record, 20, 25, "English")
    assert not any("the window is cut" in title for title in _titles(figure))


def test_a_window_inside_the_runs_is_drawn_as_asked_and_never_said_cut(record):
    """Steps every run has, up to the last step any run has: the boxes keep what was asked
    and no note says the window was cut (one run may stop a step earlier: it is drawn to its
    last)."""
    forward = ("prefill", "decode")
    high = max(s["step"] for run in record["runs"] for s in run["spans"]
               if s["phase"] in forward)
    figure, first, last = recorded_runs.zoom_steps(record, high - 5, high, "English")
    assert (first, last) == (high - 5, high)
    assert not any("the window is cut" in title for title in _titles(figure))


def test_zoom_windows_hold_the_same_number_of_forwards_in_both_loops(record):
    figure, first, last = recorded_runs.zoom_steps(record, 20, 25, "English")
    titles = _titles(figure)[:2]
    assert all("steps 20–25: 6 forwards in" in title for title in titles), titles


@pytest.mark.parametrize("lang, said", [("English", "Enter a first and a last step"),
                                        ("中文", "请输入起始步和结束步")])
def test_zoom_with_an_empty_box_says_what_it_needs(record, lang, said):
    figure, first, last = recorded_runs.zoom_steps(record, None, 25, lang)
    assert said in json.dumps(_figure(figure), ensure_ascii=False)
    assert first == {"__type__": "update"} and last == {"__type__": "update"}


@pytest.mark.parametrize("lang, typed, said", [
    ("English", (2.5, 3), "Enter a first and a last step (whole numbers)"),
    ("English", (5, 2), "The first step (5) comes after the last (2)"),
    ("English", (9999, 10000), "steps 9999 to 10000 lie outside them"),
    ("中文", (2.5, 3), "整数"), ("中文", (5, 2), "起始步（5）在结束步（2）之后"),
    ("中文", (9999, 10000), "第 9999 到 10000 步不在其中")])
def test_a_window_the_runs_cannot_show_is_said_so_and_the_boxes_keep_it(record, lang, typed,
                                                                         said):
    """Not truncated (2.5), swapped (5, 2) or moved to the last step (9999): a message, in the
    page's language, and the boxes left as typed."""
    figure, first, last = recorded_runs.zoom_steps(record, *typed, lang)
    assert said in json.dumps(_figure(figure), ensure_ascii=False)
    assert first == {"__type__": "update"} and last == {"__type__": "update"}


# ---- uploads: every file gets an answer ------------------------------------------------------------

def _fields(values: tuple) -> dict:
    from dataclasses import fields

    from ui.view import MainView

    return dict(zip([f.name for f in fields(MainView)], values))


PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


@pytest.mark.parametrize("name, data, english, chinese", [
    ("chart.png", PNG, "it is a PNG image, not a run record or a trace", "一张 PNG 图片"),
    ("empty.json", b"", "it is an empty file", "一个空文件"),
    ("notes.txt", b"step,ms\n1,2\n", "text that does not start like a JSON object",
     "不以 JSON 对象或列表开头"),
    ("bundle.zip", b"PK\x03\x04" + bytes(40), "a ZIP archive", "ZIP 压缩包"),
])
def test_an_upload_that_is_plainly_no_trace_is_told_what_it_is_in_both_languages(
        tmp_path, name, data, english, chinese):
    path = tmp_path / name
    path.write_bytes(data)
    view = _fields(recorded_runs.show_upload(str(path), False, None, "English"))
    assert english in view["status"] and "status-error" in view["status"], view["status"]
    assert name in view["status"]
    assert view["said"]["key"] == "status_not_a_trace"
    assert chinese in _fields(recorded_runs.show_upload(str(path), False, None, "中文"))["status"]
    assert view["timeline"] == {"__type__": "update"}        # what was on screen stays


def test_json_that_is_no_trace_still_gets_the_parsers_reason(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text('{"hello": "world"}')
    view = _fields(recorded_runs.show_upload(str(path), False, None, "English"))
    assert "Cannot show notes.json" in view["status"] and "traceEvents" in view["status"]


def test_an_old_trace_of_ours_says_what_it_does_not_know_instead_of_zeros(tmp_path):
    """A trace written before the run metadata existed (as the first docs/example_trace.json
    was): its tracks say the runs, nothing says the device or the outputs."""
    from record.chrome_trace import RUN_METADATA, write_chrome_trace

    write_chrome_trace(load_record(ROOT / "docs" / "example_record.json"), tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != RUN_METADATA]
    (tmp_path / "example_trace.json").write_text(json.dumps(doc))
    view = _fields(recorded_runs.show_upload(str(tmp_path / "example_trace.json"), False, None,
                                             "English"))
    assert "(?)" not in view["status"], view["status"]
    assert "does not say what hardware" in view["status"], view["status"]
    metrics = view["metrics"]
    for key in ("tokens_per_s", "output_tokens", "ttft_ms_mean", "tpot_ms_mean"):
        assert f'data-metric="{key}"' not in metrics, key       # not in this trace: no row
    assert "0.00×" not in metrics and "whole_run_speedup" not in metrics


def test_a_profiler_trace_is_offered_for_download_as_it_was_uploaded(tmp_path):
    import shutil

    trace = tmp_path / "engine-graph.json.gz"
    shutil.copy(ROOT / "tests" / "data" / "traces" / "engine-graph-qwen05-b8.json.gz", trace)
    view = _fields(recorded_runs.show_upload(str(trace), False, None, "English"))
    assert "status-ok" in view["status"], view["status"]
    assert view["download_trace"]["value"] == str(trace)
    assert json.loads(Path(view["download_record"]["value"]).read_text())["schema"] == 1
    for key in ("tokens_per_s", "output_tokens", "engine_busy_frac"):
        assert f'data-metric="{key}"' not in view["metrics"], key


@pytest.mark.parametrize("lang, want", [
    ("English", ["Recorded on NVIDIA H200", "Run with: bundled, B = 16, CUDA graphs, 20 µs of extra",
                 "Result copy on the copy stream."]),
    ("中文", ["录制于 NVIDIA H200", "运行设置：bundled，B = 16，CUDA Graph，每步额外 CPU 工作 20 µs。",
             "结果回传在 copy stream 上。"]),
])
def test_a_recorded_run_says_what_it_was_run_with(lang, want):
    """A recording's settings are in its status, read from its config, in the page's language:
    the first click on the H200 ran with the 20 µs of extra CPU work the page sized there, not
    the CPU page's 4000."""
    view = recorded_runs.show_recorded("h200-first-click-defaults.json", lang)
    status = view[0] if isinstance(view, tuple) else view.status
    for text in want:
        assert text in status, (text, status)
    shared = recorded_runs.show_recorded("h200-bundled-graph-shared-prefix-kv160.json", "English")
    shared_status = shared[0] if isinstance(shared, tuple) else shared.status
    assert "KV pool of 160 pages." in shared_status


def test_a_profiled_run_opens_inside_its_profiler_window():
    """The kernel lanes cover steps 24-27; the profiler's start and stop sit at the window's
    edges (its stop held the scheduler for 50 ms after step 27), so the page opens on 25-26."""
    runs = load_record(RECORDED / "h200-smollm-graph-kernels.json")["runs"]
    assert recorded_runs.default_window(runs) == (25, 26)


# ---- two files side by side -----------------------------------------------------------------------

sys.path.insert(0, str(ROOT / "tests"))
from loop_traces import loop_trace_bytes  # noqa: E402


@pytest.fixture()
def two_traces(tmp_path):
    """Mini-SGLang's overlap loop and its normal loop, as torch.profiler traces."""
    overlap, serial = tmp_path / "overlap.json", tmp_path / "serial.json"
    overlap.write_bytes(loop_trace_bytes(overlap=True))
    serial.write_bytes(loop_trace_bytes(overlap=False))
    return str(overlap), str(serial)


@pytest.mark.parametrize("lang, side, overlapped, measured", [
    ("English", "Side by side: overlap.json", "overlapped loop", "measured per step"),
    ("中文", "并排：overlap.json", "重叠循环", "每步实测"),
])
def test_two_traces_are_seen_as_live_runs_are(two_traces, lang, side, overlapped, measured):
    """Two panels on one time axis, the step window, the metrics with a ratio column, the serial
    one the baseline whatever the order, and the step-through over both."""
    from ui import step_through

    view = _fields(recorded_runs.show_upload(list(two_traces), False, None, lang))
    assert "status-ok" in view["status"] and side in view["status"], view["status"]
    record = view["record"]
    assert [run["source"] for run in record["runs"]] == ["overlap.json", "serial.json"]
    titles = _titles(view["timeline"])[:2]
    assert overlapped in titles[0] and overlapped not in titles[1], titles
    layout = _figure(view["timeline"])["layout"]
    assert layout["xaxis"].get("matches") == "x2" or layout["xaxis2"].get("matches") == "x"
    zoomed = _titles(view["zoomed"])[:2]
    assert all(f"{view['first_step']}–{view['last_step']}" in title for title in zoomed), zoomed
    metrics = view["metrics"]
    assert measured in metrics and 'data-metric="measured_speedup"' in metrics
    value = float(metrics.split('data-metric="measured_speedup" data-value="')[1].split('"')[0])
    assert 1.3 < value < 1.6                      # serial step ÷ overlapped step
    header = metrics.split("<thead>")[1].split("</thead>")[0]
    assert "overlap.json / " in header and header.index("overlap.json / ") > header.index(
        "serial.json")                                     # overlap over the serial baseline
    # the step-through over an imported run: its steps, a caption that is not "no forward"
    choices, slider, caption, *_ = step_through.reset_replay(record, lang)
    assert len(choices["choices"]) == 2 and slider["maximum"] > slider["minimum"]
    assert "engine stream" not in caption and "engine stream" not in caption


def test_a_trace_is_added_beside_the_record_on_screen(two_traces):
    record = load_record(RECORDED / "h200-bundled-graph-cpu200.json")
    view = _fields(recorded_runs.show_upload([two_traces[0]], True, record, "English"))
    assert "Beside the runs on screen: overlap.json" in view["status"], view["status"]
    runs = view["record"]["runs"]
    assert [run["loop"] for run in runs] == ["normal", "overlap", "imported"]
    assert len(_titles(view["timeline"])) >= 3
    metrics = view["metrics"]               # the loops' formula, the trace's terms, both ratios
    assert 'data-block="trace"' in metrics and "predicted speedup" in metrics
    assert metrics.split("<thead>")[1].split("</thead>")[0].count(" / normal") == 2
    # unticked, a file replaces what is on screen
    alone = _fields(recorded_runs.show_upload([two_traces[0]], False, record, "English"))
    assert [run["loop"] for run in alone["record"]["runs"]] == ["imported"]


def test_more_runs_than_a_chart_holds_leave_the_oldest_out_and_say_so(two_traces):
    record = load_record(RECORDED / "h200-bundled-graph-cpu200.json")
    view = _fields(recorded_runs.show_upload(list(two_traces) * 2, True, record, "English"))
    assert "the oldest were left out" in view["status"]
    assert len(view["record"]["runs"]) == 4


def test_a_second_file_that_cannot_be_read_leaves_the_view_and_says_which(two_traces, tmp_path):
    bad = tmp_path / "chart.png"
    bad.write_bytes(PNG)
    view = _fields(recorded_runs.show_upload([two_traces[0], str(bad)], False, None, "English"))
    assert "chart.png" in view["status"] and "status-error" in view["status"]
    assert view["timeline"] == {"__type__": "update"}


def test_an_upload_reads_its_file_when_the_waiting_worker_has_died(two_traces):
    """The worker started ahead of time for the next upload may wait for hours, and anything
    that ends processes on the machine can end it meanwhile. An upload then reads its file with
    a worker of its own. (Handed the dead one, both files were refused, "the process reading the
    file ended", and the export test below failed with ``KeyError: 'value'``.)"""
    from ui import parsing
    from ui.state import APP

    parsing.prepare()
    with APP.parsers_lock:
        spare, _ = APP.parsers[-1]
        spare.kill()
        spare.join(timeout=10)
    view = _fields(recorded_runs.show_upload(list(two_traces), False, None, "English"))
    assert "status-ok" in view["status"], view["status"]
    assert [run["source"] for run in view["record"]["runs"]] == ["overlap.json", "serial.json"]


def test_the_page_export_of_two_traces_opens_as_they_were(two_traces):
    view = _fields(recorded_runs.show_upload(list(two_traces), False, None, "English"))
    assert "status-ok" in view["status"], view["status"]
    again = _fields(recorded_runs.show_upload(view["download_record"]["value"], False, None,
                                              "English"))
    runs = again["record"]["runs"]
    assert [run["loop_seen"]["verdict"] for run in runs] == ["overlapped", "serial"]
    assert [run["source"] for run in runs] == ["overlap.json", "serial.json"]
    assert again["metrics"] == view["metrics"]


@pytest.mark.parametrize("lang, title, words", [
    ("English", "The article's own code: what this record shows",
     ["studies/peers/minisglang/hook.py", "% (serial)", "× per decode step",
      "python -m studies peers mini-sglang"]),
    ("中文", "原文自己的代码：这份记录说明什么",
     ["studies/peers/minisglang/hook.py", "%（串行）", "每个解码步快",
      "python -m studies peers mini-sglang"]),
])
def test_the_article_own_code_is_explained_beside_its_recorded_runs(lang, title, words):
    """Mini-SGLang's recorded loops open with the section "The article's own code" one click
    away: how it was measured (the hook and its cost) and what it shows, from its own metrics
    (its serial step, the CPU's part of it, overlap's gain); our own records have no such section."""
    import json
    import re

    from ui.recorded_runs import RECORDED_DIR

    record = json.loads((RECORDED_DIR / "h200-minisglang-qwen05-b16.json").read_text())
    serial = next(r["metrics"] for r in record["runs"] if r["loop"] == "normal")
    view = recorded_runs.show_recorded("h200-minisglang-qwen05-b16.json", lang)
    status = view[0] if isinstance(view, tuple) else view.status
    assert f"<summary>{title}</summary>" in status
    text = re.sub(r"<[^>]+>", "", status)
    for word in words:
        assert word in text, (word, text)
    assert f"{serial['steady_step_us'] / 1000:.2f} ms" in text
    assert f"{serial['t_cpu_us'] / 1000:.2f} ms" in text
    ours = recorded_runs.show_recorded("h200-first-click-defaults.json", lang)
    assert title not in (ours[0] if isinstance(ours, tuple) else ours.status)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("step_us, rest", [(2040.0, None), (2140.0, "+"), (1940.0, "-")])
def test_a_peer_serial_step_adds_up_as_printed(lang, step_us, rest):
    """The section's serial step is said as terms that add up to it as printed: a forward and CPU
    work, plus the waiting neither holds, or less the CPU work that ran under the forward (a
    1.94 ms step of a 1.10 ms forward and 0.94 ms of CPU work is not left to the reader)."""
    import re

    from ui.status import render_said, said

    metrics = {"steady_step_us": step_us, "t_fwd_us": 1100.0, "t_cpu_us": 940.0,
               "steady_busy_frac": 0.5}
    record = {"env": {"engine": "mini-sglang"}, "notes": [],
              "runs": [{"loop": "normal", "metrics": metrics},
                       {"loop": "overlap", "metrics": dict(metrics, steady_step_us=1200.0)}]}
    values: dict = {}
    folded = recorded_runs._peer_section(record, values)
    text = re.sub(r"<[^>]+>", "", render_said(said("no_runs", "ok", folded=folded, **values), lang))
    said_step = re.search(r"(\d+\.\d\d) ms[:：] *(.*?)[,，] *(?:so the GPU|所以)", text)
    assert said_step, text
    step, terms = float(said_step.group(1)), said_step.group(2)
    numbers = [float(n) for n in re.findall(r"(\d+\.\d\d) ms", terms)]
    assert numbers[:2] == [1.10, 0.94], terms
    if rest is None:
        assert len(numbers) == 2 and step == pytest.approx(1.10 + 0.94)
    else:
        assert len(numbers) == 3, terms
        sign = 1 if rest == "+" else -1
        assert step == pytest.approx(1.10 + 0.94 + sign * numbers[2]), terms


# ---- engines side by side on one workload (ui.same_work) ---------------------------------------

def _copy(src: Path, dst: Path, **changes) -> None:
    record = json.loads(src.read_text())
    for key, value in changes.items():
        section, _, name = key.partition("__")
        record[section][name] = value
    dst.write_text(json.dumps(record))


def test_records_of_one_workload_by_other_engines_are_offered_together(tmp_path):
    from ui import same_work
    recorded = recorded_runs.RECORDED_DIR
    ours, mini = "h200-ours-qwen05-b16.json", "h200-minisglang-qwen05-b16.json"
    sgl = "h200-sglang-qwen05-b16.json"
    for chosen in (ours, mini, sgl):                         # ours first, whichever is chosen
        assert same_work.same_work(chosen) == [ours, mini, sgl]
    assert same_work.same_work("h200-qwen05-graph-b64.json") == []   # no other engine's
    assert same_work.same_work(None) == [] and same_work.same_work("nope.json") == []
    # Another workload (a longer output), or the same engine twice, is no comparison.
    _copy(recorded / ours, tmp_path / ours)
    _copy(recorded / mini, tmp_path / mini, config__max_new_tokens=128)
    assert same_work.same_work(ours, tmp_path) == []
    _copy(recorded / mini, tmp_path / "sglang.json", env__engine="sglang")
    _copy(recorded / ours, tmp_path / "again.json")
    assert same_work.same_work(ours, tmp_path) == [ours, "sglang.json"]
    # A file's header is read once per version of it: an edited file is read again.
    _copy(recorded / mini, tmp_path / mini)          # now the same work
    assert same_work.same_work(ours, tmp_path) == [ours, mini, "sglang.json"]


@pytest.mark.parametrize("lang, said", [("English", "3 engines on the same work"),
                                        ("中文", "3 个引擎跑同一负载")])
def test_the_engines_are_drawn_on_one_axis_and_said_in_the_readers_language(lang, said):
    from dataclasses import fields

    from ui import same_work
    from ui.view import MainView

    view = dict(zip([f.name for f in fields(MainView)],
                    recorded_runs.show_same_work("h200-minisglang-qwen05-b16.json", lang)))
    assert said in view["status"]
    runs = view["record"]["runs"]
    assert [(r["loop"], r["source"]) for r in runs] == [
        ("normal", "h200-ours-qwen05-b16.json"), ("overlap", "h200-ours-qwen05-b16.json"),
        ("normal", "h200-minisglang-qwen05-b16.json"),
        ("overlap", "h200-minisglang-qwen05-b16.json"),
        ("normal", "h200-sglang-qwen05-b16.json"), ("overlap", "h200-sglang-qwen05-b16.json")]
    names = _titles(view["timeline"])
    ours = "this project" if lang == "English" else "本项目"
    assert len(names) == 6 and any(ours in n for n in names) and \
        any("Mini-SGLang" in n for n in names) and any("SGLang 0.5.17" in n for n in names)
    offered = same_work.offer("h200-ours-qwen05-b16.json", lang)
    assert offered["visible"] and "3" in offered["value"]
    from ui.status import render_said
    # Said again in the other language after a switch: the engines' names too.
    other, name = ("zh", "本项目的引擎") if lang == "English" else ("en", "this project's engine")
    assert name in render_said(view["said"], other)
    assert not same_work.offer("h200-bundled-eager.json", lang)["visible"]


@pytest.mark.parametrize("file, en, zh", [
    ("h200-ours-qwen05-b16.json", "Made by this project's engine, commit 7944d1e.",
     "由本项目的引擎录制，提交 7944d1e。"),
    ("h200-sglang-qwen05-b16.json", "Made by SGLang (the system the article describes), "
     "release 0.5.17.", "由SGLang（文章所讲的系统）录制，版本 0.5.17。"),
])
def test_a_recorded_run_names_the_engine_and_code_that_made_it_in_either_language(file, en, zh):
    """Who made a record is said as text keys, so a language switch says it again: the status
    spec a recorded run leaves renders in the other language with no English left over."""
    from dataclasses import fields

    from ui.status import render_said
    from ui.view import MainView
    view = dict(zip([f.name for f in fields(MainView)], recorded_runs.show_recorded(file, "English")))
    assert en in view["status"]
    again = render_said(view["said"], "zh")
    assert zh in again and "engine" not in again and "commit" not in again


def test_a_record_label_names_the_day_not_the_time():
    import viz
    record = load_record(recorded_runs.RECORDED_DIR / "h200-minisglang-qwen05-b16.json")
    assert "T" in record["env"]["date"]                      # the record keeps the time
    label = viz.record_label(record)
    assert label.endswith(record["env"]["date"][:10]) and "T" not in label.rpartition(" ")[2]


def test_what_to_look_for_follows_the_record_on_screen():
    """An imported trace's lanes are its own streams and threads: the panel beside the chart says
    what to look for in them, not in our scheduler and engine streams."""
    import texts
    from record.imported.given_file import load_any

    trace = load_any(ROOT / "tests" / "data" / "traces" / "sglang-normal-b1.trace.json.gz")
    ours = load_record(recorded_runs.RECORDED_DIR / "h200-ours-qwen05-b16.json")
    for lang in ("en", "zh"):
        assert recorded_runs.shown(None, trace, lang).look_for == texts.t(lang, "timeline_help_import")
        assert recorded_runs.shown(None, ours, lang).look_for == texts.t(lang, "timeline_help")


def test_a_run_a_busy_machine_disturbed_is_shown_beside_the_quiet_recording_of_its_work():
    """A class on a busy laptop still sees what the loops do: a live run whose comparison the
    machine's load spoiled is shown at once beside the bundled recording of the same page workload
    on a quiet machine of the same kind (its line under the headline, its chart on the canvas);
    a quiet run, another workload or another device gets none."""
    from ui import same_work

    quiet = load_record(recorded_runs.RECORDED_DIR / "cpu-2core-defaults.json")
    assert same_work.quiet_recording(quiet) is None                # not disturbed: nothing beside
    busy = json.loads(json.dumps(quiet))
    busy["runs"][1]["host"]["other_cpu_frac"] = 0.6                # other programs took the cores
    found = same_work.quiet_recording(busy)
    assert found is not None and found[1] == "cpu-2core-defaults.json"
    for section, key, value in (("config", "max_new_tokens", 64), ("env", "device_kind", "cuda"),
                                ("config", "stop_tokens_from_probe", False)):
        other = json.loads(json.dumps(busy))
        other[section][key] = value
        assert same_work.quiet_recording(other) is None
    for lang, refusal, beside in (("en", "Not a fair comparison", "The same work on a quiet machine"),
                                  ("zh", "这次比较不可信", "同一负载在空闲机器上")):
        view = recorded_runs.shown(None, busy, lang)
        assert refusal in view.headline and beside in view.headline
        assert view.live["visible"] and json.loads(view.live["value"])["recording"]
        calm = recorded_runs.shown(None, quiet, lang)
        assert beside not in calm.headline and calm.live["visible"] is False
