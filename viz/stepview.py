"""Figures of the step-through replay. ``step_figure``: steps n-1..n+1 dimmed, step n's spans on top
with arrows for the links (upload -> forward, forward -> result copy, copy -> the CPU's wait) and
bands for the CPU work hidden under forward(Bn). ``unrolled_figure``: the article's "three rounds
unrolled" from the real run (fill, steady state, drain), each on its own time scale."""

from __future__ import annotations

import html
from typing import Any

from record.imported import imported
from record.imported.trace_steps import trace_step
from record.lag import lag_marks
from record.run_record import loop_of
from record.schema import LANES, Lane, Loop, Phase, RunDict, SpanDict
from record.steps import copy_placement, is_hidden_role, loop_kind, overlap_us, step_parts
from record.window import gpu_lanes, run_steps, step_range, window_run
from texts import t
from viz.figure import FigureSpec
from viz.gantt import (
    BAR_WIDTH,
    LANE_PX,
    Cell,
    add_run,
    message_figure,
    plotly_white,
    side_by_side_figure,
)
from viz.labels import lane_label, ordered_lanes
from viz.replay import links, role_name, spans_of
from viz.style import FONT, phase_color

DIMMED = 0.3
_LABELS: dict[str, str] = {Phase.DECODE: "fwd", Phase.PREFILL: "prefill", Phase.PROCESS_LAST: "proc",
                           Phase.SCHEDULE: "sched"}
_LIGHT_TEXT = {Phase.PROCESS_LAST, Phase.SCHEDULE, Phase.PREFILL}   # dark bars: white labels


def step_figure(run: RunDict | None, step: int, lang: str = "en",
                placement: str | None = None) -> FigureSpec:
    """Steps step-1..step+1 of ``run``, step ``step``'s spans outlined and linked (``placement``:
    where its result copies ran, ``viz.replay.copy_placement``)."""
    if not run or not run.get("spans"):
        return message_figure(t(lang, "replay_empty"))
    first, last = step_range(run)
    step = min(max(int(step), first), last)
    window = (max(first, step - 1), min(last, step + 1))
    label = str(run.get("label") or "run").partition(" (")[0]
    fig = side_by_side_figure([{**run, "label": label}], window=window, lang=lang)
    fig.update_layout(hovermode="closest")
    for trace in fig.data:
        if trace["type"] == "bar" and trace.get("legendgroup") != "gpu_idle":
            trace["opacity"] = DIMMED
    windowed = window_run(run, *window)
    offset = windowed["window"]["t_start_us"]
    index = {lane: i for i, lane in enumerate(ordered_lanes(windowed))}
    if loop_of(run)[0] == Loop.IMPORTED:
        _trace_marks(fig, run, step, index, offset, lang)
        return fig
    parts, kind = step_parts(run, step), loop_kind(run)
    said = links(parts, step, kind, lang, placement or copy_placement(run))
    roles = spans_of(parts, kind)
    for role, span in roles.items():
        if span["lane"] in index:
            fig.add_trace(_outlined(span, role, step, said.get(role, []), index, offset, lang))
    _add_arrows(fig, roles, index, offset, step, lang)
    return fig


