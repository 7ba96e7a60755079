"""Arrival processes and trace files: reproducible, shaped as asked, and refused with the field
named when they are not times and lengths. Latency statistics as serving benchmarks define them."""

from __future__ import annotations

import json
import math

import pytest

from engine.scheduler.arrivals import Arrival, check_rate, load_trace, parse_trace, poisson_times
from record.latency_rows import format_table, row_from_metrics, summarize
from record.metrics import latency_summary, percentile, ttft_drift


def test_poisson_times_are_seeded_sorted_and_at_the_rate():
    times = poisson_times(20.0, 4000, seed=3)
    assert times == poisson_times(20.0, 4000, seed=3) != poisson_times(20.0, 4000, seed=4)
    assert times[0] == 0.0 and times == sorted(times)
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(1 / 20.0, rel=0.08)
    # Exponential gaps: the standard deviation equals the mean.
    std = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps))
    assert std == pytest.approx(mean, rel=0.1)


def test_burst_and_bad_rates():
    assert poisson_times(math.inf, 5) == [0.0] * 5
    for bad in (0, -1.0, float("nan"), True, "4"):
        with pytest.raises(ValueError, match="request_rate"):
            check_rate(bad)
    with pytest.raises(ValueError, match="number of requests"):
        poisson_times(2.0, 0)


def test_trace_with_times_and_aliases(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"timestamp": 5.5, "input_len": 7, "output_len": 3},
                                {"arrival_s": 5.0, "prompt_tokens": 4, "output_tokens": 9}]))
    assert load_trace(path) == [Arrival(0.0, 4, 9), Arrival(0.5, 7, 3)]   # sorted, from t=0
    assert load_trace(path, limit=1) == [Arrival(0.0, 4, 9)]


def test_trace_of_lengths_only_needs_a_rate(tmp_path):
    path = tmp_path / "lengths.jsonl"
    path.write_text("\n".join(json.dumps({"prompt_len": n, "output_len": 2 * n})
                              for n in (3, 4, 5)))
    with pytest.raises(ValueError, match="request rate"):
        load_trace(path)
    arrivals = load_trace(path, rate=2.0, seed=1)
    assert [a.at_s for a in arrivals] == poisson_times(2.0, 3, seed=1)
    assert [(a.prompt_tokens, a.output_tokens) for a in arrivals] == [(3, 6), (4, 8), (5, 10)]


@pytest.mark.parametrize("doc, words", [
    ("[]", "non-empty list"),
    ("{nope", "neither JSON nor JSON lines"),
    ('[{"arrival_s": -1}]', "request 0: arrival_s"),
    ('[{"arrival_s": 0, "prompt_tokens": 0}]', "request 0: prompt_tokens"),
    ('[{"arrival_s": 0, "output_tokens": 2.5}]', "request 0: output_tokens"),
    ('[{"arrival_s": 0}, {"prompt_tokens": 3}]', "every request has an arrival time or none"),
    ('[3]', "request 0: expected an object"),
])
def test_bad_traces_name_the_request_and_field(doc, words):
    with pytest.raises(ValueError, match=words):
        parse_trace(doc.encode(), "t.json")


def test_percentile_matches_linear_interpolation():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 99) == pytest.approx(4.0 + 0.96 * 6.0)
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) == 0.0


def test_latency_summary_from_outputs():
    outs = [
        {"token_ids": [1, 2, 3], "finish_reason": "length", "arrival_us": 0.0,
         "first_token_us": 10_000.0, "finish_us": 30_000.0,
         "token_us": [10_000.0, 20_000.0, 30_000.0]},
        {"token_ids": [1, 2], "finish_reason": "stop", "arrival_us": 5_000.0,
         "first_token_us": 25_000.0, "finish_us": 55_000.0, "token_us": [25_000.0, 55_000.0]},
        {"token_ids": [9], "finish_reason": "abort", "arrival_us": 0.0,    # left out
         "first_token_us": 1.0, "finish_us": 2.0, "token_us": [1.0]},
    ]
    s = latency_summary(outs)
    assert s["completed_requests"] == 2
    assert s["ttft_ms_mean"] == pytest.approx(15.0) and s["ttft_ms_p50"] == pytest.approx(15.0)
    assert s["itl_ms_mean"] == pytest.approx((10 + 10 + 30) / 3)      # pooled gaps
    assert s["itl_ms_p50"] == pytest.approx(10.0)
    assert s["tpot_ms_mean"] == pytest.approx((10 + 30) / 2)
    assert s["e2e_ms_p50"] == pytest.approx(40.0)
    assert s["requests_per_s"] == pytest.approx(2 / 0.055)


def test_table_summarises_repeats_with_their_spread():
    rows = [row_from_metrics(loop, rate, 8, {"tokens_per_s": tps, "ttft_ms_p50": tps / 10,
                                             "gpu_busy_frac": 0.5})
            for loop in ("normal", "overlap") for rate in (math.inf, 2.0) for tps in (100, 120, 110)]
    summary = summarize(rows)
    assert [(r["request_rate"], r["loop"], r["runs"]) for r in summary] == [
        (2.0, "normal", 3), (2.0, "overlap", 3), (None, "normal", 3), (None, "overlap", 3)]
    assert summary[0]["output_tokens_per_s"] == 110
    assert summary[0]["spread"]["output_tokens_per_s"] == [100, 120]
    text = format_table(summary)
    assert "| 2 req/s | normal | 3 | 110 (100-120) |" in text and "| burst | overlap |" in text
    json.dumps(summary)                                          # rows are plain JSON


def test_ttft_drift_tells_a_queue_that_holds_from_one_that_grows() -> None:
    steady = [{"arrival_us": 1000.0 * i, "first_token_us": 1000.0 * i + 500 + 10 * (i % 3)}
              for i in range(30)]
    growing = [{"arrival_us": 1000.0 * i, "first_token_us": 1000.0 * i + 500 + 400.0 * i}
               for i in range(30)]
    assert abs(ttft_drift(steady) - 1.0) < 0.05
    assert ttft_drift(growing) > 3
    assert ttft_drift(steady[:5]) is None                 # too few to split in thirds
    assert ttft_drift([{"arrival_us": 0.0, "first_token_us": None}] * 9) is None
