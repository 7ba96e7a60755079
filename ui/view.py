"""The main view's outputs, by name: one small dataclass instead of positional 16-tuples.

Every handler that changes the main view returns a ``MainView`` with the fields it sets; the
others keep what the page shows. ``RunView.outputs`` lists the components in field order, and
Gradio gets the values in that order (``values``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

import gradio as gr
from gradio.components.plot import PlotData

from viz.figure import FigureSpec

TYPED_SLIDER = "typed-slider"   # the class of these sliders in the page (app.KEEP_TYPED_JS)


class TypedSlider(gr.Slider):
    """A ``gr.Slider`` whose typed value reaches its handler as typed: Gradio's own range check
    would answer in English whatever the page's language. A subclass, not a patched instance:
    Gradio rebuilds a component from its class when an update changes its range."""

    is_template = True          # drawn by Gradio's own slider (the block name of gr.Slider)

    def preprocess(self, payload: Any) -> Any:
        return payload


def slider(*args: Any, **kwargs: Any) -> TypedSlider:
    """A ``TypedSlider`` carrying the page's class for it (``app.KEEP_TYPED_JS`` finds it)."""
    classes = list(kwargs.pop("elem_classes", None) or []) + [TYPED_SLIDER]
    return TypedSlider(*args, elem_classes=classes, **kwargs)


# What a handler gives a component instead of a value: its new properties (``gr.update``'s type).
Update = dict[str, Any]


def plot(figure: FigureSpec | dict) -> PlotData:
    """A ``viz`` figure for a ``gr.Plot``: serialised once, never validated again by plotly's
    Python objects (the cost a live redraw must not pay)."""
    spec = figure if isinstance(figure, dict) else figure.to_dict()
    return PlotData(type="plotly", plot=json.dumps(spec, separators=(",", ":")))


@dataclass
class MainView:
    status: object = field(default_factory=gr.update)        # the status line (HTML)
    timeline: object = field(default_factory=gr.update)      # whole runs, side by side
    live: object = field(default_factory=gr.update)          # the canvas while a run is on
    zoomed: object = field(default_factory=gr.update)        # the step window
    memory: object = field(default_factory=gr.update)        # KV pages per step (where a run has them)
    metrics: object = field(default_factory=gr.update)       # metrics table and formula (HTML)
    texts: object = field(default_factory=gr.update)         # generated texts (HTML)
    first_step: object = field(default_factory=gr.update)
    last_step: object = field(default_factory=gr.update)
    record: object = field(default_factory=gr.update)        # the record on screen (gr.State)
    said: object = field(default_factory=gr.update)          # the status as data (gr.State)
    download_record: object = field(default_factory=gr.update)
    download_trace: object = field(default_factory=gr.update)
    headline: object = field(default_factory=gr.update)      # the run's one line (HTML)
    shown_lang: object = field(default_factory=gr.update)    # the language it was drawn in (gr.State)
    look_for: object = field(default_factory=gr.update)      # "What to look for" beside the chart

    def values(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))
