"""The live timeline while a run is on: a compact JSON payload the page draws on a ``<canvas>``
(``ui/live_chart.py``), since a plotly redraw would take the cores the run needs; the full chart
(``viz.gantt``) takes its place at the end. Spans go as ``[lane, colour, start ms, end ms]``."""

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
    """The canvas's JSON for these runs (ms since each run started); ``recording``: a line above
    them saying they are a recording, not the reader's run."""
    out = []
    end_ms = 0.0
    for run, name in zip(runs, display_labels(runs, lang)):
        lanes = ordered_lanes(run)
        index = {lane: i for i, lane in enumerate(lanes)}
        spans = [s for s in run.get("spans", []) if s["lane"] in index]
        colors: dict[str, int] = {}                 # colour -> its place in the palette
        rows = [[index[s["lane"]], colors.setdefault(phase_color(s["phase"]), len(colors)),
                 round(s["start_us"] / 1e3, 4), round(s["end_us"] / 1e3, 4)] for s in spans]
        end_ms = max([end_ms, *(s["end_us"] / 1e3 for s in spans)])
        gpu = [lane for lane in gpu_lanes(run) if lane in index]
        time = gpu_time({**run, "spans": spans, "gpu_lanes": gpu})
        gaps = [[round(a / 1e3, 4), round(b / 1e3, 4)] for a, b in time.gaps]
        quiet = [[round(a / 1e3, 4), round(b / 1e3, 4)] for a, b in time.quiet]
        running = "idle_us_total" not in (run.get("metrics") or {})
        title = " · ".join(run_title(run, name, lang))
        if running:
            title += " · " + t(lang, "so_far")
        # A finished loop that found the machine too busy: its badge, as on the figure's panels.
        titles = [title, *busy_badge_lines(run, lang)]
        out.append({"titles": titles, "lanes": [_plain(lane_label(lane, lang)) for lane in lanes],
                    "gpu_rows": sorted(index[lane] for lane in gpu), "palette": list(colors),
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
