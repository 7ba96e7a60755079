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
from ui import records  # noqa: E402

RECORDED = ROOT / "assets" / "recorded"


def _figure(plot_data) -> dict:
    return json.loads(plot_data.plot)


def _titles(plot_data) -> list[str]:
    return [a["text"] for a in _figure(plot_data)["layout"].get("annotations", [])]


@pytest.fixture(scope="module")
def record():
    return load_record(RECORDED / "h200-bundled-graph-cpu200.json")


def test_zoom_past_both_ends_draws_the_whole_run_and_says_which_steps(record):
    first, last = records.default_window(record["runs"])
    figure, shown_first, shown_last = records.zoom_steps(record, -5, 99999, "English")
    steps = sorted({s["step"] for s in record["runs"][0]["spans"] if s["step"] >= 0})
    assert (shown_first, shown_last) == (steps[0], steps[-1])       # the boxes say it too
    titles = _titles(figure)
    assert all(f"steps {steps[0]}–{steps[-1]}:" in title for title in titles[:2]), titles
    assert not any("99999" in title or "-5" in title for title in titles)
    assert first <= last


def test_zoom_windows_hold_the_same_number_of_forwards_in_both_loops(record):
    figure, first, last = records.zoom_steps(record, 20, 25, "English")
    titles = _titles(figure)[:2]
    assert all("steps 20–25: 6 forwards in" in title for title in titles), titles


@pytest.mark.parametrize("lang, said", [("English", "Enter a first and a last step"),
                                        ("中文", "请输入起始步和结束步")])
def test_zoom_with_an_empty_box_says_what_it_needs(record, lang, said):
    figure, first, last = records.zoom_steps(record, None, 25, lang)
    assert said in json.dumps(_figure(figure), ensure_ascii=False)
    assert first == {"__type__": "update"} and last == {"__type__": "update"}