def _trace_marks(fig: FigureSpec, run: RunDict, step: int, index: dict[str, int],
                 offset: float, lang: str) -> None:
    """An imported step: a box around its GPU work, a band over its part after the host began the
    next step, and the host's named phases outlined (``record.imported.trace_steps``)."""
    found = trace_step(run, step)
    rows = sorted(index[lane] for lane in gpu_lanes(run) if lane in index)
    if found is None or not rows:
        return
    y0, y1 = rows[0] - 0.5, rows[-1] + 0.5
    fig.add_shape(type="rect", x0=(found["start"] - offset) / 1000.0,
                  x1=(found["end"] - offset) / 1000.0, y0=y0, y1=y1, xref="x", yref="y",
                  line={"color": "#111111", "width": 2.5}, fillcolor="rgba(0,0,0,0)",
                  name="trace_step")
    fig.add_annotation(x=(found["start"] - offset) / 1000.0, y=y0, xref="x", yref="y",
                       xanchor="left", yanchor="bottom", showarrow=False, name="trace_step",
                       text=f"<b>{t(lang, 'trace_step_box').format(n=step)}</b>",
                       font={"size": 11, "color": "#111111"}, bgcolor="rgba(255,255,255,0.8)")
    if found["late"]:
        a, b = found["late"][0][0], found["late"][-1][1]
        fig.add_shape(type="rect", x0=(a - offset) / 1000.0, x1=(b - offset) / 1000.0, y0=y0,
                      y1=y1, xref="x", yref="y", layer="below", line={"width": 0},
                      fillcolor="rgba(117,107,177,0.18)", name="trace_late")
        fig.add_annotation(x=(a - offset) / 1000.0, y=(y0 + y1) / 2, xref="x", yref="y",
                           xanchor="left", showarrow=False, name="trace_late",
                           text=f"<b>{t(lang, 'trace_late_band').format(m=found['next'])}</b>",
                           font={"size": 11, "color": "#54278f"},
                           bgcolor="rgba(255,255,255,0.8)")
    roles = imported(run).get("phase_roles") or {}
    for span in run.get("spans", []):
        if span.get("step") == step and span["phase"] in roles and span["lane"] in index:
            # coloured by its role, named as the trace names it
            fig.add_trace(_outlined(span, "host", step, [], index, offset, lang,
                                    (html.escape(span["phase"]), roles[span["phase"]])))


def _outlined(span: SpanDict, role: str, step: int, partners: list[str],
              index: dict[str, int], offset: float, lang: str,
              named: tuple[str, str] | None = None) -> dict[str, Any]:
    """Step n's span drawn again on top, outlined; ``named``: an imported host phase's own name,
    and the phase whose colour it takes (its role)."""
    title, color = named or (None, None)
    name = title or role_name(role, span, step, lang)
    start = (span["start_us"] - offset) / 1000.0
    duration = (span["end_us"] - span["start_us"]) / 1000.0
    hover = (f"<b>{name}</b> · {lane_label(span['lane'], lang)}<br>{duration:.3f} ms"
             + "".join(f"<br>↔ {line}" for line in partners))
    return dict(type="bar", orientation="h", base=[start], x=[max(duration, 1e-4)], y=[index[span["lane"]]],
                  width=BAR_WIDTH, name=name, showlegend=False, hovertext=[hover],
                  hovertemplate="%{hovertext}<extra></extra>", meta=role,
                  marker={"color": phase_color(color or span["phase"]),
                          "line": {"color": "#111111", "width": 2.5}})


def _add_arrows(fig: FigureSpec, roles: dict[str, SpanDict], index: dict[str, int],
                offset: float, step: int, lang: str) -> None:
    """Arrows for the links, and a band where CPU work (process_last of the batch before, the
    next batch's building) ran under forward(Bn), labelled once, over the longest band."""
    def at(role: str, end: bool) -> tuple[float, int]:
        span = roles[role]
        return ((span["end_us" if end else "start_us"] - offset) / 1000.0, index[span["lane"]])

    arrows = [("upload", True, "forward", False, "arrow_wait_stream"),
              ("forward", True, "copy", False, "arrow_tokens"),
              ("copy", True, "wait", True, "arrow_copy_done")]
    for tail, tail_end, head, head_end, key in arrows:
        if tail not in roles or head not in roles \
                or not {roles[tail]["lane"], roles[head]["lane"]} <= set(index):
            continue
        (ax, ay), (x, y) = at(tail, tail_end), at(head, head_end)
        fig.add_annotation(x=x, y=y, ax=ax, ay=ay, xref="x", yref="y", axref="x", ayref="y",
                           text="", showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=1.8,
                           arrowcolor="#111111", standoff=2, name=key)
        # The label sits in the gap between the two lanes, beside the arrow's head.
        fig.add_annotation(x=x, y=(ay + y) / 2 if ay != y else y - 0.5, xref="x", yref="y",
                           text=f"<b>{t(lang, key)}</b>", showarrow=False, xanchor="left",
                           xshift=4, font={"size": 11, "color": "#111111"},
                           bgcolor="rgba(255,255,255,0.8)", name=key)
    forward = roles.get("forward")
    if forward is None or Lane.CPU not in index or Lane.ENGINE_STREAM not in index:
        return
    bands = []
    for role, span in roles.items():
        if is_hidden_role(role) and overlap_us(span, forward) > 0:
            x0 = max(span["start_us"], forward["start_us"])
            bands.append((x0, x0 + overlap_us(span, forward)))
    y0, y1 = sorted((index[Lane.CPU], index[Lane.ENGINE_STREAM]))
    for x0, x1 in bands:
        fig.add_shape(type="rect", x0=(x0 - offset) / 1000.0, x1=(x1 - offset) / 1000.0,
                      y0=y0 - 0.5, y1=y1 + 0.5, xref="x", yref="y", layer="below",
                      fillcolor="rgba(117,107,177,0.14)", line={"width": 0}, name="hidden")
    if bands:
        x0, x1 = max(bands, key=lambda band: band[1] - band[0])
        # The label runs from the band's edge nearer the forward's middle, to stay over it.
        left = (x0 + x1) / 2 <= (forward["start_us"] + forward["end_us"]) / 2
        fig.add_annotation(x=((x0 if left else x1) - offset) / 1000.0, y=index[Lane.CPU] + 0.5,
                           xref="x", yref="y", xanchor="left" if left else "right",
                           text=f"<b>{t(lang, 'arrow_hidden').format(n=step)}</b>",
                           showarrow=False, font={"size": 11, "color": "#54278f"},
                           bgcolor="rgba(255,255,255,0.8)", name="arrow_hidden")


