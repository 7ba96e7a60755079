"""Gantt timelines of one or more runs: lanes top to bottom, bars coloured by phase, idle hatched.

A lane is a row at y = 0, 1, 2, ... and all spans of one phase are one horizontal bar trace, so
thousands of spans are a dozen traces; GPU idle gaps are one more, drawn first, behind the work.
Stacked runs share their x-axis, so the shorter run looks shorter."""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from record.gpu_time import gpu_time
from record.imported import imported
from record.kernel_lanes import is_kernel_lane
from record.lag import LagMark, extra_steps, lag_marks
from record.schema import FORWARD_PHASES, LANES, Lane, RunDict, SpanDict
from record.window import gpu_lanes, time_range, window_run
from texts import count, t
from viz.figure import FigureSpec
from viz.headline import busy_badge_lines
from viz.labels import display_labels, lane_ticks, ordered_lanes, run_title
from viz.pixels import MAX_BARS, PIXELS, band_opacity, bands, coalesce, opacity
from viz.style import (
    BUSY_COLOR,
    FONT,
    IDLE_FILL,
    IDLE_FILL_OPAQUE,
    IDLE_LINE,
    OTHER_PHASE,
    PHASE_COLORS,
    QUIET_FILL,
    phase_color,
)
from viz.whole_run import (
    IDLE_LANES,
    PLOT_PX,
    SUM_LANES,
    add_idle_over_time,
    add_time_added_up,
    ms_text,
    pooled,
)

CHART_PX = 1000        # about how wide a whole-run chart is drawn, in pixels
INVISIBLE_PX = 0.3     # whole-run views leave out bars narrower than this (the step window and
                       # every number keep them): the browser draws each bar on every redraw
LINED_BARS = 300       # bars get a hairline outline only in traces with fewer bars than this
LANE_PX = 46           # height of one lane in pixels
TITLE_LINE_PX = 16     # height of a title's line (12 px text)
BAR_WIDTH = 0.72       # bar thickness in lane units (a lane is 1.0)
LEGEND_SHARE = 0.02    # a whole run's legend names a phase that held this share of its lane's time
MARK_PX = 14           # a whole run's lag marks closer than this are one mark (its hover lists all)
MARK_LINES = 8         # ... whose hover lists this many of them, then how many more


