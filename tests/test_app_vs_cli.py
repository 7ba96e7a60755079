"""The app holds to the CLI: on this machine and the app's default workload, the page's first
clicks show the overlap the CLI measures (GPU busy within 5 points, at least 1.3x per decode
step), with a browser on the same cores.

A benchmark-style test: it compares ratios measured side by side, never absolute times. A busy
machine can take overlap away from both (another program on the cores the device and the
scheduler need), so each figure is judged against a CLI measurement made just before it: when
the CLI itself cannot show overlap at that moment, the machine is not quiet enough to measure
and the click is measured again (a few times at most), never counted against the app.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
BUSY_POINTS = 0.05          # the app's overlap GPU busy within 5 points of the CLI's
MIN_SPEEDUP = 1.3           # per decode step, steady window
CLICKS = 3
ATTEMPTS = 6                # measurements in all, retries for a busy machine included


def _tool():
    spec = importlib.util.spec_from_file_location("app_vs_cli", ROOT / "scripts" / "app_vs_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cli_can_show_overlap(cli: dict) -> bool:
    return cli["speedup"] >= MIN_SPEEDUP and cli["busy"] >= 0.95


@pytest.mark.browser
def test_three_first_clicks_show_what_the_cli_measures():
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    tool = _tool()
    port = tool.free_port()
    proc, _ = tool.start_app(port)
    judged, unmeasurable = [], []
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=tool.CHROMIUM_ARGS)
            for _ in range(ATTEMPTS):
                if len(judged) == CLICKS:
                    break
                cli = tool.cli_run()
                if not _cli_can_show_overlap(cli):
                    unmeasurable.append(cli)            # the machine is busy: measure again
                    continue
                app = tool.click(browser, f"http://127.0.0.1:{port}/")
                if not (app["speedup"] >= MIN_SPEEDUP and app["busy"] >= cli["busy"] - BUSY_POINTS):
                    after = tool.cli_run()             # did the machine get busy meanwhile?
                    if not _cli_can_show_overlap(after):
                        unmeasurable.append(after)
                        continue
                judged.append((cli, app))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if len(judged) < CLICKS:
        pytest.skip(f"this machine was too busy to show overlap in {len(unmeasurable)} of "
                    f"{ATTEMPTS} measurements (the CLI itself measured "
                    f"{[round(c['speedup'], 2) for c in unmeasurable]}x)")
    for cli, app in judged:
        assert app["busy"] >= cli["busy"] - BUSY_POINTS, (cli, app)
        assert app["speedup"] >= MIN_SPEEDUP, (cli, app)
