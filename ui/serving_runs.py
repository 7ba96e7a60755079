"""The serving tab: latency against request rate for both loops, as measured on real hardware.

Each file in ``assets/serving`` holds the rows of one measurement (``record.latency_rows``):
``python -m bench rates`` (the engine in process) or ``python -m bench load`` (HTTP clients
against ``engine.serve``). Choosing one draws ``viz.latency_figure`` and the bench's table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.components.plot import PlotData

import texts
import viz
from record.bounded_read import read_bounded
from record.latency_rows import format_table, summarize
from record.schema import ENGINE_LOOPS
from texts import STRINGS
from ui import queues
from ui.i18n import lang_of
from ui.status import esc, status
from ui.view import Update, plot

ROOT = Path(__file__).resolve().parents[1]

SERVING_DIR = ROOT / "assets" / "serving"
# The dropdown's handlers take turns: a language switch's reply landing after a later pick's
# would put the older file back.
ONE_QUEUE = queues.one_queue("serving-shown")
MAX_FILE_BYTES = 8 * 2**20


def _read(path: Path) -> dict[str, Any]:
    data = json.loads(read_bounded(path, MAX_FILE_BYTES))
    if not isinstance(data, dict) or data.get("kind") != "latency_vs_rate" \
            or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path.name} holds no latency-vs-rate rows")
    return data


def _setup(data: dict[str, Any]) -> dict[str, Any]:
    """Where and how it was measured: the bench keeps its engine config, the load test its args."""
    config = data.get("config") or data.get("args") or {}
    env = data.get("env") or {}
    return {"how": "load" if data.get("source") == "bench.load" else "bench",
            "device": env.get("device_name") or str(config.get("device", "?")).upper(),
            "model": config.get("model", "?"), "extra": config.get("extra_cpu_us", 0),
            "requests": config.get("requests", "?"),
            "repeats": config.get("repeats", "?"), "date": env.get("date", "")}


def list_measured(lang_choice: str = "English") -> Update:
    """Choices for the measurement dropdown: one per file, named by how and where it was made."""
    lang = lang_of(lang_choice)
    found = []
    for path in SERVING_DIR.glob("*.json"):
        try:
            setup = _setup(_read(path))
            label = texts.t(lang, f"serving_{setup['how']}").format(**setup)
            # The bench's measurements first, the heaviest scheduler first: it shows the most.
            order = (setup["how"] != "bench", -float(setup["extra"] or 0), path.name)
        except (OSError, ValueError, TypeError):
            label, order = path.stem, (True, 0.0, path.name)   # choosing it says why not
        found.append((order, label, path.name))
    choices = [(label, name) for _, label, name in sorted(found)]
    return gr.update(choices=choices, value=choices[0][1] if choices else None)


def relabel(name: str | None, lang_choice: str) -> tuple[Update, PlotData, str]:
    """After a language switch: the dropdown's labels, the figure and the table, same file."""
    choices = list_measured(lang_choice)
    name = name or choices["value"]                 # on page load: the first measurement
    choices["value"] = name
    return (choices, *show_measured(name, lang_choice))


def show_measured(name: str | None, lang_choice: str) -> tuple[PlotData, str]:
    """The figure and the table of one measurement file (a name from ``list_measured``)."""
    lang = lang_of(lang_choice)
    names = {path.name: path for path in SERVING_DIR.glob("*.json")}
    empty = plot(viz.latency_figure([], lang))
    if not name:
        return empty, ""
    cannot = texts.t(lang, "status_cannot_show").format(name=esc(name))
    if name not in names:                           # only the files listed, never a path
        return empty, status(cannot, "error")
    try:
        data = _read(names[name])
        rows = summarize(data["rows"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        return empty, status(f"{cannot} <code>{esc(error)}</code>", "error")
    setup = _setup(data)
    title = texts.t(lang, f"serving_{setup['how']}").format(**setup)
    table = format_table(rows)
    return (plot(viz.latency_figure(data["rows"], lang, title=title)),
            _markdown_table(table, lang))


def _word(cell: str, lang: str) -> str:
    """A header or a rate of the bench's table in ``lang`` ("4 req/s", "burst", "GPU busy")."""
    cell = cell.strip()
    if cell in ENGINE_LOOPS:
        return texts.t(lang, f"loopname_{cell}").format(k="k")
    number, _, unit = cell.partition(" ")
    if unit == "req/s":
        return f"{number} {texts.t(lang, 'servingcol_req/s')}"
    key = f"servingcol_{cell}"
    return texts.t(lang, key) if key in STRINGS["en"] else cell


def _markdown_table(table: str, lang: str) -> str:
    """``format_table``'s markdown as an HTML table in ``lang`` (cells escaped), for a
    ``gr.HTML``."""
    lines = [line.strip().strip("|").split("|") for line in table.splitlines()]
    head, body = lines[0], lines[2:]
    cells = "".join(f"<th>{esc(_word(cell, lang))}</th>" for cell in head)
    rows = "".join("<tr>" + "".join(f"<td>{esc(_word(cell, lang))}</td>" for cell in row)
                   + "</tr>" for row in body)
    return f'<div class="serving-scroll"><table class="serving"><tr>{cells}</tr>{rows}</table></div>'
