"""The rows a whole-run panel draws under its lanes, where a step is a few pixels and the gaps
themselves say little: **GPU time, added up** (runs compared: the idle gaps end to end, then the
busy time) and **GPU idle over time** (a bar per ``COLUMN_PX`` pixels, as tall as it was idle)."""

from __future__ import annotations

from collections.abc import Sequence

from record.gpu_time import gpu_time
from record.metrics import union_intervals
from record.schema import RunDict
from record.window import gpu_lanes, joined_gap_us
from texts import t
from viz.figure import FigureSpec
from viz.pixels import COLUMN_PX, columns
from viz.style import BUSY_SUM, IDLE_SUM, ROW_BACKGROUND

PLOT_PX = 450          # a whole-run chart's plot area on a 1280-1400 px laptop screen (a 900 px
                       # chart less its margins): sums are labelled, columns pooled, for this width
SUM_LANES = 1.0        # the height, in lanes, of the row that adds a run's GPU time up
SUM_WIDTH = 0.5        # ... and the thickness of its bar
SUM_CHAR_PX = 6        # about one character of the bar's 11 px label
IDLE_LANES = 1.0       # the height, in lanes, of the idle-over-time row
IDLE_HEIGHT = 0.8      # ... and of a column that was idle throughout


def pooled(gap_counts: Sequence[int]) -> bool:
    """Whether some run has more gaps than the plot has columns (the idle-over-time row)."""
    return max(gap_counts, default=0) > PLOT_PX / COLUMN_PX


def add_idle_over_time(fig: FigureSpec, gaps: Sequence[tuple[float, float]], t_end_us: float,
                       y: float, row: int, px_us: float, legend_shown: set[str],
                       lang: str) -> None:
    """The idle-over-time row centred at ``y``: a light background, a red bar per idle column."""
    floor = y + IDLE_HEIGHT / 2                 # the y axis is reversed: larger is lower
    fig.add_trace(dict(
        type="bar", orientation="h", base=[0.0], x=[t_end_us / 1000.0], y=[y],
        width=IDLE_HEIGHT, marker={"color": ROW_BACKGROUND, "line": {"width": 0}},
        showlegend=False, hoverinfo="skip", name=t(lang, "idle_row")), row=row)
    drawn = columns(gaps, 0.0, COLUMN_PX * px_us)
    heights = [IDLE_HEIGHT * share for _, _, share in drawn]
    hover = t(lang, "hover_idle_column")
    fig.add_trace(dict(
        type="bar", orientation="h", name=t(lang, "gpu_idle"), legendgroup="gpu_idle",
        showlegend="gpu_idle" not in legend_shown, legendrank=1, meta="idle_over_time",
        base=[a / 1000.0 for a, _, _ in drawn], x=[(b - a) / 1000.0 for a, b, _ in drawn],
        y=[floor - h / 2 for h in heights], width=heights,
        marker={"color": IDLE_SUM, "line": {"width": 0}},
        hovertext=[hover.format(share=f"{100 * share:.0f}", a=ms_text(a / 1000.0),
                                b=ms_text(b / 1000.0)) for a, b, share in drawn],
        hovertemplate="%{hovertext}<extra></extra>"), row=row)
    legend_shown.add("gpu_idle")
    _row_label(fig, t(lang, "idle_row"), y, row)


def _row_label(fig: FigureSpec, text: str, y: float, row: int) -> None:
    fig.add_trace(dict(
        type="scatter", mode="text", name=text, showlegend=False, x=[0], y=[y],
        text=[text + "  "], textposition="middle left", cliponaxis=False,
        textfont={"size": 12, "color": "#444444"}, hoverinfo="skip"), row=row)


def add_time_added_up(fig: FigureSpec, run: RunDict, y: float, row: int, px_us: float,
                       lang: str) -> None:
    """A bar under a run's lanes: its GPU idle time from 0 (red), then its busy time (grey)."""
    idle_ms, busy_ms = gpu_time(run).idle_us / 1000.0, _busy_us(run) / 1000.0
    labels = _sum_labels(idle_ms, busy_ms, px_us, lang)
    for part, base, length, color in (("idle", 0.0, idle_ms, IDLE_SUM),
                                      ("busy", idle_ms, busy_ms, BUSY_SUM)):
        share = 100.0 * length / (idle_ms + busy_ms) if idle_ms + busy_ms > 0 else 0.0
        label, anchor = labels[part]
        fig.add_trace(dict(
            type="bar", name=t(lang, f"sum_{part}_name"), legendgroup=f"sum_{part}",
            showlegend=False, orientation="h", base=[base], x=[length], y=[y],
            width=SUM_WIDTH, text=[label], textposition="inside", insidetextanchor=anchor,
            textfont={"color": "white", "size": 11}, marker={"color": color, "line": {"width": 0}},
            hovertext=[t(lang, f"hover_sum_{part}").format(ms=ms_text(length),
                                                          share=f"{share:.0f}")],
            hovertemplate="%{hovertext}<extra></extra>"), row=row)
    _row_label(fig, t(lang, "sum_row"), y, row)


def _sum_labels(idle_ms: float, busy_ms: float, px_us: float,
                lang: str) -> dict[str, tuple[str, str]]:
    """The words inside each part of the sum and where they sit (a red too short for its words:
    at the start of the grey; words that fit nowhere: the hover alone)."""
    idle = t(lang, "sum_idle").format(ms=ms_text(idle_ms))
    busy = t(lang, "sum_busy").format(ms=ms_text(busy_ms))
    if _fits(idle, idle_ms, px_us):
        return {"idle": (idle, "middle"), "busy": (busy if _fits(busy, busy_ms, px_us) else "",
                                                   "middle")}
    both = t(lang, "sum_both").format(idle=idle, busy=busy)
    beside = t(lang, "sum_beside").format(idle=idle)
    for words, anchor in ((both, "start"), (beside, "start"), (busy, "middle")):
        if _fits(words, busy_ms, px_us):
            return {"idle": ("", "middle"), "busy": (words, anchor)}
    return {"idle": ("", "middle"), "busy": ("", "middle")}


def _fits(label: str, ms: float, px_us: float) -> bool:
    """Whether ``label`` fits inside a bar ``ms`` long (a Chinese character: two Latin ones)."""
    chars = sum(2 if ord(char) > 0x2E80 else 1 for char in label)
    return px_us > 0 and ms * 1000.0 / px_us >= SUM_CHAR_PX * chars + 8


def _busy_us(run: RunDict) -> float:
    """The run's GPU busy time: the union of its GPU lanes' spans, short gaps joined."""
    lanes = set(gpu_lanes(run))
    busy = union_intervals([(s["start_us"], s["end_us"]) for s in run.get("spans", [])
                            if s["lane"] in lanes], joined_gap_us(run))
    return sum(end - start for start, end in busy)


def ms_text(ms: float) -> str:
    """Milliseconds with three significant digits or more: 0.183, 6.02, 95.1, 1234."""
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 1000 \
        else f"{ms:,.0f}"
