"""Pure drawing: run records (plain dicts) in, plotly figures and HTML out. A live run, a recorded
run and an imported trace arrive as the same run dicts and take one path to the screen. Plotly and
the standard library only: never torch, never the engine."""

from viz.formula import multistep_html
from viz.gantt import message_figure, side_by_side_figure
from viz.headline import headline_html
from viz.labels import display_labels
from viz.latency import latency_figure
from viz.live_payload import live_payload
from viz.memory import memory_figure
from viz.panels import metrics_html, record_label, record_maker, record_where, texts_html
from viz.replay import step_caption
from viz.stepview import step_figure, unrolled_figure

__all__ = [
    "display_labels", "headline_html", "latency_figure", "live_payload", "memory_figure",
    "message_figure", "metrics_html", "multistep_html", "record_label", "record_maker",
    "record_where", "side_by_side_figure", "step_caption", "step_figure", "texts_html",
    "unrolled_figure",
]
