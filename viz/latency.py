"""Latency against request rate, for each loop: time to first token, inter-token latency (p50
solid, p99 dashed) and output tokens/s, the request rate along each x axis (burst last). Input:
``record.latency_rows``' rows, raw or summarised (repeats: a median with min-max error bars)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from record.latency_rows import summarize
from record.schema import Loop
from texts import t
from viz.figure import FigureSpec

LOOP_COLORS: dict[str, str] = {Loop.NORMAL: "#636363", Loop.OVERLAP: "#e6550d",
                               Loop.MULTISTEP: "#756bb1"}
OTHER_COLOR = "#3182bd"


def loop_name(loop: str, lang: str) -> str:
    """A row's loop in the reader's language ("multistep-4" / "多步 k=4"); else as it says."""
    name, _, k = str(loop).partition("-")
    if name in LOOP_COLORS and (k.isdigit() or not k):
        return t(lang, f"loopname_{name}").format(k=k or "k")
    return str(loop)


def _rate_text(rate: Any, lang: str) -> str:
    if rate is None or (isinstance(rate, float) and math.isinf(rate)):
        return t(lang, "latency_burst")
    return f"{rate:g}"


def _errors(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any] | None:
    """Error bars from each point's min..max over repeats (none where a point ran once)."""
    if not any(r.get("runs", 1) > 1 and key in r.get("spread", {}) for r in rows):
        return None
    plus, minus = [], []
    for r in rows:
        lo, hi = r.get("spread", {}).get(key, [r.get(key), r.get(key)])
        value = r.get(key)
        plus.append(None if value is None else hi - value)
        minus.append(None if value is None else value - lo)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
            "thickness": 1, "width": 3}


def latency_figure(rows: Sequence[Mapping[str, Any]], lang: str = "en",
                   title: str | None = None, log_ttft: bool = True) -> dict[str, Any]:
    """The three panels for ``rows``, as a plotly.js figure dict (``log_ttft``: a log TTFT axis)."""
    fig = FigureSpec(rows=1, cols=3, horizontal_spacing=0.07,
                     subplot_titles=[t(lang, "latency_ttft"), t(lang, "latency_itl"),
                                     t(lang, "latency_tput")])
    rows = list(rows) if all("runs" in r for r in rows) else summarize(rows)   # raw: summarised
    if not rows:
        fig.add_annotation(text=t(lang, "latency_empty"), showarrow=False, xref="paper",
                           yref="paper", x=0.5, y=0.5, font={"size": 16, "color": "#777777"})
    loops = list(dict.fromkeys(r["loop"] for r in rows))
    order = sorted({r["request_rate"] if r["request_rate"] is not None else math.inf
                    for r in rows})
    categories = [_rate_text(r, lang) for r in order]
    for loop in loops:
        mine = sorted((r for r in rows if r["loop"] == loop),
                      key=lambda r: math.inf if r["request_rate"] is None else r["request_rate"])
        x = [_rate_text(r["request_rate"], lang) for r in mine]
        color = LOOP_COLORS.get(loop, OTHER_COLOR)
        name = loop_name(loop, lang)
        panels = ((1, "ttft_ms_p50", "p50", "solid"), (1, "ttft_ms_p99", "p99", "dash"),
                  (2, "itl_ms_p50", "p50", "solid"), (2, "itl_ms_p99", "p99", "dash"),
                  (3, "output_tokens_per_s", "", "solid"))
        for col, key, stat, dash in panels:
            trace: dict[str, Any] = {
                "type": "scatter", "mode": "lines+markers", "x": x,
                "y": [r.get(key) for r in mine], "name": f"{name} {stat}".strip(),
                "legendgroup": loop, "showlegend": col == 1,
                "line": {"color": color, "dash": dash, "width": 2},
                "marker": {"color": color, "size": 7},
                "hovertemplate": f"{name} {stat} %{{y:.2f}}<extra>%{{x}}</extra>"}
            errors = _errors(mine, key)
            if errors:
                trace["error_y"] = {**errors, "color": color}
            fig.add_trace(trace, 1, col)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=categories,
                     title={"text": t(lang, "latency_rate")}, showgrid=True, gridcolor="#eeeeee")
    fig.update_yaxes(rangemode="tozero", showgrid=True, gridcolor="#eeeeee")
    if log_ttft:            # ticks at 1, 2 and 5 of each decade, each labelled in full
        ticks = [m * 10 ** e for e in range(-1, 6) for m in (1, 2, 5)]
        fig.update_yaxes(row=1, col=1, type="log", rangemode="normal", tickvals=ticks,
                         ticktext=[f"{v:g}" for v in ticks])
    fig.update_layout(title={"text": title or t(lang, "latency_title")}, height=420,
                      margin={"l": 50, "r": 20, "t": 80, "b": 90}, plot_bgcolor="white",
                      legend={"orientation": "h", "y": -0.32, "x": 0.5, "xanchor": "center"})
    return fig.to_dict()