def side_by_side_figure(runs: list[RunDict], window: tuple[int, int] | None = None,
                        lang: str = "en", note: str = "") -> FigureSpec:
    """Runs stacked on one shared time axis; ``window=(first_step, last_step)`` cuts each to those
    steps. ``note``: a line (HTML, escaped by the caller) under the first run's title."""
    marks = [lag_marks(run) for run in runs]   # from the whole run: a window has no outputs
    if window is not None:
        runs = [window_run(run, *window) for run in runs]
    if not runs:
        return message_figure(t(lang, "no_runs"))
    lane_lists = [ordered_lanes(run) or list(LANES) for run in runs]
    ticks = [lane_ticks(run, lang) for run in runs]
    # Whole runs compared: the gaps are a pixel or two each, so each panel adds them up too.
    added_up = window is None and len(runs) > 1
    sum_row = SUM_LANES if added_up else 0.0
    # A whole run of more gaps than its plot has columns: the idle share, column by column.
    over_time = window is None and pooled([gpu_time(run).gap_count for run in runs])
    idle_row = IDLE_LANES if over_time else 0.0
    heights = [max(len(lanes), 1) + idle_row + sum_row for lanes in lane_lists]
    titles = [_run_title(run, label, lang) for run, label in zip(runs, display_labels(runs, lang))]
    badged = max(len(busy_badge_lines(run, lang)) for run in runs)   # a line a busy reason
    lines = (3 if window is not None else 2) + bool(note) + badged   # title lines a run
    if note:
        titles[0] += f"<br><span style=\"font-size:12px\"><i>{note}</i></span>"
    fig = FigureSpec(rows=len(runs), cols=1, shared_xaxes=True, row_heights=heights,
                     vertical_spacing=min(0.3 / len(runs), 0.06 * lines), subplot_titles=titles)
    legend_shown: set[str] = set()
    x_max = 0.0
    ends = [time_range(run.get("spans", []))[1] for run in runs]
    px_us = max(ends) * 1.01 / PLOT_PX if window is None else 0.0   # the time a pixel holds
    for row, (run, lanes, run_ticks, run_marks) in enumerate(zip(runs, lane_lists, ticks, marks),
                                                              start=1):
        offset = run["window"]["t_start_us"] if window is not None else 0.0
        idle_y = len(lanes) - 0.5 + idle_row / 2 if over_time else None
        x_max = max(x_max, add_run(fig, run, lanes, Cell(row, 1, offset, px_us, idle_y),
                                    legend_shown, lang, marks=run_marks))
        if added_up:
            add_time_added_up(fig, run, len(lanes) - 0.5 + idle_row + sum_row / 2, row, px_us,
                              lang)
        fig.update_yaxes(row=row, col=1, tickvals=list(range(len(lanes))),
                         ticktext=run_ticks,
                         range=[len(lanes) - 0.5 + idle_row + sum_row, -0.5], showgrid=False,
                         zeroline=False, fixedrange=True)
    axis_title = t(lang, "time_axis_window" if window is not None else "time_axis")
    fig.update_xaxes(range=[0, x_max * 1.01 or 1.0], showgrid=True, gridcolor="#eeeeee",
                     zeroline=False)
    fig.update_xaxes(title={"text": axis_title}, row=len(runs), col=1)
    chart_px = 90 + sum(LANE_PX * h + 40 * lines for h in heights)   # its title lines
    frame_run_figure(fig, ticks, lines, tracegroupgap=2)
    fig.update_layout(
        barmode="overlay", bargap=0,
        height=max(chart_px, 110 + 24 * len(legend_shown)),  # room for the whole legend
        uniformtext={"mode": "hide", "minsize": 10},    # a sum's label that does not fit: none
    )
    return fig


class Cell(NamedTuple):
    """Where a run is drawn: its subplot, its x-axis start (µs), the time a pixel holds (0: a
    zoomed view) and its idle-over-time row's y, if any."""

    row: int
    col: int = 1
    offset_us: float = 0.0
    px_us: float = 0.0
    idle_row_y: float | None = None


def add_run(fig: FigureSpec, run: RunDict, lanes: list[str], cell: Cell,
            legend_shown: set[str], lang: str, marks: list[LagMark]) -> float:
    """Add one run's gaps (or idle row), phase bars and lag marks on ``lanes`` to subplot
    ``cell``; return its last end in ms."""
    row, col, offset_us, px_us, idle_row_y = cell
    index = {lane: i for i, lane in enumerate(lanes)}
    spans = [s for s in run.get("spans", []) if s["lane"] in index]
    gpu = [lane for lane in gpu_lanes(run) if lane in index]
    t_start, t_end = time_range(spans)
    if "window" in run:
        t_start, t_end = run["window"]["t_start_us"], run["window"]["t_end_us"]
    time = gpu_time({**run, "spans": spans, "gpu_lanes": gpu})
    rows = sorted(index[lane] for lane in gpu)
    for kind, gaps in (("gpu_idle", time.gaps), ("no_requests", time.quiet)):
        drawn: Sequence[tuple[float, ...]] = gaps
        if kind == "gpu_idle" and idle_row_y is not None:
            add_idle_over_time(fig, gaps, t_end - offset_us, idle_row_y, row, px_us,
                               legend_shown, lang)
            continue
        if len(gaps) > MAX_BARS:       # thousands of gaps per pixel: one band per pixel run
            drawn = bands(gaps, (t_end - t_start) / PIXELS)
        if drawn and gpu:
            _add_gaps(fig, drawn, rows, cell, legend_shown, lang, kind)
    extra_gpu = set(gpu) - set(LANES)
    roles = imported(run).get("phase_roles") or {}    # an imported trace's named host phases
    keyed: Sequence[tuple[str, SpanDict]] = [
        (_color_key(roles.get(s["phase"], s["phase"]),
                    s["lane"] in extra_gpu or is_kernel_lane(s["lane"])), s)
        for s in spans]
    named = _legend_worthy(keyed, t_end - t_start) if px_us > 0 else None
    if len(keyed) > MAX_BARS:          # pixel-sized bars, each as opaque as it was busy
        keyed = coalesce(keyed, (t_end - t_start) / PIXELS)
    if "window" not in run:            # merged or not: a bar a browser would widen to a pixel
        thinnest = INVISIBLE_PX * (t_end - t_start) / CHART_PX
        keyed = [(k, s) for k, s in keyed if s["end_us"] - s["start_us"] >= thinnest]
    by_phase: dict[str, list[SpanDict]] = {}
    for key, span in keyed:
        by_phase.setdefault(key, []).append(span)
    order = list(PHASE_COLORS) + [OTHER_PHASE]
    for rank, phase in enumerate(order):
        group = by_phase.get(phase)
        if not group:
            continue
        legend = phase not in legend_shown and (named is None or phase in named)
        fig.add_trace(_phase_trace(phase, group, index, offset_us, legend, rank, lang),
                      row=row, col=col)
        if legend:
            legend_shown.add(phase)
    _add_lag_marks(fig, spans, marks, index, cell, (t_start, t_end), legend_shown, lang)
    return (t_end - offset_us) / 1000.0


