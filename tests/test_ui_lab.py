"""The hazard lab panel's handler on CPU, through the scheduler process, as a specification: a
removed safeguard whose fault can happen on CPU is shown as a detected fault; the safe engine
shows none; a CUDA-only switch says so; both languages; a bad seed is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")
pytest.importorskip("torch")

from ui_wiring import events_running, one_queue, queues  # noqa: E402

from ui import lab_runs, scheduler_link  # noqa: E402


def _final(gen):
    outputs = list(gen)
    return outputs, outputs[-1]


@pytest.fixture(scope="module", autouse=True)
def close_scheduler():
    yield
    scheduler_link.shutdown()


def test_no_finished_guard_shows_a_detected_fault():
    outputs, (html, shown) = _final(lab_runs.run_lab("no_finished_guard", "bundled", "cpu", 0,
                                                "English"))
    assert "Loading the engine" in outputs[0][0]                 # before it knows the device
    said = [html for html, _ in outputs[:-1]]
    assert any("Running the lab on CPU" in text for text in said), said   # the device it found
    assert 'data-fault="true"' in html and 'data-switch="no_finished_guard"' in html
    assert "Fault found by the checks: Drop the finished-request guard" in html
    # What the switch's text promises: the lag-one token ends the request a second time and
    # the allocator catches its slot given back twice; the run stops there, uncounted.
    assert "Double free caught by the allocator" in html and "request slot" in html
    assert shown["report"]["fault_found"] and shown["report"]["double_free"]["what"] == \
        "request slot"
    assert "The run stopped at the error" in html and "opened 0 times" not in html
    zh = lab_runs.redraw(shown, "中文")
    assert "检查发现了故障" in zh and "Drop" not in zh


def test_the_safe_engine_shows_no_fault_and_how_often_the_guards_acted():
    _, (html, shown) = _final(lab_runs.run_lab(None, "bundled", "cpu", 0, "English"))
    assert 'data-fault="false"' in html and 'data-switch="safe"' in html
    assert "No fault: every check passed" in html
    assert "race window did not open" not in html      # the safe engine is not "lucky"
    assert shown["report"]["windows"] > 0 and "The safeguards acted" in html
    zh = lab_runs.redraw(shown, "中文")
    assert "没有故障" in zh


def test_a_cuda_only_switch_says_it_needs_cuda_on_cpu():
    _, (html, _) = _final(lab_runs.run_lab("no_wait_stream", "bundled", "cpu", 0, "English"))
    assert 'data-fault="false"' in html and "this switch needs CUDA" in html
    assert "two CUDA streams" in html


@pytest.mark.parametrize("seed", [-1, 2.5, float("inf")])
def test_a_bad_seed_is_refused(seed):
    (html, shown), = list(lab_runs.run_lab("no_finished_guard", "bundled", "cpu", seed, "English"))
    assert "status-error" in html and "whole number" in html and shown is None


@pytest.mark.parametrize("seed", [None, float("nan")])
def test_an_empty_seed_is_named_empty_in_the_pages_language(seed):
    (html, shown), = list(lab_runs.run_lab("no_finished_guard", "bundled", "cpu", seed, "English"))
    assert "status-error" in html and shown is None
    assert "The workload seed is empty or too large to read: enter a number from 0 to " \
        "2147483647." in html
    assert "None" not in html and "nan" not in html
    (zh, _), = list(lab_runs.run_lab("no_finished_guard", "bundled", "cpu", seed, "中文"))
    assert "负载种子为空" in zh


def test_the_windows_line_only_where_the_engine_counts_them():
    """A switch whose race windows the engine does not count gets no "opened 0 times" beside the
    fault the checks found; a counted one does."""
    from dataclasses import asdict

    from engine.lab.hazard_lab import LabReport
    from viz.lab_report import report_html
    found = dict(fault_found=True, differing=[(0, 3)])
    uncounted = asdict(LabReport("no_cache_lock", "cpu", windows_counted=False, **found))
    assert "lab-windows" not in report_html(uncounted, "bundled", 0, "en")
    counted = asdict(LabReport("no_finished_guard", "cpu", windows=3, **found))
    assert 'data-windows="3"' in report_html(counted, "bundled", 0, "en")


def test_switch_choices_and_descriptions_in_both_languages():
    from engine.lab.hazard_lab import HAZARDS

    choices = lab_runs.switch_choices("English")
    names = [value for _, value in choices["choices"]]
    assert names == list(HAZARDS)                   # every switch the lab has, in its order
    assert "value" not in choices                   # the choice is the reader's, never a reply's
    assert lab_runs.FIRST_SWITCH in names
    assert "What it guards, and what goes wrong without it" in lab_runs.describe_switch(
        "no_finished_guard", "English")[0]
    assert "CUDA" in lab_runs.describe_switch("no_wait_stream", "English")[0]
    zh_choices = lab_runs.switch_choices("中文")
    assert "value" not in zh_choices
    assert "它保护什么，去掉后会出什么错" in lab_runs.describe_switch("single_host_buffer", "中文")[0]
    assert "overwrites batch n's tokens" in lab_runs.describe_switch("single_host_buffer",
                                                                "English")[0]


def test_every_switch_has_words_in_both_languages():
    from engine.lab.hazard_lab import HAZARDS
    from texts.teach import HAZARD_NAMES

    for lang in ("en", "zh"):
        missing = [name for name in HAZARDS if name not in HAZARD_NAMES[lang]]
        assert not missing, (lang, missing)


def test_switches_that_need_cuda_are_marked_before_the_click_on_a_machine_without_one():
    """Generic over HAZARDS' cuda_only: no switch is special-cased in the UI."""
    from engine.lab.hazard_lab import HAZARDS

    choices = lab_runs.switch_choices("English", device="auto")
    marked = {name for title, name in choices["choices"] if "(needs CUDA: not here)" in title}
    if scheduler_link.cuda_seen():                 # a GPU machine (the H200 runs): nothing is marked
        assert not marked
        return
    assert marked == {name for name, hazard in HAZARDS.items() if hazard.cuda_only}
    assert marked                                        # the marking is exercised at all
    name = sorted(marked)[0]
    guards, button = lab_runs.describe_switch(name, "English", "auto")
    assert button["interactive"] is False and "This machine has no GPU" in guards
    guards, button = lab_runs.describe_switch("no_finished_guard", "English", "auto")
    assert button["interactive"] is True and "no GPU" not in guards
    zh = lab_runs.switch_choices("中文", device="auto")
    assert any("需要 CUDA" in title for title, _ in zh["choices"])


def test_a_cuda_only_switch_clicked_anyway_is_answered_at_once_without_the_engine(monkeypatch):
    def no_engine():
        raise AssertionError("the scheduler process was asked")

    monkeypatch.setattr(scheduler_link, "scheduler", no_engine)
    (html, shown), = list(lab_runs.run_lab("no_wait_stream", "bundled", "auto", 0, "English"))
    assert "this switch needs CUDA" in html and shown["report"]["needs_cuda"]


def test_every_handler_of_the_lab_switch_runs_in_one_queue_of_one():
    """The page's wiring: the marks and what the switch guards, from a page load, the device
    becoming known, a language switch or a click, are drawn one at a time, in the order
    triggered, so the last word is about the switch the reader chose."""
    wired = events_running({lab_runs.switch_choices, lab_runs.describe_switch})
    assert queues(wired) == one_queue(lab_runs.ONE_QUEUE)
