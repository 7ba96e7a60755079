"""The live timeline while a run is on: a compact payload that the page draws on a canvas.

A redraw of the plotly chart cost the browser about a second of its main thread on this
project's 2-core machine (plotly re-renders every bar, then Gradio resizes it and renders them
again), and the browser shares those cores with the scheduler and the device process. While a
run is on, the page therefore draws the runs on a ``<canvas>`` instead (``ui/live_chart.py``):
a rectangle per span, a hatched band per GPU idle gap, a few milliseconds per redraw. When the
run ends, the full interactive chart (``viz.gantt``) takes its place.

``live_payload`` turns runs (finished ones and the one in progress) into what the canvas needs:
for each run its title lines (a busy badge under the title, a line a reason), its lanes, its
spans as ``[lane, colour, start ms, end ms]`` and its idle gaps on the GPU lanes
(``record.metrics.idle_gaps``, the one definition). Plain JSON, no plotly.

The same canvas shows a recording while a visitor's run waits its turn: ``recording`` is then
the line that says so, drawn above the runs, and the canvas is marked as showing one.
"""

from __future__ import annotations

import json

from record.gpu_time import gpu_time
from record.schema import RunDict
from record.window import gpu_lanes
from texts import t
from viz.headline import busy_badge_lines
from viz.labels import display_labels, lane_label, ordered_lanes, run_title
from viz.style import BUSY_COLOR, IDLE_FILL, IDLE_LINE, QUIET_FILL, phase_color


def live_payload(runs: list[RunDict], lang: str = "en", recording: str = "") -> str:
    """The canvas's JSON for these runs, on one time axis (ms since each run started);
    ``recording``: the line above them that says they are a recording, not the reader's run."""
    out = []
    end_ms = 0.0
    for run, name in zip(runs, display_labels(runs, lang)):
        lanes = ordered_lanes(run)
        index = {lane: i for i, lane in enumerate(lanes)}
        spans = [s for s in run.get("spans", []) if s["lane"] in index]
        colors: dict[str, int] = {}
        palette: list[str] = []
        rows = []
        for s in spans:
            color = phase_color(s["phase"])
            if color not in colors:
                colors[color] = len(palette)
                palette.append(color)
            rows.append([index[s["lane"]], colors[color], round(s["start_us"] / 1e3, 4),
                         round(s["end_us"] / 1e3, 4)])
            end_ms = max(end_ms, s["end_us"] / 1e3)
        gpu = [lane for lane in gpu_lanes(run) if lane in index]
        time = gpu_time({**run, "spans": spans, "gpu_lanes": gpu})
        gaps = [[round(a / 1e3, 4), round(b / 1e3, 4)] for a, b in time.gaps]
        quiet = [[round(a / 1e3, 4), round(b / 1e3, 4)] for a, b in time.quiet]
        running = "idle_us_total" not in (run.get("metrics") or {})
        title = " · ".join(run_title(run, name, lang))
        if running:
            title += " · " + t(lang, "so_far")
        # A finished loop that found the machine too busy: its badge under the title, a line a
        # reason, as on the finished figure's panels (one line would run past a narrow canvas).
        titles = [title, *busy_badge_lines(run, lang)]
        out.append({"titles": titles, "lanes": [_plain(lane_label(lane, lang)) for lane in lanes],
                    "gpu_rows": sorted(index[lane] for lane in gpu), "palette": palette,
                    "spans": rows, "gaps": gaps, "quiet": quiet})
    return json.dumps({"runs": out, "end_ms": round(end_ms, 3), "idle_fill": IDLE_FILL,
                       "idle_line": IDLE_LINE, "quiet_fill": QUIET_FILL,
                       "badge_color": BUSY_COLOR,
                       "axis": t(lang, "time_axis"), "recording": recording},
                      separators=(",", ":"))


def _plain(label: str) -> str:
    """Lane labels are escaped for plotly's HTML-ish text; a canvas draws text as it is."""
    import html

    return html.unescape(label)