def unrolled_figure(run: RunDict | None, lang: str = "en") -> FigureSpec:
    """Fill, steady state and drain: three panels of three real steps each."""
    if not run or not run.get("spans"):
        return message_figure(t(lang, "replay_empty"))
    first, last = step_range(run)
    mid = (first + last) // 2
    panels = [("unrolled_fill", first, min(last, first + 2)),
              ("unrolled_steady", max(first, mid - 1), min(last, mid + 1)),
              ("unrolled_drain", max(first, last - 2), last)]
    lanes = [lane for lane in ordered_lanes(run) if lane in LANES] or ordered_lanes(run)
    titles = [f"<b>{t(lang, key).format(a=a, b=b)}</b>" for key, a, b in panels]
    fig = FigureSpec(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.02,
                     subplot_titles=titles)
    legend_shown: set[str] = set()
    marks = lag_marks(run)
    steps = run_steps(run)                      # worked out once for the three panels
    for col, (_, a, b) in enumerate(panels, start=1):
        windowed = window_run(run, a, b, steps)
        offset = windowed["window"]["t_start_us"]
        x_max = add_run(fig, windowed, lanes, Cell(1, col, offset), legend_shown, lang,
                        marks=marks)
        fig.add_trace(_labels(windowed, lanes, offset, x_max, a, b), row=1, col=col)
        fig.update_xaxes(range=[0, x_max * 1.01 or 1.0], row=1, col=col, title={"text": "ms"},
                         showgrid=True, gridcolor="#eeeeee", zeroline=False)
    fig.update_yaxes(tickvals=list(range(len(lanes))), fixedrange=True, showgrid=False,
                     ticktext=[lane_label(lane, lang) for lane in lanes],
                     range=[len(lanes) - 0.5, -0.5], zeroline=False)
    fig.update_layout(barmode="overlay", bargap=0, template=plotly_white(), showlegend=False,
                      height=120 + LANE_PX * len(lanes), hovermode="closest",
                      margin={"l": 10, "r": 10, "t": 40, "b": 40}, font=FONT)
    fig.update_annotations(font={"size": 12})
    return fig


def _labels(run: RunDict, lanes: list[str], offset: float, x_max: float, a: int,
            b: int) -> dict[str, Any]:
    """Short names ("fwd 12", "proc 11") on the bars wide enough to hold them."""
    index = {lane: i for i, lane in enumerate(lanes)}
    xs, ys, texts, colors = [], [], [], []
    for span in run.get("spans", []):
        label = _LABELS.get(span["phase"])
        width = (span["end_us"] - span["start_us"]) / 1000.0
        if (label is None or span["lane"] not in index or not a <= span.get("step", -1) <= b
                or width < 0.09 * x_max):
            continue
        xs.append((span["start_us"] + span["end_us"]) / 2000.0 - offset / 1000.0)
        ys.append(index[span["lane"]])
        texts.append(f"{label} {span['step']}")
        colors.append("white" if span["phase"] in _LIGHT_TEXT else "#111111")
    return dict(type="scatter", x=xs, y=ys, text=texts, mode="text", showlegend=False, hoverinfo="skip",
                      textfont={"size": 11, "color": colors})
