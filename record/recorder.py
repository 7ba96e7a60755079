"""Span recorder: what every lane did at every step, on one clock (µs from the run's start).

CPU spans are stamped with ``perf_counter_ns`` as they happen; GPU spans are pairs of CUDA events
resolved lazily (``query()``), never with a sync in the loop, and placed on the host clock by one
reference event recorded on an idle GPU. A lane runs in order, so a span never starts before the
previous one on its lane ended."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, TypeVar

from record.schema import Lane, SpanDict


@dataclass
class Span:
    """One interval of work on one lane."""

    lane: str
    phase: str
    step: int
    start_us: float
    end_us: float
    batch_size: int = 0
    num_tokens: int = 0
    req_ids: list[int] = field(default_factory=list)
    cached_tokens: int = 0          # a prefill's prompt tokens found in the prefix cache

    def to_dict(self) -> SpanDict:
        """The span as a record's dict (``cached_tokens`` only where there were some)."""
        d: SpanDict = {"lane": str(self.lane), "phase": str(self.phase), "step": self.step,
                       "start_us": self.start_us, "end_us": self.end_us,
                       "batch_size": self.batch_size, "num_tokens": self.num_tokens,
                       "req_ids": list(self.req_ids)}
        if self.cached_tokens:
            d["cached_tokens"] = self.cached_tokens
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Span:
        return Span(str(d["lane"]), str(d["phase"]), int(d.get("step", -1)),
                    float(d["start_us"]), float(d["end_us"]), int(d.get("batch_size", 0)),
                    int(d.get("num_tokens", 0)), [int(r) for r in d.get("req_ids", [])],
                    int(d.get("cached_tokens", 0)))


@dataclass(frozen=True)
class StampedSpan:
    """A span stamped with ``perf_counter_ns`` by the CPU device process, not yet on a run's clock."""

    lane: str
    phase: str
    step: int
    start_ns: int
    end_ns: int
    batch_size: int = 0
    num_tokens: int = 0
    req_ids: tuple[int, ...] = ()
    cached_tokens: int = 0


class GpuEvent(Protocol):
    """A timing event as the recorder reads it (``torch.cuda.Event``)."""

    def query(self) -> bool: ...

    def elapsed_time(self, end_event: Self) -> float: ...


E = TypeVar("E", bound=GpuEvent)


# One GPU span of a group: (lane, phase, index of its start event, of its end event, batch size,
# tokens[, cached tokens]). A group's events were recorded in order on one stream, so once its
# last event has completed, all of them have.
GroupSpan = tuple


