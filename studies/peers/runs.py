"""What a peer's runner does with its runs, the same for every peer: plain runs of its code
interleaved with runs that have our recorder hooked in, figures read from the hooked runs' spans
as our own runs' are, and the record's run with what the hook cost. Imports no peer.

A plain run is ``() -> (seconds, tokens)``; a hooked run ``() -> (seconds, tokens, spans, outputs,
wall_us)``, or None where the hook could not run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from record.metrics import compute_metrics, cpu_phase_times
from record.run_record import run_dict
from record.schema import OutputDict

FIGURES = ("steady_step_us", "t_fwd_us", "t_cpu_us", "predicted_overlap_speedup")

PlainRun = Callable[[], tuple[float, int]]
HookedRun = tuple[float, int, list, list[OutputDict], float]


def figures(spans, outputs, wall_us: float, gpu_lanes: tuple) -> dict[str, Any]:
    """The step and forward figures of a hooked run, measured as our own runs are."""
    metrics: dict[str, Any] = dict(compute_metrics(spans, outputs, gpu_lanes, wall_us=wall_us))
    out: dict[str, Any] = {key: metrics[key] for key in FIGURES}
    out["cpu_phases_us"] = cpu_phase_times(spans)
    return out


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {key: statistics.median(r[key] for r in runs) for key in FIGURES}
    phases = {p for r in runs for p in r["cpu_phases_us"]}
    out["cpu_phases_us"] = {p: statistics.median(r["cpu_phases_us"].get(p, 0.0) for r in runs)
                            for p in sorted(phases)}
    return out


def time_batch(plain: PlainRun, hooked: Callable[[], HookedRun | None], batch: int, repeats: int,
               gpu_lanes: tuple) -> dict[str, Any]:
    """Plain and hooked runs of one workload, interleaved so drift hits both alike (a hooked run
    after every second plain one)."""
    plain_s, hooked_s, runs, tokens = [], [], [], 0
    for i in range(repeats):
        seconds, tokens = plain()
        plain_s.append(seconds)
        if i % 2 == 1 or repeats == 1:
            run = hooked()
            if run is not None:
                seconds, _, spans, outputs, wall_us = run
                hooked_s.append(seconds)
                runs.append(figures(spans, outputs, wall_us, gpu_lanes))
    return {"batch": batch, "tokens": tokens, "plain_s": plain_s, "hooked_s": hooked_s,
            "figures": median_figures(runs) if runs else None}


def record_run(plain: PlainRun, hooked: Callable[[], HookedRun], repeats: int, loop: str,
               label: str, lanes: tuple, gpu_lanes: tuple):
    """The record's run (the median of ``repeats`` hooked runs by time) and the hook's cost,
    after one warm-up run each way."""
    plain()
    hooked()
    plain_s, runs = [], []
    for _ in range(repeats):
        plain_s.append(plain()[0])
        runs.append(hooked())
    runs.sort(key=lambda run: run[0])
    seconds, tokens, spans, outputs, wall_us = runs[len(runs) // 2]
    metrics = compute_metrics(spans, outputs, gpu_lanes, wall_us=wall_us)
    run = run_dict(loop, 1, label, spans, metrics, outputs, lanes=lanes, gpu_lanes=gpu_lanes)
    cost = {"plain_s": plain_s, "hooked_s": [r[0] for r in runs], "tokens": tokens,
            "steps": metrics["steps"]}
    return run, cost


def hooked_output(token_ids: list[int], prompt_tokens: int, arrival_us: float,
                  token_us: list[float]) -> OutputDict:
    """One request's output from a hooked run: its tokens and when each came (µs on the run's
    clock). Every request runs to its length (``ignore_eos``)."""
    return {"token_ids": list(token_ids), "text": "", "finish_reason": "length",
            "prompt_tokens": prompt_tokens, "arrival_us": arrival_us,
            "first_token_us": token_us[0] if token_us else None,
            "finish_us": token_us[-1] if token_us else None, "token_us": token_us}


def dist_version(dist: str) -> str:
    """An installed distribution's version ('unknown' where it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"
