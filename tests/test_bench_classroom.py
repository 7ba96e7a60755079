"""The classroom benchmark's bounds and its reading of the page: it refuses a class it cannot
hold before starting anything, spreads its browsers over the line, and reads what the Run
handler's views say (place, estimate, the recording, the run's own start, chart and end) from the
same markup the page shows."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")

from bench import classroom  # noqa: E402
from bench.classroom_visitors import Seen, observe  # noqa: E402


@pytest.mark.parametrize("visitors, browsers", [(0, 0), (65, 3), (30, 9), (2, 3), (5, -1)])
def test_a_class_it_cannot_hold_is_refused_before_anything_starts(visitors, browsers, capsys):
    assert classroom.run(visitors, browsers, budget_s=1.0) == 2
    assert "classroom takes 1 to 64 visitors" in capsys.readouterr().err


def test_the_browsers_stand_first_last_and_between():
    assert classroom._browser_positions(30, 3) == {0, 14, 29} or \
        classroom._browser_positions(30, 3) == {0, 15, 29}
    assert classroom._browser_positions(30, 1) == {0}
    assert classroom._browser_positions(5, 0) == set()
    assert len(classroom._browser_positions(64, 8)) == 8


def _values(view) -> list:
    """A ``MainView`` as ``gradio_client`` hands it over: the values in field order."""
    return [getattr(view, f.name) for f in fields(view)]


def test_it_reads_the_run_handlers_views_as_the_page_shows_them():
    import json

    import viz
    from ui import waiting
    from ui.controls import Controls
    from ui.status import progress_bar, status
    from ui.view import MainView

    prepared = waiting.prepare(Controls.page_defaults(), "en")
    seen = Seen(3, "client", click=10.0)
    first = waiting._waiting_view((2, 7.4), prepared, "en")
    observe(seen, _values(first), 10.5)
    later = waiting.line_status((1, 3.1), prepared, "en")            # the line timer's word
    observe(seen, later, 11.5)
    assert seen.places == [(10.5, 2, 8), (11.5, 1, 4)] and seen.recording == 10.5
    assert not seen.press_run_waiting and seen.start is None and seen.chart is None
    observe(seen, _values(MainView(status=progress_bar(0.0, "Starting"), live="")), 12.0)
    assert seen.start == 12.0 and seen.chart is None
    record = json.loads((ROOT / "assets/recorded/cpu-2core-defaults.json").read_text())
    own = viz.live_payload(record["runs"][:1], "en")               # its own run's spans
    observe(seen, _values(MainView(status=progress_bar(0.5, "Running"), live=own)), 13.0)
    observe(seen, _values(MainView(status=status("Done", "ok"))), 14.0)
    assert (seen.chart, seen.done, seen.error) == (13.0, 14.0, "")
    gone = Seen(4, "client", click=10.0)                            # it left the line
    observe(gone, _values(first), 10.5)
    observe(gone, _values(waiting.left_view("en")), 11.0)
    assert gone.start is None and gone.done is None and not gone.error
    idle = Seen(5, "client", click=10.0)                            # a page that said Press Run
    observe(idle, _values(MainView(status=first.status, zoomed="Press Run to draw")), 10.2)
    assert idle.press_run_waiting
