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

from ui import common, lab  # noqa: E402


def _final(gen):
    outputs = list(gen)
    return outputs, outputs[-1]


@pytest.fixture(scope="module", autouse=True)
def close_scheduler():
    yield
    common.shutdown()


def test_no_finished_guard_shows_a_detected_fault():
    outputs, (html, shown) = _final(lab.run_lab("no_finished_guard", "bundled", "cpu", 0,
                                                "English"))
    assert "Running the lab on" in outputs[0][0]
    assert 'data-fault="true"' in html and 'data-switch="no_finished_guard"' in html
    assert "Fault found by the checks: Drop the finished-request guard" in html
    assert any(evidence in html for evidence in ("Tokens after a stop token", "differ from the "
                                                 "normal", "Double free caught"))
    assert shown["report"]["fault_found"]
    zh = lab.redraw(shown, "中文")
    assert "检查发现了故障" in zh and "Drop" not in zh


def test_the_safe_engine_shows_no_fault_and_how_often_the_guards_acted():
    _, (html, shown) = _final(lab.run_safe("bundled", "cpu", 0, "English"))
    assert 'data-fault="false"' in html and 'data-switch="safe"' in html
    assert "No fault: every check passed" in html
    assert "race window did not open" not in html      # the safe engine is not "lucky"
    assert shown["report"]["windows"] > 0 and "The safeguards acted" in html
    zh = lab.redraw(shown, "中文")
    assert "没有故障" in zh


def test_a_cuda_only_switch_says_it_needs_cuda_on_cpu():
    _, (html, _) = _final(lab.run_lab("no_wait_stream", "bundled", "cpu", 0, "English"))
    assert 'data-fault="false"' in html and "this switch needs CUDA" in html
    assert "two CUDA streams" in html


@pytest.mark.parametrize("seed", [-1, 2.5, None, float("nan")])
def test_a_bad_seed_is_refused(seed):
    (html, shown), = list(lab.run_lab("no_finished_guard", "bundled", "cpu", seed, "English"))
    assert "status-error" in html and "whole number" in html and shown is None


def test_switch_choices_and_descriptions_in_both_languages():
    choices, guards = lab.switch_choices("English")
    names = [value for _, value in choices["choices"]]
    assert names == ["no_wait_stream", "no_deferred_free", "single_host_buffer",
                     "no_finished_guard"]
    assert choices["value"] == "no_finished_guard" and "What it guards" in guards
    assert "CUDA" in lab.describe_switch("no_wait_stream", "English")
    zh_choices, zh_guards = lab.switch_choices("中文", "single_host_buffer")
    assert zh_choices["value"] == "single_host_buffer" and "它保护的是" in zh_guards
    assert "overwrites batch n's tokens" in lab.describe_switch("single_host_buffer", "English")
