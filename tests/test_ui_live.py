"""A small live run of all three loops through the UI's handler, on CPU: multi-step overlap
gives the same tokens as the normal loop, pays for its gain with wasted tokens after stops
(counted per request), and its formula and lag cost reach the page."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")
pytest.importorskip("torch")

from ui import common, live  # noqa: E402


@pytest.fixture(scope="module")
def outputs():
    args = {"loops": ["normal", "overlap", "multistep"], "k": 3, "stop_early": True,
            "device": "cpu", "model": "bundled", "requests": 4, "batch": 4, "prompt_len": 6,
            "prompts_text": "", "max_new": 12, "temperature": 0.0, "cuda_graph": False,
            "extra_cpu": 0, "lang_choice": "English"}
    yield list(live.run_live(**args))
    for _, engine in list(common.ENGINES.values()):
        engine.close()
    common.ENGINES.clear()


def test_three_loops_run_and_agree_token_for_token(outputs):
    status, *_, record, _, _ = outputs[-1]
    assert "Done" in status
    runs = record["runs"]
    assert [run["mode"] for run in runs] == ["normal", "overlap", "multistep-3"]
    tokens = [[out["token_ids"] for out in run["outputs"]] for run in runs]
    assert tokens[0] == tokens[1] == tokens[2]
    assert record["config"]["decode_steps_per_schedule"] == 3
    assert record["config"]["stop_tokens_from_probe"] is True


def test_stops_fire_and_the_lag_cost_is_counted(outputs):
    runs = outputs[-1][7]["runs"]
    assert all(out["finish_reason"] == "stop" for out in runs[0]["outputs"])
    wasted = [run["metrics"]["wasted_tokens"] for run in runs]
    assert wasted[0] == 0 and 0 < wasted[1] <= wasted[2]
    per_request = [sum(out["wasted_steps"] for out in run["outputs"]) for run in runs]
    assert per_request == wasted


def test_the_page_shows_the_multistep_formula_and_cost(outputs):
    metrics_html, texts_html = outputs[-1][3], outputs[-1][4]
    assert "max(T_fwd, (T_sched + T_post) / k)" in metrics_html and "/ 3)" in metrics_html
    assert "the lag cost, measured" in metrics_html and "multistep-3" in metrics_html
    assert "extra steps after stop (multistep-3)" in texts_html
