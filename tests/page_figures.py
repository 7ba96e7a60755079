"""What the page shows for a recorded run, as text, and the figures a lesson quotes, as text: the
two sides of ``test_walkthrough``'s check that a lesson's figures are the page's.

``page_text`` opens a record the way a student does, through the page's own handlers
(``ui.recorded_runs.show_recorded``: the status with its settings and, for another engine's
record, its folded section; the headline; the metrics table, its folds and the formula; the
whole-run chart and the step window it opens on; ``ui.same_work.offer``: the button beside it),
zooms to any steps the lesson asks for (``zoom_steps``, as the Zoom button does), and keeps
every word the page draws: titles, lane labels, legends, bar labels, table cells.

``quoted_figures`` finds every number a lesson's section writes, less what is not a measurement:
code, links and pictures, headings, names with digits in them (H200, Qwen2.5-0.5B, B11), versions,
sections, pull requests, issues and line numbers. Each is kept with its unit (%, ×, or none).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "assets" / "recorded"
LANG_CHOICE = {"en": "English", "zh": "中文"}

# A number, with what follows it: "45.3%", "1.44×", "0.27 ms", "5,744", "-0.8%".
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])([-+−]?\d[\d,]*(?:\.\d+)?)(?![\d])(\s?(?:%|×|x\b))?")
# What a lesson writes that holds digits but is no measurement.
NOT_FIGURES = [
    re.compile(r"```.*?```", re.S),                               # code blocks
    re.compile(r"`[^`]*`"),                                       # code
    re.compile(r"!?\[[^\]]*\]\([^)]*\)"),                         # pictures and links
    re.compile(r"^#+ .*$", re.M),                                 # headings (minutes)
    re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*\d[A-Za-z0-9_.]*"),  # H200, B11, Qwen2.5
    re.compile(r"(?<![A-Za-z0-9_.])\d[\d.]*(?!x(?![A-Za-z]))[A-Za-z_][A-Za-z0-9_]*"),  # 0.5B, 20fcd7f
    re.compile(r"\b\d+\.\d+\.\d+\w*"),                            # versions: 0.5.17
    re.compile(r"\b(?:sections?|PRs?|issues?|lines?)\s+\d+(?:(?:[-–]|,\s*|\s+and\s+)\d+)*",
               re.I),
    re.compile(r"第\s*\d+(?:[-–]\d+)?\s*(?:节|行)"),
]


def _plain(text: str) -> str:
    """HTML as the reader sees it: tags and styles gone, entities read, runs of space one."""
    text = re.sub(r"<style>.*?</style>", " ", text, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return " ".join(text.split())


def _figure_words(plot: Any) -> Iterator[str]:
    """Every text a figure draws (a ``gr.Plot`` value, or an update holding one)."""
    if isinstance(plot, dict):
        plot = plot.get("value")
    if plot is None:
        return
    spec = json.loads(plot.plot)
    layout = spec.get("layout", {})
    for note in layout.get("annotations") or []:
        yield str(note.get("text", ""))
    for key, axis in layout.items():
        if re.fullmatch(r"[xy]axis\d*", key) and isinstance(axis, dict):
            yield from (str(tick) for tick in axis.get("ticktext") or [])
            if isinstance(axis.get("title"), dict):
                yield str(axis["title"].get("text", ""))
    for trace in spec.get("data", []):
        if trace.get("showlegend", True) is not False and trace.get("name"):
            yield str(trace["name"])
        text = trace.get("text")
        yield from ([text] if isinstance(text, str) else [str(t) for t in text or []])


def page_text(stem: str, lang: str, windows: list[tuple[int, int]] = ()) -> str:
    """Everything the page shows for the recorded run ``stem`` in ``lang``, as plain text, with
    the step windows ``windows`` zoomed to as well."""
    from ui import recorded_runs, same_work
    from ui.view import MainView

    choice = LANG_CHOICE[lang]
    view = dict(zip([f.name for f in fields(MainView)],
                    recorded_runs.show_recorded(f"{stem}.json", choice)))
    parts = [view["status"], view["headline"], view["metrics"]]
    parts += [*_figure_words(view["timeline"]), *_figure_words(view["zoomed"])]
    for first, last in windows:
        figure, _, _ = recorded_runs.zoom_steps(view["record"], first, last, choice)
        parts += list(_figure_words(figure))
    button = same_work.offer(f"{stem}.json", choice)
    if isinstance(button, dict) and button.get("visible") and button.get("value"):
        parts.append(str(button["value"]))
    return "\n".join(_plain(str(part)) for part in parts)


def figures_in(text: str) -> set[tuple[str, str]]:
    """Every (number, unit) in ``text``: unit "%", "×" or "" (a time, a count: the page's table
    gives units in its row names), the number as written, thousands separators dropped."""
    found = set()
    for number, unit in NUMBER.findall(text):
        unit = unit.strip().replace("x", "×")
        found.add((number.replace(",", "").replace("−", "-").lstrip("+"), unit))
    return found


def quoted_figures(body: str) -> set[tuple[str, str]]:
    """The (number, unit) figures a lesson's section quotes (``NOT_FIGURES`` left out)."""
    for pattern in NOT_FIGURES:
        body = pattern.sub(" ", body)
    return figures_in(body)


def record_values(stem: str) -> list[float]:
    """The numbers a record's config says it was run with (requests, batch, tokens, extra CPU
    work, k): a lesson may say them, as the status line does."""
    config = json.loads((RECORDED / f"{stem}.json").read_text())["config"]
    return [float(v) for v in config.values()
            if isinstance(v, (int, float)) and not isinstance(v, bool)]


def file_values(path: Path) -> list[float]:
    """Every number in a JSON file (a benchmark's rows)."""
    def walk(node: Any) -> Iterator[float]:
        if isinstance(node, dict):
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            yield float(node)
    return list(walk(json.loads(path.read_text())))


def rounds_to(number: str, values: list[float]) -> bool:
    """Whether ``number`` (as written) is one of ``values`` at the precision it is written."""
    places = len(number.partition(".")[2])
    return any(f"{value:.{places}f}" == number for value in values)
