"""The hazard lab panel's handler on CPU, as a specification: a removed safeguard whose fault can
happen on CPU is shown as a detected fault; the safe engine shows none; a CUDA-only switch says
so; and a lab run waits for the device like a live run does."""

from __future__ import annotations

import sys
import threading
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
def close_engines():
    yield
    for _, engine in list(lab.REFERENCES.values()):
        engine.close()
    lab.REFERENCES.clear()


def test_no_finished_guard_shows_a_detected_fault():
    outputs, (html, shown) = _final(lab.run_lab("no_finished_guard", "bundled", "cpu", 0,
                                                "English"))
    assert "Running the lab on CPU" in outputs[0][0]
    assert 'data-fault="true"' in html and 'data-switch="no_finished_guard"' in html
    assert "Fault found by the checks: Drop the finished_reqs guard" in html
    assert "Double free caught by the allocator" in html or "differ from the normal" in html
    assert shown["report"]["fault_found"] and shown["report"]["findings"]


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


def test_a_lab_run_waits_for_the_device_lock():
    lock = common.device_lock("cpu")
    lock.acquire()
    try:
        gen = lab.run_lab("no_wait_stream", "bundled", "cpu", 0, "English")
        waiting, _ = next(gen)
        assert "Waiting for the device" in waiting
        finished = threading.Event()
        thread = threading.Thread(target=lambda: (list(gen), finished.set()))
        thread.start()
        assert not finished.wait(0.5)                  # blocked while the device is busy
    finally:
        lock.release()
    thread.join(60)
    assert finished.is_set()


def test_switch_choices_and_descriptions_in_both_languages():
    choices, guards = lab.switch_choices("English")
    names = [value for _, value in choices["choices"]]
    assert names == ["no_wait_stream", "no_deferred_free", "single_host_buffer",
                     "no_finished_guard"]
    assert choices["value"] == "no_finished_guard" and "What it guards" in guards
    assert "CUDA" in lab.describe("no_wait_stream", "English")
    zh_choices, zh_guards = lab.switch_choices("中文", "single_host_buffer")
    assert zh_choices["value"] == "single_host_buffer" and "它保护的是" in zh_guards
