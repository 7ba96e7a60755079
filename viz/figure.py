"""A plotly figure as plain dicts: what plotly.js reads, built without plotly's Python objects, whose
validation and deep copies dominate a live redraw. ``to_plotly`` turns one into a ``go.Figure``
(validated then, once). ``FigureSpec`` lays out a grid of subplots as ``make_subplots`` does: one
x and one y axis per cell, shared axes linked with ``matches``, each cell's title above it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class FigureSpec:
    def __init__(self, rows: int = 1, cols: int = 1, row_heights: Sequence[float] | None = None,
                 vertical_spacing: float = 0.1, horizontal_spacing: float = 0.02,
                 shared_xaxes: bool = False, shared_yaxes: bool = False,
                 subplot_titles: list[str] | None = None) -> None:
        self.rows, self.cols = rows, cols
        self.data: list[dict[str, Any]] = []
        self.layout: dict[str, Any] = {"annotations": [], "shapes": []}
        heights = row_heights or [1.0] * rows
        free_y = 1.0 - vertical_spacing * (rows - 1)
        tops, top = [], 1.0
        for h in heights:
            size = free_y * h / sum(heights)
            tops.append((_unit(top - size), _unit(top)))    # rounding must not leave [0, 1]
            top -= size + vertical_spacing
        width = (1.0 - horizontal_spacing * (cols - 1)) / cols
        lefts = [(_unit(c * (width + horizontal_spacing)),
                  _unit(c * (width + horizontal_spacing) + width)) for c in range(cols)]
        for r in range(1, rows + 1):
            for c in range(1, cols + 1):
                x, y = self._ids(r, c)
                xaxis: dict[str, Any] = {"domain": list(lefts[c - 1]), "anchor": y}
                yaxis: dict[str, Any] = {"domain": list(tops[r - 1]), "anchor": x}
                if shared_xaxes and r < rows:           # the bottom row's axis carries the ticks
                    xaxis.update(matches=self._ids(rows, c)[0], showticklabels=False)
                if shared_yaxes and c > 1:
                    yaxis.update(matches=self._ids(r, 1)[1], showticklabels=False)
                self.layout[_axis_key(x)] = xaxis
                self.layout[_axis_key(y)] = yaxis
        for i, title in enumerate(subplot_titles or []):
            r, c = divmod(i, cols)
            if title:
                self.layout["annotations"].append({
                    "text": title, "showarrow": False, "xref": "paper", "yref": "paper",
                    "x": sum(lefts[c]) / 2, "y": tops[r][1], "xanchor": "center",
                    "yanchor": "bottom", "font": {"size": 16}})

    def _ids(self, row: int, col: int) -> tuple[str, str]:
        n = (row - 1) * self.cols + col
        return ("x", "y") if n == 1 else (f"x{n}", f"y{n}")

    def add_trace(self, trace: dict[str, Any], row: int = 1, col: int = 1) -> None:
        x, y = self._ids(row, col)
        self.data.append({**trace, "xaxis": x, "yaxis": y})

    def _axes(self, letter: str, row: int | None, col: int | None) -> list[dict[str, Any]]:
        rows = [row] if row else range(1, self.rows + 1)
        cols = [col] if col else range(1, self.cols + 1)
        index = 0 if letter == "x" else 1
        return [self.layout[_axis_key(self._ids(r, c)[index])] for r in rows for c in cols]

    def update_xaxes(self, row: int | None = None, col: int | None = None, **props: Any) -> None:
        for axis in self._axes("x", row, col):
            axis.update(props)

    def update_yaxes(self, row: int | None = None, col: int | None = None, **props: Any) -> None:
        for axis in self._axes("y", row, col):
            axis.update(props)

    def update_layout(self, **props: Any) -> None:
        self.layout.update(props)

    def add_annotation(self, **props: Any) -> None:
        self.layout["annotations"].append(props)

    def add_shape(self, **props: Any) -> None:
        self.layout["shapes"].append(props)

    def update_annotations(self, **props: Any) -> None:
        for note in self.layout["annotations"]:
            if note.get("xref") == "paper":       # the subplot titles
                note.update(props)

    def to_dict(self) -> dict[str, Any]:
        return {"data": self.data, "layout": self.layout}

    def to_plotly(self) -> Any:
        import plotly.graph_objects as go

        return go.Figure(self.to_dict())


def _unit(x: float) -> float:
    return min(1.0, max(0.0, round(x, 9)))


def _axis_key(axis_id: str) -> str:
    """"x" -> "xaxis", "y3" -> "yaxis3": the layout key of an axis a trace names."""
    return f"{axis_id[0]}axis{axis_id[1:]}"
