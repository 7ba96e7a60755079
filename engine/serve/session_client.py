"""Online serving, the web server's side: one served session in the scheduler process. A reader
thread hands each ``TokenDelta`` to its request's handler and keeps a bounded window of the
session's spans. If the process dies, every request in progress is told (``SessionLost``) and a
new one starts in the background."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.config import OVERLAP, EngineConfig, LoopSpec, SamplingParams
from engine.scheduler_process.messages import (
    AbortRequest,
    Rejected,
    RequestFailed,
    ServeRequest,
    ServingStarted,
    ServingStats,
    ServingStopped,
    SpanBatch,
    StatsQuery,
    StopServing,
    SubmitRequest,
    TokenDelta,
    TokensOut,
)
from engine.scheduler_process.process import Placement, SchedulerClient, SchedulerDied
from record.schema import RecordDict

MAX_SESSION_SPANS = 400_000        # the session timeline's window, in spans
MAX_SESSION_OUTPUTS = 20_000       # finished requests kept for the session's record
Handler = Callable[[Any], None]    # gets TokenDelta, Rejected or SessionLost


@dataclass(frozen=True)
class SessionLost:
    """The session ended under a request (the scheduler process died, or the session failed)."""

    message: str


class SessionUnavailable(RuntimeError):
    """The session could not be started; the message says why."""


class ServingClient:
    def __init__(self, engine: EngineConfig, loop: LoopSpec = OVERLAP,
                 placement: Placement | None = None) -> None:
        self.request = ServeRequest(engine, loop)
        self.process = SchedulerClient(placement)
        self.started: ServingStarted | None = None
        self.handlers: dict[int, Handler] = {}
        self.spans: deque = deque(maxlen=MAX_SESSION_SPANS)
        self.spans_seen = 0
        self.deltas: dict[int, list[TokenDelta]] = {}        # rid -> its deltas so far
        self.outputs: deque = deque(maxlen=MAX_SESSION_OUTPUTS)   # the finished requests
        self._stats: dict[int, Any] = {}
        self._stats_ready = threading.Condition()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()         # session start / stop
        self._reader: threading.Thread | None = None
        self._restarter: threading.Thread | None = None
        self._closed = False
        self.sessions = 0

    # ---- the session ----------------------------------------------------------------------
    def start(self) -> ServingStarted:
        """Open the session (starting the scheduler process if needed); returns what it said."""
        with self._lock:
            if self._closed:                # a restart queued just before close() must not run
                raise SessionUnavailable("the server is shutting down")
            if self.started is not None and self.alive:
                if self.process.alive:
                    return self.started
                # The scheduler process died and the reader has not noticed yet (it looks every
                # POLL_S): let it finish with the old pipe before a new session takes its place.
                self._reader.join(timeout=5.0)
                if self._reader.is_alive():
                    raise SessionUnavailable("the last session has not ended yet; retry")
            try:
                self.process._ensure_ready()
                self.process._send(self.request)
                while True:
                    event = self.process._next(None, "starting a served session")
                    if isinstance(event, ServingStarted):
                        break
                    if isinstance(event, RequestFailed):
                        raise SessionUnavailable(event.message)
            except SchedulerDied as error:
                raise SessionUnavailable(str(error)) from None
            self.started = event
            self.sessions += 1
            # A new session has a new clock: its record starts afresh.
            self.spans.clear()
            self.spans_seen = 0
            self.deltas.clear()
            self.outputs.clear()
            self._reader = threading.Thread(target=self._read, name="session-reader", daemon=True)
            self._reader.start()
            return event

    @property
    def restarting(self) -> bool:
        """A new session is being started in place of one whose process died."""
        return self._restarter is not None and self._restarter.is_alive()

    def _restart(self) -> None:
        """Start a new session in the background (the scheduler process died under the last)."""
        def run() -> None:
            try:
                self.start()
            except SessionUnavailable:
                pass                        # the next request tries again, and says why
        if not self._closed and not self.restarting:
            self._restarter = threading.Thread(target=run, name="session-restart", daemon=True)
            self._restarter.start()

    def close(self, timeout_s: float = 30.0) -> None:
        """Let the requests in progress finish (up to ``timeout_s``), then end the process."""
        self._closed = True
        with self._lock:
            reader = self._reader
            if reader is not None and reader.is_alive():
                try:
                    self.process._send(StopServing())
                except SchedulerDied:
                    pass
                reader.join(timeout_s)
            self.process.close()
            self.started = None

    # ---- requests -------------------------------------------------------------------------
    def submit(self, prompt_ids: list[int], params: SamplingParams, handler: Handler) -> int:
        """Forward one request; ``handler`` is called (from the reader thread) with each of its
        ``TokenDelta``s, or once with ``Rejected`` / ``SessionLost``. Returns its id."""
        self.start()
        rid = next(self._ids)
        self.handlers[rid] = handler
        try:
            self.process._send(SubmitRequest(rid, list(prompt_ids), params,
                                             time.perf_counter_ns()))
        except SchedulerDied as error:
            self.handlers.pop(rid, None)
            raise SessionUnavailable(str(error)) from None
        return rid

    def abort(self, rid: int) -> None:
        """Stop a request whose client went away (its slot and pages are freed)."""
        if self.handlers.pop(rid, None) is not None:
            try:
                self.process._send(AbortRequest(rid))
            except SchedulerDied:
                pass

    def stats(self, timeout_s: float = 10.0) -> ServingStats | None:
        """The session's counts and pools at the scheduler's next iteration (None: no answer); a
        session that dies under the question is started afresh and asked once more."""
        for _ in range(2):
            if self.started is not None and not self.process.alive:
                self._restart()             # died, and the reader may not have noticed yet
            if self.restarting:
                return None                 # answered when the new session is up, not before
            self.start()
            token = next(self._ids)
            try:
                self.process._send(StatsQuery(token))
            except SchedulerDied:
                continue
            deadline = time.monotonic() + timeout_s
            with self._stats_ready:
                # The reader answers, or ends (and notifies) when the process dies.
                while token not in self._stats and self.alive:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self._stats_ready.wait(left)
                if token in self._stats:
                    return self._stats.pop(token)
        return None

    @property
    def alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    # ---- the reader thread ----------------------------------------------------------------
    def _read(self) -> None:
        why, died = "the served session ended", False
        try:
            while True:
                event = self.process._next(None, "serving")
                if isinstance(event, TokensOut):
                    for delta in event.deltas:
                        self._deliver(delta)
                elif isinstance(event, SpanBatch):
                    self.spans.extend(event.spans)
                    self.spans_seen += len(event.spans)
                elif isinstance(event, ServingStats):
                    with self._stats_ready:
                        self._stats[event.token] = event
                        self._stats_ready.notify_all()
                elif isinstance(event, Rejected):
                    handler = self.handlers.pop(event.rid, None)
                    if handler:
                        handler(event)
                elif isinstance(event, RequestFailed):
                    why = f"the served session failed: {event.message.splitlines()[0]}"
                    return
                elif isinstance(event, ServingStopped):
                    return
        except SchedulerDied as error:
            why, died = str(error), True
        finally:
            self._lose_all(why)
        if died:
            self._restart()

    def _deliver(self, delta: TokenDelta) -> None:
        self.deltas.setdefault(delta.rid, []).append(delta)
        handler = self.handlers.get(delta.rid)
        if delta.finish_reason:
            self.handlers.pop(delta.rid, None)
            self._keep_output(self.deltas.pop(delta.rid))
        if handler:
            handler(delta)

    def _keep_output(self, deltas: list[TokenDelta]) -> None:
        last = deltas[-1]
        self.outputs.append({
            "token_ids": [t for d in deltas for t in d.token_ids],
            "token_us": [t for d in deltas for t in d.token_us],
            "finish_reason": last.finish_reason, "prompt_tokens": last.prompt_tokens,
            "arrival_us": last.arrival_us, "first_token_us": last.first_token_us,
            "finish_us": last.finish_us, "wasted_steps": last.wasted_steps})

    def _lose_all(self, why: str) -> None:
        handlers, self.handlers = self.handlers, {}
        for handler in handlers.values():
            handler(SessionLost(why))
        self.deltas.clear()
        with self._stats_ready:
            self._stats_ready.notify_all()

    # ---- the session as a run record ------------------------------------------------------
    def session_record(self, text_of: Callable[[list[int]], str] = lambda _: "") -> RecordDict:
        """The session so far as a schema-1 run record: its spans (the last
        ``MAX_SESSION_SPANS``), the requests that finished, and metrics from both."""
        from engine.run import session_record

        if self.started is None:
            raise SessionUnavailable("no served session yet: send a request first")
        spans = sorted(self.spans, key=lambda s: s.start_us)
        outputs = [{**o, "text": text_of(o["token_ids"])} for o in self.outputs]
        spec = self.request.loop
        label = f"{spec.label} (served, {self.started.device})"
        return session_record(self.started.env, self.started.config, spec, label, spans,
                              outputs, spans_dropped=self.spans_seen - len(spans))