def _legend_worthy(keyed: Sequence[tuple[str, SpanDict]], run_us: float) -> set[str]:
    """The phases that held at least ``LEGEND_SHARE`` of the run's time on some lane."""
    held: dict[tuple[str, str], float] = {}
    for key, span in keyed:
        held[key, span["lane"]] = held.get((key, span["lane"]), 0.0) + (span["end_us"]
                                                                         - span["start_us"])
    return {key for (key, _), us in held.items() if run_us > 0 and us >= LEGEND_SHARE * run_us}


LEGEND_PX = 270        # right margin of a run chart: its legend's widest entry fits
CHAR_PX = 7            # about one character of a 12 px lane label


def frame_run_figure(fig: FigureSpec, ticks: list[list[str]], title_lines: int = 3,
                     **legend: Any) -> None:
    """The margins, legend and fonts of every chart on a run's time axis, the margins fixed (not
    grown to fit, plotly's default) so one instant of a run sits at the same x in all of them."""
    lines = [line for run_ticks in ticks for tick in run_ticks
             for line in re.split(r"<br\s*/?>", tick)]
    longest = max((len(re.sub(r"<[^>]+>", "", line)) for line in lines), default=0)
    top = 58 + TITLE_LINE_PX * max(0, title_lines - 3)
    fig.update_layout(
        template=plotly_white(), font=FONT, hoverlabel={"bgcolor": "white", "font_size": 12},
        margin={"l": max(150, 16 + CHAR_PX * longest), "r": LEGEND_PX, "t": top, "b": 40,
                "autoexpand": False},
        legend={"font": {"size": 11}, **legend, "x": 1.02, "xanchor": "left", "y": 1,
                "yanchor": "top"})
    fig.update_annotations(font={"size": 13}, xanchor="left", x=0, align="left")


def _color_key(phase: str, imported_gpu_lane: bool) -> str:
    """A phase's legend entry: itself if known, else memcpy/memset/kernel, else "other"."""
    if phase in PHASE_COLORS:
        return phase
    known = [name for name in ("memcpy", "memset") if name in phase.lower()]
    return known[0] if known else "kernel" if imported_gpu_lane else OTHER_PHASE


def _phase_trace(phase: str, spans: list[SpanDict], index: dict[str, int],
                 offset_us: float, show_legend: bool, rank: int, lang: str) -> dict[str, Any]:
    """One bar trace for all spans of a phase."""
    starts = [(s["start_us"] - offset_us) / 1000.0 for s in spans]
    durations = [(s["end_us"] - s["start_us"]) / 1000.0 for s in spans]
    custom = [[html.escape(str(s["phase"])), s.get("step", -1), d, s.get("batch_size", 0),
               s.get("num_tokens", 0), html.escape(str(s["lane"])), b, _cached_line(s, lang)]
              for s, d, b in zip(spans, durations, starts)]
    return dict(
        type="bar", name=phase, legendgroup=phase, showlegend=show_legend, legendrank=100 + rank,
        orientation="h", base=starts, x=durations, y=[index[s["lane"]] for s in spans],
        width=BAR_WIDTH, customdata=custom, hovertemplate=t(lang, "hover_bar"),
        # A hairline between neighbouring bars, while bars are wide enough to keep their colour.
        marker={"color": phase_color(phase), **opacity(spans),
                "line": {"width": 0.6 if len(spans) < LINED_BARS else 0,
                         "color": "rgba(255,255,255,0.8)"}},
    )


