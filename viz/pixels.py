"""Many spans drawn at the resolution they are seen at: above ``MAX_BARS`` bars, one-colour
neighbours within half a pixel are one bar (as opaque as it was busy), idle gaps one band (as
opaque as it was idle); every number on the page still counts every span and gap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from record.schema import SpanDict

MAX_BARS = 2000        # above this many bars, merge same-colour neighbours within a pixel
PIXELS = 2000          # ... a "pixel" being this share of the view's time (half a pixel at 1000)
MIN_OPACITY = 0.08     # a merged bar or band is never fainter than this
FAINTEST_BAND = 0.3    # a whole-run idle band under a pixel wide is never fainter than this
SNAPPED_PX = 2.0       # plotly widens an opaque bar narrower than this to whole pixels
COLUMN_PX = 3.0        # a whole run with more gaps than columns this wide pools them per column
SAME_SHARE = 0.02      # neighbouring columns idle within this share of each other: one band


class DrawnSpan(SpanDict, total=False):
    """A bar as drawn: a span, or same-colour neighbours merged into one (``coalesce``)."""

    merged: int             # how many spans it holds
    busy_us: float          # their own time (while merging)
    fill: float             # the share of the bar they were busy


def opacity(spans: Sequence[DrawnSpan | Mapping[str, Any]]) -> dict[str, Any]:
    """Merged bars as opaque as the square root of their busy share (a lane busy a sliver of the
    time still shows where its work was); other bars opaque."""
    if not any("fill" in s for s in spans):
        return {}
    return {"opacity": [round(max(s.get("fill", 1.0) ** 0.5, MIN_OPACITY), 3) for s in spans]}


def bands(gaps: list[tuple[float, float]],
           eps_us: float) -> list[tuple[float, float, float]]:
    """Idle gaps less than ``eps_us`` apart as one band: (start, end, idle share)."""
    bands: list[list[float]] = []
    for start, end in gaps:
        if bands and start - bands[-1][1] <= eps_us:
            bands[-1][1] = end
            bands[-1][2] += end - start
        else:
            bands.append([start, end, end - start])
    return [(a, b, idle / (b - a) if b > a else 1.0) for a, b, idle in bands]


def band_opacity(start_us: float, end_us: float, share: float, px_us: float) -> float:
    """How opaque to draw an idle band ``share`` idle so that width drawn times opacity is its
    time: plotly draws a band ``w`` < 2 pixels wide about ``w + 1`` wide, so ``w / (w + 1)``."""
    width_px = (end_us - start_us) / px_us if px_us > 0 else SNAPPED_PX
    if width_px >= SNAPPED_PX:
        return max(share, MIN_OPACITY)
    return max(share * width_px / (width_px + 1.0), FAINTEST_BAND)


def coalesce(keyed: Sequence[tuple[str, SpanDict]],
             eps_us: float) -> list[tuple[str, DrawnSpan]]:
    """Merge same-lane neighbours of one colour closer than ``eps_us`` (they share a pixel)."""
    ordered = sorted(keyed, key=lambda item: (item[1]["lane"], item[0], item[1]["start_us"]))
    merged: list[tuple[str, DrawnSpan]] = []
    for key, span in ordered:
        last = merged[-1][1] if merged else None
        if (last is not None and merged[-1][0] == key and last["lane"] == span["lane"]
                and span["start_us"] - last["end_us"] <= eps_us):
            last["end_us"] = max(last["end_us"], span["end_us"])
            last["num_tokens"] = last.get("num_tokens", 0) + span.get("num_tokens", 0)
            if span.get("cached_tokens"):        # prefills' cache hits, summed as their tokens
                last["cached_tokens"] = last.get("cached_tokens", 0) + span["cached_tokens"]
            last["merged"] = last.get("merged", 1) + 1
            last["busy_us"] += span["end_us"] - span["start_us"]
        else:
            merged.append((key, {**span, "busy_us": span["end_us"] - span["start_us"]}))
    for _, span in merged:
        extent, busy = span["end_us"] - span["start_us"], span.pop("busy_us")
        if span.get("merged", 1) > 1:
            span["fill"] = min(busy / extent, 1.0) if extent > 0 else 1.0
            span["phase"] = f"{span['merged']} × {span['phase']} … ({span['fill']:.0%})"
    return merged


def columns(gaps: Sequence[tuple[float, float]], t_start_us: float,
            width_us: float) -> list[tuple[float, float, float]]:
    """Idle gaps pooled per column ``width_us`` wide: (start, end, idle share) per column that
    held idle time; neighbours within ``SAME_SHARE`` of each other are one band."""
    if width_us <= 0:
        return [(a, b, 1.0) for a, b in gaps]
    idle: dict[int, float] = {}
    for start, end in gaps:
        first, last = (int((t - t_start_us) // width_us) for t in (start, end))
        for column in range(first, last + 1):
            left = t_start_us + column * width_us
            held = min(end, left + width_us) - max(start, left)
            if held > 0:
                idle[column] = idle.get(column, 0.0) + held
    pooled: list[list[float]] = []              # [first column, last column, idle held, share]
    for column in sorted(idle):
        share = min(idle[column] / width_us, 1.0)
        if pooled and pooled[-1][1] == column - 1 and abs(pooled[-1][3] - share) < SAME_SHARE:
            pooled[-1][1] = column
            pooled[-1][2] += idle[column]
        else:
            pooled.append([column, column, idle[column], share])
    return [(t_start_us + first * width_us, t_start_us + (last + 1) * width_us,
             min(held / ((last + 1 - first) * width_us), 1.0))
            for first, last, held, _ in pooled]
