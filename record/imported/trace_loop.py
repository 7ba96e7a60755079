"""What an imported trace's timing says about the loop that made it.

- **Launch latency.** No host can fill a gap between kernels shorter than a launch onto an idle
  stream takes, so such gaps are not idleness (``launch_latency_us``).
- **Serial or overlapped.** A serial loop blocks every step until the GPU ran dry; an overlapped
  one never does, and shows a step's GPU work running after the host began the next, a second
  stream's work beside the forward, and named host work under GPU work (``loop_seen``)."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from record.metrics import union_intervals as _union

Interval = tuple[float, float]

DEFAULT_JOIN_US = 5.0       # when a trace has too few launches onto an idle stream to measure
MAX_JOIN_US = 50.0          # a measured latency above this is a clock problem, not a launch
MIN_SAMPLES = 20
WAKE_US = 50.0              # a blocked host call returns this soon after the GPU has finished
SERIAL_SHARE = 0.5          # host blocked until the GPU ran dry in at least this share of steps
NO_WAIT_SHARE = 0.2         # ... in at most this share: the host never waited for its results
LATE_SHARE = 0.2            # median share of a step's GPU work run after the next step began
BESIDE_SHARE = 0.5          # share of steps with a second stream's work beside the main one's
UNDER_SHARE = 0.25          # share of the host's named work done while the GPU was busy
BLOCKING = ("Synchronize", "cudaMemcpy", "cuMemcpy")
POLLING = ("EventQuery", "StreamQuery")   # cudaEventQuery, cuEventQuery, cudaStreamQuery, ...
POLL_GAP_US = 50.0          # queries at most this far apart belong to one poll
POLL_MIN = 3                # a poll is at least this many queries in a row


@dataclass(frozen=True)
class GpuWork:
    """One kernel, memcpy or memset, and when the host launched it (``direct``: not in a graph)."""

    start: float
    end: float
    stream: Hashable
    launch: float | None
    direct: bool = True


def launch_latency_us(work: Sequence[GpuWork]) -> tuple[float, bool]:
    """(median launch-to-start latency of work launched onto an idle GPU, measured?); with fewer
    than ``MIN_SAMPLES``, ``DEFAULT_JOIN_US`` and False."""
    samples: list[float] = []
    pending_until: float | None = None
    launched = [(w.launch, w) for w in work if w.launch is not None]
    for launch, item in sorted(launched, key=lambda pair: pair[0]):
        if item.direct and (pending_until is None or pending_until < launch):
            latency = item.start - launch
            if 0.0 < latency < 1000.0:
                samples.append(latency)
        pending_until = item.end if pending_until is None else max(pending_until, item.end)
    if len(samples) < MIN_SAMPLES:
        return DEFAULT_JOIN_US, False
    return min(statistics.median(samples), MAX_JOIN_US), True


def drains(work: Sequence[GpuWork]) -> list[float]:
    """The moments the GPU ran dry: all launched work done before the next launch."""
    launched = sorted((w.launch, w.end) for w in work if w.launch is not None)
    found, last_end = [], None
    for launch, end in launched:
        if last_end is not None and last_end < launch:
            found.append(last_end)
        last_end = end if last_end is None else max(last_end, end)
    return found


def polls(queries: Sequence[Interval]) -> list[Interval]:
    """The waits a polling host made: runs of at least ``POLL_MIN`` query calls close together,
    each as one interval."""
    runs: list[list[Interval]] = []
    for call in sorted(queries):
        if runs and call[0] - runs[-1][-1][1] <= POLL_GAP_US:
            runs[-1].append(call)
        else:
            runs.append([call])
    return [(run[0][0], max(end for _, end in run)) for run in runs if len(run) >= POLL_MIN]


def _step_of(starts: Sequence[float], t: float) -> int:
    return bisect.bisect_right(starts, t) - 1


def waited_steps(work: Sequence[GpuWork], blocking: Sequence[Interval],
                 starts: Sequence[float]) -> set[int]:
    """Steps in which a synchronising call began before a drain and returned just after it."""
    ends = sorted(drains(work))
    found = set()
    for ts, end in blocking:
        i = bisect.bisect_right(ends, ts)
        while i < len(ends) and ends[i] <= end:
            if end - ends[i] <= WAKE_US:
                found.add(_step_of(starts, ends[i]))
                break
            i += 1
    return found


def _covered(intervals: list[Interval], a: float, b: float) -> float:
    """How much of [a, b] the sorted, disjoint ``intervals`` cover."""
    return (b - a) - sum(hi - lo for lo, hi in _minus(a, b, intervals))


def late_share(work: Sequence[GpuWork], starts: Sequence[float]) -> float:
    """Median share of a step's GPU work that ran after the host had begun the next step."""
    by_step: dict[int, list[Interval]] = {}
    for w in work:
        if w.launch is not None:
            by_step.setdefault(_step_of(starts, w.launch), []).append((w.start, w.end))
    shares = []
    for i in range(len(starts) - 1):
        busy = _union(by_step.get(i, []))
        total = sum(b - a for a, b in busy)
        if total > 0:
            shares.append(sum(max(0.0, b - max(a, starts[i + 1])) for a, b in busy) / total)
    return statistics.median(shares) if shares else 0.0