def _cached_line(span: SpanDict, lang: str) -> str:
    """A prefill's hover line for its prompt tokens found in the prefix cache ("" for none)."""
    cached = int(span.get("cached_tokens") or 0)
    if not cached:
        return ""
    return t(lang, "hover_cached").format(cached=cached,
                                          total=cached + int(span.get("num_tokens") or 0))


def _add_gaps(fig: FigureSpec, gaps: Sequence[tuple[float, ...]], gpu_rows: list[int], cell: Cell,
              legend_shown: set[str], lang: str, kind: str = "gpu_idle") -> None:
    """One bar per gap and contiguous band of GPU lanes: red hatched for GPU idle, grey for no
    request in the system; a whole run's as light as it is thin (``pixels.band_opacity``)."""
    px_us, offset_us = cell.px_us, cell.offset_us
    whole = px_us > 0 and kind == "gpu_idle"
    bands: list[list[int]] = []
    for lane_row in gpu_rows:
        if bands and lane_row == bands[-1][-1] + 1:
            bands[-1].append(lane_row)
        else:
            bands.append([lane_row])
    ys, widths, starts, lengths, fills = [], [], [], [], []
    for band in bands:
        for gap in gaps:
            a, b = gap[0], gap[1]
            ys.append((band[0] + band[-1]) / 2.0)
            widths.append(len(band) - 1 + 0.96)
            starts.append((a - offset_us) / 1000.0)
            lengths.append((b - a) / 1000.0)
            share = gap[2] if len(gap) > 2 else 1.0
            fills.append(round(band_opacity(a, b, share, px_us if whole else 0.0), 3))
    name = t(lang, kind)
    marker: dict[str, Any] = {"color": QUIET_FILL, "line": {"width": 0}}
    if kind == "gpu_idle":
        marker = {"color": IDLE_FILL_OPAQUE if whole else IDLE_FILL,
                  "line": {"color": IDLE_LINE, "width": 0 if whole else 0.6},
                  "pattern": {"shape": "/", "fgcolor": IDLE_LINE, "size": 6, "solidity": 0.15}}
    if any(fill < 1.0 for fill in fills):       # merged or thin bands: as opaque as idle
        marker["opacity"] = fills
    fig.add_trace(dict(
        type="bar", name=name, legendgroup=kind, showlegend=kind not in legend_shown,
        legendrank=1 if kind == "gpu_idle" else 4, orientation="h", base=starts, x=lengths,
        y=ys, width=widths, customdata=starts,
        hovertemplate=f"<b>{name}</b><br>" + t(lang, "hover_gap"), marker=marker,
    ), row=cell.row, col=cell.col)
    legend_shown.add(kind)


