"""The requests of a run: who waits, who runs, and what a request that ends or is retracted gives
back, and when.

``prefill_rows`` continues chunked prompts and admits waiting requests; ``decode_rows`` gives each
running request its row(s) and the pages for them, retracting requests when the pool runs dry.
Everything goes back through ``_release``: pages and cache lock at once (only forwards write pages,
in launch order), the slot once no launched batch carries the request: the next prompt is written
into the slot's ``token_pool`` row on the scheduler stream, which does not wait for the forwards
that read it (SGLang issue 18744). ``in_flight`` is the batches launched, not processed."""

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
        # Slots held for a launched batch: (give back after this step, request, slot).
        self.held_slots: list[tuple[int, int, int]] = []
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
        if not self.waiting:
            return rows                          # nobody to admit (every decode step)
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
        """One row per running request that may decode, with pages for its next ``k`` positions."""
        rows = []
        i = 0
        ps = self.cfg.page_size
        # Retraction takes the newest requests (the list's tail), so a request retracted in this
        # pass is never reached: the list has shrunk below it.
        while i < len(self.running):
            req = self.running[i]
            i += 1
            if not req.can_decode():
                continue                         # waiting on a stop check
            steps = min(k, req.params.max_new_tokens - req.num_scheduled)
            start = len(req.prompt_ids) + req.num_scheduled - 1  # the position it writes next
            # Most steps stay inside the pages a request holds; only a new page needs the pool.
            if start + steps > len(req.pages) * ps and not self._make_room(req, start + steps,
                                                                           in_flight, step):
                continue
            rows.append(Row(req, start, 1, True, req.epoch))
            req.num_scheduled += 1
        if rows:
            self.memory.decoded()
        return rows

    def _make_room(self, req: Req, tokens: int, in_flight: Sequence[Batch], step: int) -> bool:
        """Pages for ``req``'s first ``tokens`` positions, retracting the newest requests while that
        helps; False: ``req`` sits this step out. While finished requests' pages are coming back,
        ``req`` waits a step rather than retract someone (a retraction costs a prefill again); the
        last running request is never retracted (its own pages are all it could free)."""
        while not self.memory.grow(req, tokens):
            if self._pages_coming_back() > 0 or len(self.running) == 1:
                return False                     # given back when the launched batch is processed
            victim = self.running[-1]
            self.retract(victim, in_flight, step)
            if victim is req:
                return False
        return True

    def _pages_coming_back(self) -> int:
        """Pages that come back for certain once the launched batches are processed."""
        return sum(len(r.pages) - r.cached_pages for r in self.running
                   if r.prefill_done and r.num_scheduled >= r.params.max_new_tokens)

    def retract(self, req: Req, in_flight: Sequence[Batch], step: int) -> None:
        """Memory ran short: ``req`` waits again at the front of the queue, keeping the tokens it
        has read. Its computed pages go to the prefix cache (its resumption finds them); the token
        a launched batch computes for it is dropped (a new epoch)."""
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
        ended_before = req.finished
        req.finished, req.finish_reason, req.finish_ns = True, reason, now
        if req in self.running:
            self.running.remove(req)
            self.memory.cache_req(req, finished=True)       # cache_req(req, finished=True)
            self._release(self.memory.detach(req), req, in_flight,
                          self.cfg.hazards.no_deferred_free)
        elif ended_before and self.cfg.hazards.no_finished_guard:
            # Hazard lab: without the finished-request guard its slot is freed twice
            # (DoubleFreeError).
            self._release(Release(req.rid, req.last_slot, [], None), req, in_flight, False)

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
        """Pages and cache lock back now; the slot now or after the last batch carrying ``req``."""
        self.memory.free_pages(release)          # IdPool raises DoubleFreeError on a second free
        if self.mapping is not None:
            self.mapping.released(release.rid)
        readers = [batch.step for batch in in_flight if req.rid in batch.rid_set]
        if readers and not unsafe:
            # Hazard 1 guard (write-after-read on token_pool rows): a launched forward still
            # reads this slot's row and writes its next token there; the next request's prompt
            # would be written into the row on the scheduler stream, which does not wait for it.
            self.held_slots.append((max(readers), release.rid, release.slot))
        else:
            self.unsafe_frees += bool(readers)      # hazard lab: a race window opened
            self.memory.free_slot(release.rid, release.slot)

    def release_deferred(self, upto_step: int) -> None:
        """Give back the slots held for batches up to ``upto_step``, which are now done."""
        for step, rid, slot in self.held_slots:
            if step <= upto_step:
                self.memory.free_slot(rid, slot)
        self.held_slots = [held for held in self.held_slots if held[0] > upto_step]