def beside_steps(work: Sequence[GpuWork], starts: Sequence[float]) -> set[int]:
    """Steps in which another stream's work ran beside the main stream's (the busiest)."""
    time: dict[Hashable, float] = {}
    for w in work:
        time[w.stream] = time.get(w.stream, 0.0) + (w.end - w.start)
    if len(time) < 2:
        return set()
    main = max(time, key=lambda stream: time[stream])
    busy = _union([(w.start, w.end) for w in work if w.stream == main])
    return {_step_of(starts, w.start) for w in work
            if w.stream != main and _covered(busy, w.start, w.end) > 0.0}


def under_share(host: Sequence[Interval], busy: list[Interval],
                blocked: Sequence[Interval] = ()) -> float | None:
    """Share of the host's named work done while the GPU was busy (blocked time is no work);
    None without such work."""
    waits = _union(list(blocked))
    work = [piece for a, b in _union(list(host)) for piece in _minus(a, b, waits)]
    total = sum(b - a for a, b in work)
    if total <= 0:
        return None
    return sum(_covered(busy, a, b) for a, b in work) / total


def _minus(a: float, b: float, holes: list[Interval]) -> list[Interval]:
    """[a, b] less the sorted, disjoint ``holes``."""
    out, cursor = [], a
    i = max(bisect.bisect_right(holes, (a, float("inf"))) - 1, 0)
    while i < len(holes) and holes[i][0] < b:
        lo, hi = holes[i]
        if hi > cursor and lo > cursor:
            out.append((cursor, min(lo, b)))
        cursor = max(cursor, hi)
        i += 1
    if cursor < b:
        out.append((cursor, b))
    return out


class LoopSeen(TypedDict):
    """What a trace's timing says about its loop (``loop_seen``)."""

    steps: int
    waited: int
    late: float
    beside: int
    under: float | None
    verdict: str                        # "serial", "overlapped" or "unknown"
    events_per_step: NotRequired[float]  # host events the profiler recorded per step


# A text key (``texts``' ``note_*``) and the values it is said with.
Note = dict[str, str | int | float]


def loop_seen(work: Sequence[GpuWork], blocking: Sequence[Interval], starts: Sequence[float],
              host_work: Sequence[Interval] = (), join_us: float = 0.0) -> LoopSeen:
    """What the trace says about its loop, over the steps but the first and the last."""
    middle = set(range(1, len(starts) - 1))
    waited = len(waited_steps(work, blocking, starts) & middle)
    beside = len(beside_steps(work, starts) & middle)
    busy = _union([(w.start, w.end + join_us) for w in work])
    under = under_share(host_work, busy, blocking)
    late = late_share(work, starts)
    n = len(middle)
    if n < 3:
        verdict = "unknown"
    elif waited >= SERIAL_SHARE * n:
        verdict = "serial"
    elif (late >= LATE_SHARE or beside >= BESIDE_SHARE * n
          or (under is not None and under >= UNDER_SHARE)
          or (blocking and waited <= NO_WAIT_SHARE * n)):
        verdict = "overlapped"
    else:
        verdict = "unknown"
    return {"steps": n, "waited": waited, "late": round(late, 4), "beside": beside,
            "under": None if under is None else round(under, 4), "verdict": verdict}


def loop_notes(seen: LoopSeen) -> list[Note]:
    """``loop_seen``'s verdict as text keys with values, and each reading that shows overlap."""
    steps, waited = seen["steps"], seen["waited"]
    if seen["verdict"] == "serial":
        return [{"key": "note_loop_serial", "waited": waited, "steps": steps}]
    if seen["verdict"] != "overlapped":
        return [{"key": "note_loop_unknown", "steps": steps}]
    notes: list[Note] = [{"key": "note_loop_overlapped"}]
    if waited <= NO_WAIT_SHARE * steps:
        notes.append({"key": "note_loop_no_wait", "waited": waited, "steps": steps})
    if seen["late"] >= LATE_SHARE:
        notes.append({"key": "note_loop_late", "late": round(100 * seen["late"])})
    if seen["beside"] >= BESIDE_SHARE * steps:
        notes.append({"key": "note_loop_beside", "beside": seen["beside"], "steps": steps})
    if seen["under"] is not None and seen["under"] >= UNDER_SHARE:
        notes.append({"key": "note_loop_under", "under": round(100 * seen["under"])})
    return notes


def events_per_step(host_times: Sequence[float], starts: Sequence[float]) -> float:
    """Host events the profiler recorded per middle step."""
    if len(starts) < 3:
        return 0.0
    lo, hi = starts[1], starts[-1]
    inside = bisect.bisect_left(host_times, hi) - bisect.bisect_left(host_times, lo)
    return inside / (len(starts) - 2)