def _add_lag_marks(fig: FigureSpec, spans: list[SpanDict], marks: list[LagMark],
                   index: dict[str, int], cell: Cell,
                   t_range: tuple[float, float], legend_shown: set[str], lang: str) -> None:
    """★ on each forward that still carried a stopped request; × where its stop was read."""
    offset_us, cluster_us = cell.offset_us, MARK_PX * cell.px_us
    forwards = {s["step"]: s for s in spans
                if s["lane"] == Lane.ENGINE_STREAM and s["phase"] in FORWARD_PHASES}
    stars: list[tuple[float, str]] = []
    wasted = {m["request"]: m["wasted_steps"] for m in marks}      # each request's extra steps
    for step, items in sorted(extra_steps(marks).items()):
        span = forwards.get(step)
        if span is None or Lane.ENGINE_STREAM not in index:
            continue
        lines = [t(lang, "lag_extra" if wasted.get(req, 1) == 1 else "lag_extra_k").format(
                     req=req, stop=stop, nth=nth, total=wasted.get(req, 1))
                 for req, stop, nth in items]
        stars.append((((span["start_us"] + span["end_us"]) / 2 - offset_us) / 1000.0,
                      "<br>".join(lines)))
    stops = [((m["stop_us"] - offset_us) / 1000.0,
              t(lang, "lag_stop").format(req=m["request"], stop=m["stop_step"]))
             for m in marks if t_range[0] <= m["stop_us"] <= t_range[1]]
    within_ms = cluster_us / 1000.0
    stars, stops = _clustered(stars, within_ms), _clustered(stops, within_ms)
    if stars:
        _add_marks(fig, stars, index[Lane.ENGINE_STREAM] - 0.3, "lag", t(lang, "lag_legend"), cell,
                   legend_shown, {"symbol": "star", "size": 12 if cluster_us else 15,
                                  "color": "#ffd400", "line": {"color": "#222222", "width": 1.2}})
    if stops and Lane.CPU in index:
        _add_marks(fig, stops, index[Lane.CPU] + 0.3, "stop", t(lang, "stop_legend"), cell,
                   legend_shown, {"symbol": "x-thin", "size": 9 if cluster_us else 11,
                                  "line": {"color": "#222222", "width": 2}})


def _add_marks(fig: FigureSpec, marks: list[tuple[float, str]], y: float, group: str, name: str,
               cell: Cell, legend_shown: set[str], marker: dict[str, Any]) -> None:
    fig.add_trace(dict(
        type="scatter", x=[x for x, _ in marks], y=[y] * len(marks), mode="markers", name=name,
        legendgroup=group, showlegend=group not in legend_shown,
        legendrank=2 if group == "lag" else 3, hovertext=[text for _, text in marks],
        hovertemplate="%{hovertext}<extra></extra>", marker=marker), row=cell.row, col=cell.col)
    legend_shown.add(group)


def _clustered(marks: list[tuple[float, str]], within_ms: float) -> list[tuple[float, str]]:
    """(x in ms, hover text) marks less than ``within_ms`` after a cluster's first, as one."""
    joined: list[tuple[float, list[str]]] = []
    for x, text in sorted(marks):
        if joined and x - joined[-1][0] < within_ms:
            joined[-1][1].append(text)
        else:
            joined.append((x, [text]))
    return [(x, "<br>".join(texts[:MARK_LINES] + ([f"… +{len(texts) - MARK_LINES}"]
                                                  if len(texts) > MARK_LINES else [])))
            for x, texts in joined]


def _run_title(run: RunDict, label: str, lang: str) -> str:
    """Lines above a run's lanes: its idle gaps (bold), busy share and window."""
    live = "idle_us_total" not in (run.get("metrics") or {})
    head, busy = run_title(run, html.escape(label), lang)
    if "window" in run:
        w = run["window"]
        busy += "<br>" + t(lang, "window_steps").format(
            first=w["first_step"], last=w["last_step"],
            forwards=count(lang, w.get("forwards", 0), "forwards"),
            ms=ms_text((w["t_end_us"] - w["t_start_us"]) / 1000.0))
    elif live:
        busy += " · " + t(lang, "so_far")
    for line in busy_badge_lines(run, lang):   # the machine was too busy for this run's times
        busy += f"<br><b style=\"color:{BUSY_COLOR}\">{html.escape(line)}</b>"
    return f"<b>{head}</b><br><span style=\"font-size:12px\">{busy}</span>"


def message_figure(message: str) -> FigureSpec:
    """An empty chart that says ``message`` (before a run, or while one is in progress)."""
    fig = FigureSpec()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 14, "color": "#777777"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(template=plotly_white(), height=220,
                      margin={"l": 10, "r": 10, "t": 20, "b": 20})
    return fig


@functools.cache
def plotly_white() -> dict[str, Any]:
    """Plotly's "plotly_white" template as the JSON plotly.js reads."""
    import plotly.io as pio

    return pio.templates["plotly_white"].to_plotly_json()
