"""When requests arrive: a Poisson process at a request rate, a burst, or a replayed trace (a JSON or
JSON-lines list of ``{"arrival_s", "prompt_tokens", "output_tokens"}``). Normal and overlap are
compared on the *same* arrival sequence, made here from a seed."""

from __future__ import annotations

import json
import math
import numbers
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from record.bounded_read import read_bounded

MAX_ARRIVALS = 100_000
MAX_TRACE_BYTES = 64 * 2**20
MAX_RATE = 1e6
_ARRIVAL_KEYS = ("arrival_s", "timestamp", "arrival_time")
_PROMPT_KEYS = ("prompt_tokens", "prompt_len", "input_len", "input_length")
_OUTPUT_KEYS = ("output_tokens", "output_len", "output_length", "max_tokens")


@dataclass(frozen=True)
class Arrival:
    """One request of a workload: when it arrives and, from a trace, how long it is."""

    at_s: float                           # seconds after the run starts
    prompt_tokens: int | None = None      # None: the workload's own prompt length
    output_tokens: int | None = None      # None: the workload's own max_new_tokens


def check_rate(rate: Any, name: str = "request_rate") -> float:
    """A request rate: a positive number of requests per second, or ``inf`` for a burst."""
    ok = isinstance(rate, numbers.Real) and not isinstance(rate, bool) and rate > 0 \
        and (math.isinf(rate) or rate <= MAX_RATE)
    if not ok:
        raise ValueError(f"{name} must be a number of requests per second in (0, {MAX_RATE:g}] "
                         f"or inf (a burst), got {rate!r}")
    return float(rate)


def poisson_times(rate: float, n: int, seed: int = 0) -> list[float]:
    """``n`` arrival times of a Poisson process at ``rate`` requests/s: the first at t=0, then
    exponential gaps of mean ``1/rate`` (``rate = inf``: every request at t=0)."""
    rate = check_rate(rate)
    if not 1 <= n <= MAX_ARRIVALS:
        raise ValueError(f"the number of requests must be in 1..{MAX_ARRIVALS}, got {n}")
    if math.isinf(rate):
        return [0.0] * n
    rng = random.Random(seed)
    times, t = [0.0], 0.0
    for _ in range(n - 1):
        t += rng.expovariate(rate)
        times.append(t)
    return times


def _pick(entry: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((entry[k] for k in keys if k in entry), None)


def _count(value: Any, where: str, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= 1 << 20:
        raise ValueError(f"{where}: {field} must be a whole number of tokens in 1..{1 << 20}, "
                         f"got {value!r}")
    return int(value)


def _parse(data: bytes, name: str) -> list[Any]:
    text = data.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        try:                                   # JSON lines: one object per line
            doc = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            raise ValueError(f"{name} is neither JSON nor JSON lines ({error})") from None
    if isinstance(doc, dict):
        doc = doc.get("requests", doc.get("data"))
    if not isinstance(doc, list) or not doc:
        raise ValueError(f"{name}: expected a non-empty list of requests, or an object "
                         'with one: {"requests": [...]}')
    return doc


def parse_trace(data: bytes, name: str = "the trace") -> list[Arrival]:
    """The arrivals of a trace file's bytes (see the module docstring for the format), sorted."""
    entries = _parse(data, name)
    if len(entries) > MAX_ARRIVALS:
        raise ValueError(f"{name} has {len(entries)} requests; the limit is {MAX_ARRIVALS}")
    arrivals = []
    for i, entry in enumerate(entries):
        where = f"{name}, request {i}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object, got {type(entry).__name__}")
        at = _pick(entry, _ARRIVAL_KEYS)
        if at is not None and (isinstance(at, bool) or not isinstance(at, numbers.Real)
                               or not math.isfinite(at) or at < 0):
            raise ValueError(f"{where}: arrival_s must be a finite number of seconds >= 0, "
                             f"got {at!r}")
        arrivals.append(Arrival(-1.0 if at is None else float(at),
                                _count(_pick(entry, _PROMPT_KEYS), where, "prompt_tokens"),
                                _count(_pick(entry, _OUTPUT_KEYS), where, "output_tokens")))
    timed = [a.at_s >= 0 for a in arrivals]
    if any(timed) and not all(timed):
        raise ValueError(f"{name}: either every request has an arrival time or none has")
    return sorted(arrivals, key=lambda a: a.at_s)


def load_trace(path: str | Path, rate: float | None = None, seed: int = 0,
               limit: int | None = None) -> list[Arrival]:
    """A trace file's first ``limit`` arrivals, the first at t=0 (without times: at ``rate``)."""
    name = Path(path).name
    try:
        data = read_bounded(path, MAX_TRACE_BYTES, what=f"trace {name}")
    except OSError as error:
        raise ValueError(f"cannot read the trace {path}: {error.strerror or error}") from None
    arrivals = parse_trace(data, name)[:limit]
    if arrivals[0].at_s < 0:
        if rate is None:
            raise ValueError(f"{name} has no arrival times: give a request rate to spread them")
        times = poisson_times(rate, len(arrivals), seed)
        return [Arrival(t, a.prompt_tokens, a.output_tokens) for t, a in zip(times, arrivals)]
    first = arrivals[0].at_s
    return [Arrival(a.at_s - first, a.prompt_tokens, a.output_tokens) for a in arrivals]


def describe(arrivals: list[Arrival]) -> str:
    """One line for a table's caption: how many requests over how long, at what mean rate."""
    span = arrivals[-1].at_s - arrivals[0].at_s if arrivals else 0.0
    if span <= 0:
        return f"{len(arrivals)} requests, all at t=0 (a burst)"
    return (f"{len(arrivals)} requests over {span:.1f} s "
            f"(mean {(len(arrivals) - 1) / span:.2f} req/s)")
