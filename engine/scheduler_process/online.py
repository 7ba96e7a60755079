"""Online serving, the scheduler process's side: requests stream in over the pipe, tokens out.

One loop serves the whole session, as SGLang's scheduler does: stage 1 polls the pipe without
blocking (new requests, aborts, a stats query) and blocks on it only when idle; stage 4 streams each
step's new tokens out as one ``TokensOut``; a reporter thread sends the spans recorded since its
last look and keeps none. ``serve_session`` runs until ``StopServing`` or the pipe closes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.run import run_config
from engine.scheduler.intake import Intake
from engine.scheduler.request import Req
from engine.scheduler.sources import Received
from engine.scheduler_process import messages as msg
from record.recorder import Timeline

REPORT_S = 0.25                 # how often the session's new spans are sent to the server
Emit = Callable[[Any], None]


@dataclass
class SessionCounts:
    active: set[int] = field(default_factory=set)     # received and not finished
    served: int = 0                                   # finished (stop, length or abort)


class PipeSource:
    """The scheduler's request source in a served session: messages from the server's pipe."""

    def __init__(self, conn: Any, intake: Intake, emit: Emit, counts: SessionCounts,
                 stats: Callable[[int], msg.ServingStats]) -> None:
        self.conn, self.intake, self.emit, self.stats = conn, intake, emit, stats
        self.counts = counts
        self.stopping = False           # StopServing seen, or the server is gone

    def receive(self) -> Received:
        got = Received()
        while not self.stopping and self._poll(0):
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                self.stopping = True
                break
            self._handle(message, got)
        return got

    def wait(self, timeout_s: float) -> bool:
        return self._poll(timeout_s)

    def done(self) -> bool:
        return self.stopping

    def _poll(self, timeout_s: float) -> bool:
        try:
            return self.conn.poll(timeout_s)
        except (EOFError, OSError):
            self.stopping = True
            return False

    def _handle(self, message: Any, got: Received) -> None:
        if isinstance(message, msg.SubmitRequest):
            try:
                req = self.intake.request(message.rid, message.prompt_ids, message.params,
                                          what=f"request {message.rid}")
            except ValueError as error:          # the server checks first; this is the backstop
                self.emit(msg.Rejected(message.rid, str(error)))
                return
            req.arrival_ns = message.arrival_ns  # when the server received it (one clock)
            got.reqs.append(req)
            self.counts.active.add(req.rid)
        elif isinstance(message, msg.AbortRequest):
            got.aborts.append(message.rid)
        elif isinstance(message, msg.StatsQuery):
            self.emit(self.stats(message.token))
        elif isinstance(message, msg.StopServing):
            self.stopping = True


class PipeSink:
    """Streams each processed step's new tokens to the server as one ``TokensOut``."""

    def __init__(self, emit: Emit, timeline: Timeline, counts: SessionCounts) -> None:
        self.emit, self.timeline, self.counts = emit, timeline, counts
        self.sent: dict[int, int] = {}          # rid -> tokens already streamed

    def __call__(self, reqs: list[Req]) -> None:
        us = self.timeline.to_us
        deltas = []
        for req in reqs:
            start = self.sent.pop(req.rid, 0)
            new = (req.rid, req.output_ids[start:], [us(t) for t in req.token_ns[start:]])
            if req.finished:
                self.counts.active.discard(req.rid)
                self.counts.served += 1
                deltas.append(msg.TokenDelta(
                    *new, req.finish_reason or "abort", req.prompt_len, us(req.arrival_ns),
                    us(req.first_token_ns) if req.first_token_ns else 0.0, us(req.finish_ns),
                    req.wasted_steps))
            else:
                self.sent[req.rid] = len(req.output_ids)
                deltas.append(msg.TokenDelta(*new))
        self.emit(msg.TokensOut(deltas))


def serve_session(engine: Any, request: msg.ServeRequest, conn: Any, emit: Emit) -> None:
    """Serve until ``StopServing`` or the pipe closes; raises what the engine raises."""
    timeline = Timeline()
    timeline.t0_ns = time.perf_counter_ns()      # the session's clock starts now
    counts = SessionCounts()
    sink = PipeSink(emit, timeline, counts)

    def stats(token: int) -> msg.ServingStats:
        s = engine.stats()
        return msg.ServingStats(token, len(counts.active), counts.served, s["kv_pages_free"],
                                s["kv_pages_total"], s["req_slots_free"], s["req_slots_total"],
                                s["kv_pages_cached"], s["prefix_hit_tokens"], s["retractions"])

    source = PipeSource(conn, engine.intake(), emit, counts, stats)
    tokenizer = getattr(engine.tokenizer, "name_or_path", None) if engine.tokenizer else None
    emit(msg.ServingStarted(engine.config.model, tokenizer, engine.config.max_seq_len,
                            engine.spec.vocab_size, engine.device_label(), engine.env_info(),
                            run_config(engine.config, None)))
    done = threading.Event()

    def report() -> None:
        while not done.wait(REPORT_S):
            spans = timeline.take()
            if spans:
                emit(msg.SpanBatch(0, spans))

    reporter = threading.Thread(target=report, name="session-span-reporter", daemon=True)
    reporter.start()
    try:
        engine.serve(source, sink, request.loop, timeline=timeline)
    finally:
        done.set()
        reporter.join(timeout=2 * REPORT_S + 1)
        spans = timeline.take()
        if spans:
            emit(msg.SpanBatch(0, spans))
    emit(msg.ServingStopped())