class Timeline:
    """Collects spans during a run: one writer (the scheduler thread), any number of readers. In a
    serial loop the writer's time is GPU idle time it measures, so a write only appends a tuple;
    readers build ``Span`` objects later, under their own lock. ``enabled=False``: no-ops."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()       # among readers; writers never take it
        self._spans: list[Span] = []
        self._cpu_raw: deque = deque()      # (lane, phase, step, start_ns, end_ns, bs, tokens, ids)
        self._gpu_raw: deque = deque()      # (events, spans, step, req_ids, release)
        self._waiting: list = []            # GPU groups whose last event had not completed yet
        self._lane_end: dict[str, tuple[int, float]] = {}   # lane: (group's order, its end)
        self._groups_seen = 0               # GPU groups taken off the writer's deque so far
        self.t0_ns = time.perf_counter_ns()
        self._ref_event: GpuEvent | None = None
        self._ref_host_ns = 0

    # ---- clock -------------------------------------------------------------------------------
    def to_us(self, t_ns: int) -> float:
        return (t_ns - self.t0_ns) / 1000.0

    def set_gpu_reference(self, ref_event: GpuEvent, host_ns: int) -> None:
        """``ref_event`` was recorded on an idle GPU at host time ``host_ns`` (after a sync)."""
        self._ref_event = ref_event
        self._ref_host_ns = host_ns

    # ---- writers (scheduler thread) ---------------------------------------------------------
    def add_cpu(self, phase: str, step: int, start_ns: int, end_ns: int, batch_size: int = 0,
                num_tokens: int = 0, req_ids: Sequence[int] = (), lane: str = Lane.CPU) -> None:
        if self.enabled:
            self._cpu_raw.append((lane, phase, step, start_ns, end_ns, batch_size, num_tokens,
                                  req_ids))

    def add_gpu_group(self, events: Sequence[E], spans: Sequence[GroupSpan], step: int,
                      req_ids: Sequence[int] = (),
                      release: Callable[[Sequence[E]], None] | None = None) -> None:
        """Spans between events recorded in order on one stream (``spans`` index ``events``), read
        once the last event has completed; then ``release(events)`` hands the events back."""
        if self.enabled:
            self._gpu_raw.append((events, spans, step, req_ids, release))

    def add_stamped(self, spans: list[StampedSpan]) -> None:
        if not self.enabled:
            return
        for s in spans:
            self._cpu_raw.append((s.lane, s.phase, s.step, s.start_ns, s.end_ns, s.batch_size,
                                  s.num_tokens, s.req_ids, s.cached_tokens))

    # ---- readers (any thread) ---------------------------------------------------------------
    def resolve(self) -> None:
        """Turn what the writer appended into spans; GPU groups not completed stay pending."""
        with self._lock:
            self._resolve_locked()

    def resolve_while_waiting(self) -> None:
        """``resolve`` in time the scheduler thread would spend blocked anyway; skipped while a
        reader holds the lock (the scheduler thread never waits for a reader)."""
        if self.enabled and self._lock.acquire(blocking=False):
            try:
                self._resolve_locked()
            finally:
                self._lock.release()

    def _resolve_locked(self) -> None:
        raw, to_us, done = self._cpu_raw, self.to_us, []
        for _ in range(len(raw)):
            lane, phase, step, start, end, bs, tokens, ids, *cached = raw.popleft()
            done.append(Span(lane, phase, step, to_us(start), to_us(end), bs, tokens,
                             list(ids), *cached))
        gpu, fresh = self._gpu_raw, []
        for _ in range(len(gpu)):        # numbered in the order they were recorded
            fresh.append((self._groups_seen, gpu.popleft()))
            self._groups_seen += 1
        still = []
        for order, group in self._waiting + fresh:
            events, spans, step, ids, release = group
            # query() asks the driver without waiting: the loop is never synchronised by us.
            if not events[-1].query():
                still.append((order, group))
                continue
            at = [self._event_to_us(e) for e in events]
            for lane, phase, i, j, bs, tokens, *cached in spans:
                start, end = at[i], at[j]
                # A stream runs in order (module doc): on one lane, the order the spans
                # were recorded in is the order they ran in.
                before = self._lane_end.get(lane)
                if before is not None and before[0] < order:
                    start = min(max(start, before[1]), end)
                if before is None or before[0] < order:
                    self._lane_end[lane] = (order, end)
                elif before[0] == order:                 # a group's later span on a lane
                    self._lane_end[lane] = (order, max(before[1], end))
                done.append(Span(lane, phase, step, start, end, bs, tokens, list(ids),
                                 *cached))
            if release is not None:
                release(events)
        self._waiting = still
        self._spans.extend(done)

    def _event_to_us(self, event: GpuEvent) -> float:
        assert self._ref_event is not None, "GPU spans need set_gpu_reference first"
        offset_ms = self._ref_event.elapsed_time(event)
        return (self._ref_host_ns - self.t0_ns) / 1000.0 + offset_ms * 1000.0

    def since(self, cursor: int) -> tuple[list[Span], int]:
        """Spans resolved after the first ``cursor`` ones, and the new cursor (live views)."""
        self.resolve()
        with self._lock:
            return self._spans[cursor:], len(self._spans)

    def snapshot(self) -> list[Span]:
        """Spans resolved so far, sorted by start; safe to call while the run is in progress."""
        self.resolve()
        with self._lock:
            spans = list(self._spans)
        spans.sort(key=lambda s: (s.start_us, s.lane))
        return spans

    def take(self) -> list[Span]:
        """Remove and return the spans resolved so far (a served session streams them out)."""
        self.resolve()
        with self._lock:
            spans, self._spans = self._spans, []
        return spans
