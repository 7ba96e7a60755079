"""The requests of a run and their memory: who waits, who runs, and what a request that ends
(finished, aborted) or is retracted gives back, and when.

Stage 2 asks it for rows: ``prefill_rows`` continues chunked prompts and admits waiting requests
while memory allows; ``decode_rows`` gives each running request one row (k with multi-step), with
the pages for its next positions, and retracts requests when the pool runs dry. Stage 4 tells it
who finished. Whatever a request gives back goes through one path, ``_release``: at once when no
launched batch carries the request, else after the last one that does (its forward still reads
the slot's token_pool row and the pages).

``in_flight`` is always the batches launched and not yet processed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

from engine.config import EngineConfig
from engine.scheduler.cache_manager import CacheManager, Release
from engine.scheduler.checks import MappingCheck
from engine.scheduler.request import Batch, Req, Row
from record.recorder import Timeline


class RequestTable:
    def __init__(self, cfg: EngineConfig, memory: CacheManager, timeline: Timeline,
                 mapping: MappingCheck | None) -> None:
        self.cfg, self.memory, self.timeline, self.mapping = cfg, memory, timeline, mapping
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []                # in admission order
        self.deferred: list[tuple[int, Release]] = []   # (give back after this step, release)
        self.unsafe_frees = 0                       # hazard lab: given back under a reader
        self.retractions = 0
        self.retraction_trace: list[tuple[int, int, int]] = []   # (step, time, request)

    def is_idle(self) -> bool:
        return not (self.waiting or self.running)

    # ---- stage 2: rows ------------------------------------------------------------------------
    def prefill_rows(self) -> list[Row]:
        budget, rows = self.cfg.max_prefill_tokens, []
        for req in self.running:                 # continue prompts already being chunked
            if not req.prefill_done and budget > 0:
                rows.append(self._chunk(req, budget))
                budget -= rows[-1].length
        reserved = self.memory.reserve_tokens(self.running)
        while self.waiting and budget > 0:       # admit new requests while memory allows
            req = self.waiting[0]
            if not self.memory.admit(req, reserved):
                break                            # admission waits for memory
            self.waiting.popleft()
            self.running.append(req)
            reserved = self.memory.reserve_tokens(self.running)
            rows.append(self._chunk(req, budget))
            budget -= rows[-1].length
        return rows

    @staticmethod
    def _chunk(req: Req, budget: int) -> Row:
        n = min(len(req.fill_ids) - req.num_prefilled, budget)
        last_chunk = req.num_prefilled + n == len(req.fill_ids)
        first_chunk = req.num_prefilled == req.admit_hit       # right after the cached prefix
        row = Row(req, req.num_prefilled, n, samples=last_chunk,
                  cached=req.admit_hit if first_chunk else 0)
        req.num_prefilled += n
        req.num_scheduled += int(last_chunk)     # the last chunk samples the next output token
        return row

    def decode_rows(self, k: int, in_flight: Sequence[Batch], step: int) -> list[Row]:
        """One row per running request that may decode, each with pages for its next ``k``
        positions. A request the pool cannot serve waits a step while retracted requests'
        memory comes back; if none is coming, the newest running request is retracted."""
        rows = []
        i = 0
        # Retraction takes the newest requests (the list's tail), so a request retracted in this
        # pass is never reached: the list has shrunk below it.
        while i < len(self.running):
            req = self.running[i]
            i += 1
            if not req.can_decode():
                continue                         # waiting on a stop check
            steps = min(k, req.params.max_new_tokens - req.num_scheduled)
            start = req.prompt_len + req.num_scheduled - 1      # the position it writes next
            if not self._make_room(req, start + steps, in_flight, step):
                continue
            rows.append(Row(req, start, 1, samples=True))
            req.num_scheduled += 1
        if rows:
            self.memory.decoded()
        return rows

    def _make_room(self, req: Req, tokens: int, in_flight: Sequence[Batch], step: int) -> bool:
        """Pages for ``req``'s first ``tokens`` positions; retracting the newest requests (those
        without a row in this batch yet) while that helps now. False: ``req`` sits this step out
        (it may have been retracted itself)."""
        while not self.memory.grow(req, tokens):
            if self._pages_coming_back() > 0:
                return False                     # given back once the launched batches are done
            victim = self.running[-1]
            self.retract(victim, in_flight, step)
            if victim is req:
                return False
        return True

    def _pages_coming_back(self) -> int:
        return sum(len(release.pages) for _, release in self.deferred)

    def retract(self, req: Req, in_flight: Sequence[Batch], step: int) -> None:
        """Memory ran short: ``req`` leaves the running batch and waits again at the front of the
        queue, keeping the tokens it has read. Its computed pages go to the prefix cache (so its
        resumption finds them), the rest come back once the launched batches that read them are
        done, and the token a launched batch is computing for it is dropped (a new epoch)."""
        self.running.remove(req)
        self.memory.cache_req(req, finished=True)
        release = self.memory.detach(req)
        req.epoch += 1
        req.retractions += 1
        self.retractions += 1
        req.fill_ids = req.prompt_ids + req.output_ids
        req.num_prefilled = 0
        req.num_scheduled = len(req.output_ids)
        self.waiting.appendleft(req)
        self.memory.retracted()
        if self.timeline.enabled:
            self.retraction_trace.append((step, time.perf_counter_ns(), req.rid))
        self._release(release, req, in_flight, self.cfg.hazards.no_deferred_retract_free)

    # ---- ends: finished, aborted --------------------------------------------------------------
    def finish(self, req: Req, reason: str, now: int, in_flight: Sequence[Batch]) -> None:
        req.finished, req.finish_reason, req.finish_ns = True, reason, now
        if req in self.running:
            self.running.remove(req)
            self.memory.cache_req(req, finished=True)       # cache_req(req, finished=True)
            self._release(self.memory.detach(req), req, in_flight,
                          self.cfg.hazards.no_deferred_free)

    def abort(self, rids: set[int], in_flight: Sequence[Batch]) -> list[Req]:
        """Stop requests whose client went away: a waiting one simply leaves the queue, a
        running one finishes now ("abort") and its tokens still in flight are dropped."""
        now = time.perf_counter_ns()
        gone = [r for r in self.waiting if r.rid in rids]
        for req in gone:
            self.waiting.remove(req)
            req.finished, req.finish_reason, req.finish_ns = True, "abort", now
        for req in [r for r in self.running if r.rid in rids]:
            self.finish(req, "abort", now, in_flight)
            gone.append(req)
        return gone

    # ---- the one release path -----------------------------------------------------------------
    def _release(self, release: Release, req: Req, in_flight: Sequence[Batch],
                 unsafe: bool) -> None:
        """Give the memory back now, or after the last launched batch that carries the request,
        whose forward still reads its slot's token_pool row and its pages."""
        readers = [batch.step for batch in in_flight if req.rid in batch.rid_set]
        if readers and not unsafe:
            # Hazard 1 guard: queued batches still read this slot and its pages.
            self.deferred.append((max(readers), release))
        else:
            self.unsafe_frees += bool(readers)      # hazard lab: a race window opened
            self._apply(release)

    def release_deferred(self, upto_step: int) -> None:
        """Give back what waited for batches up to ``upto_step``, which are now done."""
        keep = []
        for step, release in self.deferred:
            if step <= upto_step:
                self._apply(release)
            else:
                keep.append((step, release))
        self.deferred = keep

    def _apply(self, release: Release) -> None:
        self.memory.apply(release)               # IdPool raises DoubleFreeError on a second free
        if self.mapping is not None:
            self.mapping.released(release.rid)
