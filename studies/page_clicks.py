"""What the studies of the page's Run share: one click through the page's own handler, and
programs that only spin beside it (a class's other tabs, a pip install)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from typing import Any


def click(controls: Any) -> dict[str, Any]:
    """Press Run once with ``controls`` (``ui.live_runs.run_live``, the real scheduler process):
    the page's last view, by field name; the study stops if the click did not finish."""
    from ui import live_runs
    from ui.view import MainView

    names = [f.name for f in fields(MainView)]
    final = None
    for out in live_runs.run_live(controls):
        final = dict(zip(names, out))
    if not final or not isinstance(final["record"], dict):
        raise SystemExit(f"the click did not finish: {final and final['status']}")
    return final


def start_spinning(count: int) -> list[subprocess.Popen]:
    """``count`` programs that only spin (``while True: pass``)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop_spinning(spinners: list[subprocess.Popen]) -> None:
    for spinner in spinners:
        spinner.kill()
        spinner.wait()
