"""The KV-memory chart: a run's pages in use by requests, held only by the prefix cache, and free
at every scheduled step, stacked to exactly ``total_pages``, with its retractions marked. Its
x-axis is the timeline's, so the two read one above the other."""

from __future__ import annotations

import html
from typing import Any

from record.run_record import has_memory
from record.schema import RecordDict, RunDict
from record.window import time_range
from texts import t
from viz.figure import FigureSpec
from viz.gantt import frame_run_figure, message_figure
from viz.labels import display_labels, lane_ticks
from viz.style import MEMORY_COLORS, RETRACTION_COLOR

PANEL_PX = 170          # height of one run's chart, in pixels
KINDS = ("used", "cached", "free")       # bottom to top, as the columns of a memory step


def memory_figure(runs: RecordDict | RunDict | list[RunDict], lang: str = "en") -> FigureSpec:
    """One panel per run that carries a memory trace, on one shared time axis."""
    given = _runs_of(runs)
    drawn = [run for run in given if has_memory(run)]
    if not drawn:
        return message_figure(t(lang, "memory_none" if given else "no_runs"))
    labels = [html.escape(label) for label in display_labels(drawn, lang)]
    fig = FigureSpec(rows=len(drawn), cols=1, shared_xaxes=True,
                     vertical_spacing=min(0.3 / len(drawn), 0.14),
                     subplot_titles=[_title(run, label, lang) for run, label in zip(drawn, labels)])
    legend_shown: set[str] = set()
    x_max = 0.0
    for row, run in enumerate(drawn, start=1):
        x_max = max(x_max, _add_run(fig, run, row, legend_shown, lang))
        total = run["memory"]["total_pages"]
        fig.update_yaxes(row=row, col=1, range=[0, total], fixedrange=True, showgrid=True,
                         gridcolor="#eeeeee", zeroline=False, title={"text": t(lang, "memory_axis")})
    fig.update_xaxes(range=[0, x_max * 1.01 or 1.0], showgrid=True, gridcolor="#eeeeee",
                     zeroline=False, hoverformat=".1f")
    fig.update_xaxes(title={"text": t(lang, "time_axis")}, row=len(drawn), col=1)
    # The timeline's plot area: the same x, the same time.
    frame_run_figure(fig, [lane_ticks(run, lang) for run in given], traceorder="normal")
    fig.update_layout(height=90 + len(drawn) * (PANEL_PX + 70), hovermode="x unified")
    return fig


def _runs_of(runs: RecordDict | RunDict | list[RunDict]) -> list[RunDict]:
    if isinstance(runs, list):
        return list(runs)
    if "runs" in runs:                  # a record
        return list(runs["runs"])
    return [runs]


def _add_run(fig: FigureSpec, run: RunDict, row: int, legend_shown: set[str],
             lang: str) -> float:
    memory = run["memory"]
    total = memory["total_pages"]
    steps = sorted(memory["steps"], key=lambda s: s[1])
    # The pool as each schedule left it, held until the next one (the last: to the run's end).
    end_us = max(time_range(run.get("spans", []))[1], steps[-1][1])
    xs = [s[1] / 1000.0 for s in steps] + [end_us / 1000.0]
    custom = [[s[0], s[2], s[3], s[4], total] for s in steps]
    custom.append(custom[-1])
    for column, kind in enumerate(KINDS, start=2):
        color = MEMORY_COLORS[kind]
        fig.add_trace(dict(
            type="scatter", mode="lines", name=t(lang, f"mem_{kind}"), legendgroup=kind,
            showlegend=kind not in legend_shown, x=xs, y=[c[column - 1] for c in custom],
            stackgroup=f"memory{row}", line={"shape": "hv", "width": 0.5, "color": color},
            fillcolor=color, customdata=custom, hovertemplate=t(lang, f"mem_hover_{kind}"),
        ), row=row, col=1)
        legend_shown.add(kind)
    _add_retractions(fig, memory.get("retractions") or [], total, row, legend_shown, lang)
    return end_us / 1000.0


def _add_retractions(fig: FigureSpec, retractions: list[list[Any]], total: int, row: int,
                     legend_shown: set[str], lang: str) -> None:
    """A dashed line through the pool at each retraction, and a marker on top with its hover."""
    if not retractions:
        return
    xs = [r[1] / 1000.0 for r in retractions]
    line_x = [v for x in xs for v in (x, x, None)]
    line_y = [v for _ in xs for v in (0, total, None)]
    fig.add_trace(dict(
        type="scatter", mode="lines", x=line_x, y=line_y, hoverinfo="skip", showlegend=False,
        legendgroup="retraction", line={"color": RETRACTION_COLOR, "width": 1, "dash": "dot"},
    ), row=row, col=1)
    fig.add_trace(dict(
        type="scatter", mode="markers", x=xs, y=[total] * len(xs), cliponaxis=False,
        name=t(lang, "mem_retraction"), legendgroup="retraction",
        showlegend="retraction" not in legend_shown,
        hovertext=[t(lang, "mem_retracted").format(req=r[2], step=r[0]) for r in retractions],
        hovertemplate="%{hovertext}<extra></extra>",
        marker={"symbol": "triangle-down", "size": 10, "color": RETRACTION_COLOR},
    ), row=row, col=1)
    legend_shown.add("retraction")


def _title(run: RunDict, label: str, lang: str) -> str:
    """Above a run's panel: the prefix cache's hit rate and retractions, the pool's low point."""
    memory, metrics = run["memory"], run.get("metrics") or {}
    count = metrics.get("retractions")
    count = len(memory.get("retractions") or []) if count is None else int(count)
    retractions = t(lang, "memory_retractions_one" if count == 1 else "memory_retractions").format(n=count)
    if (rate := metrics.get("prefix_hit_rate")) is not None:
        head = t(lang, "memory_head").format(
            label=label, rate=100 * float(rate),
            hits=int(metrics.get("prefix_hit_tokens") or 0), retractions=retractions)
    else:
        head = t(lang, "memory_head_no_rate").format(label=label, retractions=retractions)
    sub = t(lang, "memory_sub").format(total=memory["total_pages"],
                                       peak=max(s[2] for s in memory["steps"]),
                                       free=min(s[4] for s in memory["steps"]))
    return f"<b>{head}</b><br><span style=\"font-size:12px\">{sub}</span>"
