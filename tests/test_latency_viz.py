"""The latency-vs-rate figure: plain plotly.js dicts, one line per loop and statistic, rates in
order with the burst last, error bars only where a point was measured more than once."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from record.latency_rows import row_from_metrics, rows_from_record
from viz.latency import latency_figure


def _rows(repeats: int):
    rows = []
    for rate in (math.inf, 8.0, 2.0):
        for loop, scale in (("normal", 1.0), ("overlap", 0.8)):
            for r in range(repeats):
                m = {"tokens_per_s": 100 * (rate if rate < 100 else 20) + r,
                     "ttft_ms_p50": 10 * scale + r, "ttft_ms_p99": 20 * scale + r,
                     "itl_ms_p50": 5 * scale, "itl_ms_p99": 9 * scale, "gpu_busy_frac": 0.5}
                rows.append(row_from_metrics(loop, rate, 16, m))
    return rows


def test_figure_has_both_loops_in_rate_order():
    fig = latency_figure(_rows(3))
    json.dumps(fig)                                         # plain JSON for plotly.js
    names = [t["name"] for t in fig["data"]]
    assert names.count("normal p50") == 2 and names.count("overlap p99") == 2
    assert {t["xaxis"] for t in fig["data"]} == {"x", "x2", "x3"}
    first = fig["data"][0]
    assert first["x"] == ["2", "8", "burst"]
    assert first["y"] == [11.0, 11.0, 11.0]                 # median of 10, 11, 12
    assert first["error_y"]["array"] == [1.0, 1.0, 1.0]
    assert fig["layout"]["xaxis"]["categoryarray"] == ["2", "8", "burst"]


def test_module_imports_neither_torch_nor_the_engine():
    code = ("import sys, viz.latency; "
            "print(sorted(m for m in ('torch', 'engine', 'plotly') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, check=True).stdout
    assert out.strip() == "[]"


def test_single_runs_have_no_error_bars_and_chinese_titles():
    fig = latency_figure(_rows(1), lang="zh")
    assert all("error_y" not in t for t in fig["data"])
    assert fig["layout"]["annotations"][0]["text"].startswith("首个")


def test_empty_and_records():
    assert latency_figure([])["data"] == []
    record = {"runs": [{"loop": "overlap", "outputs": [{}] * 4,
                        "metrics": {"tokens_per_s": 50.0, "itl_ms_p50": 3.0}},
                       {"loop": "normal", "outputs": [], "metrics": {"tokens_per_s": 1.0}}]}
    rows = rows_from_record(record, 4.0)
    assert rows == [row_from_metrics("overlap", 4.0, 4, record["runs"][0]["metrics"])]
