"""Every word the page draws is in Chinese when the page is: the figures (titles, lane labels,
legends, axis titles, bar labels, hovers) and the panels beside them (headline, metrics and
formula, step caption), rendered in ``zh`` for every recorded run and every serving measurement.

What may stay in Latin letters is the lesson's vocabulary as the article writes it, in both
languages: code names (a phase such as ``process_last``, a lane's stream such as "engine stream",
a call such as ``forward(B11)`` or ``wait_stream``), units and the usual abbreviations (ms, GPU,
KV, TTFT, p50). Everything else drawn in Latin letters is a word left untranslated: the test
names it and where it was drawn.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("plotly", reason="viz needs plotly")

import viz  # noqa: E402
from record.run_record import load_record  # noqa: E402
from viz.style import PHASE_COLORS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RECORDED = sorted((ROOT / "assets" / "recorded").glob("*.json"))
SERVING = sorted((ROOT / "assets" / "serving").glob("*.json"))

# The article's and the code's own words, the same in both languages.
TERMS = {
    # phases (the legend's code names), the unrolled rounds' short ones, and "other"
    *PHASE_COLORS, "other", "fwd", "proc", "sched",
    # the lanes' streams and what runs on them, as the article names them
    "stream", "scheduler", "engine", "copy", "kernel", "token", "pool", "eager", "profiler",
    "torch", "max",
    # units, hardware and the usual abbreviations
    "ms", "s", "GPU", "CPU", "KV", "TTFT", "ITL", "B", "k", "p50", "p99", "NVIDIA", "H200",
    # the formula's terms
    "T_fwd", "T_sched", "T_post",
}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*(\()?")


def _code(word: str) -> bool:
    """A name from the code: ``process_last``, ``copy_done``, ``forward(`` (a call),
    ``extra-cpu-us`` (a flag), ``torch.profiler`` (a module), ``B11``, ``bf16``."""
    return (word.endswith("(") or any(c in word for c in "_-.")
            or any(c.isdigit() for c in word))


def untranslated(text: str) -> set[str]:
    """The Latin-letter words of ``text`` (HTML: tags, styles and attributes dropped) that are
    neither the lesson's terms nor code names."""
    text = re.sub(r"<style>.*?</style>", " ", text, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"%\{[^}]*\}", " ", text)             # plotly's placeholders
    words = {m.group(0).rstrip(".-") for m in WORD.finditer(text)}
    return {w for w in words if w and w not in TERMS and not _code(w)}


def drawn_text(spec: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, text) for every piece of text a plotly figure draws, hovers included."""
    layout = spec.get("layout", {})
    for note in layout.get("annotations") or []:
        yield "annotation", str(note.get("text", ""))
    title = layout.get("title")
    if isinstance(title, dict):
        yield "title", str(title.get("text", ""))
    for key, axis in layout.items():
        if re.fullmatch(r"[xy]axis\d*", key) and isinstance(axis, dict):
            for tick in axis.get("ticktext") or []:
                yield key, str(tick)
            if isinstance(axis.get("title"), dict):
                yield key, str(axis["title"].get("text", ""))
    for trace in spec.get("data", []):
        if trace.get("showlegend", True) is not False and trace.get("name"):
            yield "legend", str(trace["name"])
        for key in ("text", "hovertext", "hovertemplate"):
            values = trace.get(key)
            for value in [values] if isinstance(values, str) else values or []:
                yield key, str(value)


def _figures(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    runs = load_record(path)["runs"]
    yield "whole run", viz.side_by_side_figure(runs, lang="zh").to_dict()
    from ui.recorded_runs import default_window  # the window the page opens on

    window = default_window(runs)
    yield f"steps {window}", viz.side_by_side_figure(runs, window=window, lang="zh").to_dict()
    if any(run.get("memory") for run in runs):
        yield "KV memory", viz.memory_figure(runs, "zh").to_dict()
    yield "step view", viz.step_figure(runs[-1], window[0], "zh").to_dict()
    yield "unrolled rounds", viz.unrolled_figure(runs[-1], "zh").to_dict()


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_recorded_runs_figures_and_panels_say_nothing_in_english(path):
    pytest.importorskip("gradio")
    record = load_record(path)
    runs = record["runs"]
    found: dict[str, set[str]] = {}
    for name, spec in _figures(path):
        for where, text in drawn_text(spec):
            found.setdefault(f"{name}: {where}", set()).update(untranslated(text))
    panels = {"headline": viz.headline_html(record, "zh"), "metrics": viz.metrics_html(runs, "zh"),
              "step caption": viz.step_caption(runs[-1], 20, "zh")}
    for name, text in panels.items():
        found.setdefault(name, set()).update(untranslated(text))
    left = {where: words for where, words in found.items() if words}
    assert not left, left


@pytest.mark.parametrize("path", SERVING, ids=[p.stem for p in SERVING])
def test_the_serving_chart_says_its_loops_in_chinese(path):
    rows = json.loads(path.read_text())["rows"]
    spec = viz.latency_figure(rows, "zh")
    left = {w for _, text in drawn_text(spec) for w in untranslated(text)}
    assert not left, left
    legend = [trace["name"] for trace in spec["data"] if trace.get("showlegend")]
    assert "普通 p50" in legend and "重叠 p50" in legend, legend


def test_the_check_finds_english_left_in_a_figure():
    """The same check on English figures finds their words: it reads what is drawn."""
    path = ROOT / "assets" / "recorded" / "h200-smollm-eager-kernels.json"
    spec = viz.side_by_side_figure(load_record(path)["runs"], lang="en").to_dict()
    words = {w for _, text in drawn_text(spec) for w in untranslated(text)}
    assert {"idle", "busy", "added", "lanes", "alone"} <= words
    assert untranslated("kernels: stream 29") == {"kernels"}
    assert untranslated("kernel：engine stream · 忙碌 3.9%") == set()
