"""What a serving benchmark reports, per loop and request rate: a *row* is a plain dict of ``loop``,
``request_rate`` (None: a burst), ``requests`` and ``NUMBERS``. Repeats are summarised as the
median with their spread; one table for the CLI, the bench and the load test."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from record.schema import RecordDict

NUMBERS = ("output_tokens_per_s", "requests_per_s", "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p99",
           "itl_ms_mean", "itl_ms_p50", "itl_ms_p99", "tpot_ms_mean", "e2e_ms_p50", "e2e_ms_p99",
           "gpu_busy_frac", "wall_s", "other_cpu_frac", "t_fwd_us", "t_cpu_us")


def rate_label(rate: float | None) -> str:
    if rate is None or math.isinf(rate):
        return "burst"
    return f"{rate:g} req/s"


def row_from_metrics(loop: str, rate: float | None, requests: int,
                     metrics: Mapping[str, Any], gpu_busy: bool = True) -> dict[str, Any]:
    """A row from a run's metrics (``Engine.generate``'s, or a load test's latency_summary)."""
    rate = None if rate is None or math.isinf(rate) else float(rate)
    row: dict[str, Any] = {"loop": loop, "request_rate": rate, "requests": requests}
    row["output_tokens_per_s"] = metrics.get("tokens_per_s", metrics.get("output_tokens_per_s"))
    for key in NUMBERS[1:]:
        row[key] = metrics.get(key)
    if not gpu_busy:
        row["gpu_busy_frac"] = None
    return row


def rows_from_record(record: RecordDict, request_rate: float | None) -> list[dict[str, Any]]:
    """One row per run (with per-token times) of a record whose requests came at ``request_rate``."""
    out = []
    for run in record.get("runs", []):
        metrics = run.get("metrics", {})
        if "itl_ms_p50" not in metrics:
            continue                                    # a run without per-token times
        out.append(row_from_metrics(run["loop"], request_rate,
                                    len(run.get("outputs", [])), metrics))
    return out


def summarize(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (rate, loop): each number's median over repeats, ``runs`` and ``spread``
    ({number: [min, max]}); by rate (burst last), then loop as first seen."""
    groups: dict[tuple[float, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        rate = math.inf if row["request_rate"] is None else row["request_rate"]     # burst last
        groups.setdefault((rate, row["loop"]), []).append(row)
    loops = list(dict.fromkeys(row["loop"] for row in rows))
    out = []
    for (_, loop), group in sorted(groups.items(), key=lambda kv: (kv[0][0],
                                                                   loops.index(kv[0][1]))):
        merged: dict[str, Any] = {"loop": loop, "request_rate": group[0]["request_rate"],
                                  "requests": group[0]["requests"], "runs": len(group),
                                  "spread": {}}
        for key in NUMBERS:
            values = [r[key] for r in group if r.get(key) is not None]
            merged[key] = statistics.median(values) if values else None
            if values:
                merged["spread"][key] = [min(values), max(values)]
        out.append(merged)
    return out


def _cell(row: Mapping[str, Any], key: str, fmt: str, spread: bool = False) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    text = format(value, fmt)
    lo_hi = row.get("spread", {}).get(key)
    if spread and lo_hi and row.get("runs", 1) > 1 and lo_hi[0] != lo_hi[1]:
        text += f" ({format(lo_hi[0], fmt)}-{format(lo_hi[1], fmt)})"
    return text


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table of ``summarize``'s rows ("median (min-max)" where several runs)."""
    load = any(r.get("other_cpu_frac") is not None for r in rows)
    head = ("| request rate | loop | runs | output tok/s | req/s | TTFT ms mean / p50 / p99 | "
            "ITL ms mean / p50 / p99 | GPU busy |" + (" other load |" if load else "")
            + "\n|---|---|---|---|---|---|---|---|" + ("---|" if load else ""))
    lines = [head]
    for r in rows:
        busy = "-" if r.get("gpu_busy_frac") is None else f"{100 * r['gpu_busy_frac']:.1f}%"
        ttft = " / ".join((_cell(r, "ttft_ms_mean", ".1f"), _cell(r, "ttft_ms_p50", ".1f", True),
                           _cell(r, "ttft_ms_p99", ".1f", True)))
        itl = " / ".join((_cell(r, "itl_ms_mean", ".2f"), _cell(r, "itl_ms_p50", ".2f", True),
                          _cell(r, "itl_ms_p99", ".2f", True)))
        lines.append(f"| {rate_label(r['request_rate'])} | {r['loop']} | {r.get('runs', 1)} | "
                     f"{_cell(r, 'output_tokens_per_s', '.0f', True)} | "
                     f"{_cell(r, 'requests_per_s', '.2f')} | {ttft} | {itl} | {busy} |"
                     + (f" {_percent(r.get('other_cpu_frac'))} |" if load else ""))
    return "\n".join(lines)
