"""The scheduler: ``normal_loop`` and ``overlap_loop``, side by side, in the article's four stages.

1. ``receive_requests``      take what has arrived (new requests, aborts)
2. ``schedule_next_batch``   pick the next batch (prefill first, chunked, else decode), take its
                             slots and pages, upload its metadata (scheduler stream)
3. ``_forward``              launch it on the engine stream (returns at once)
4. ``_process_last_data``    wait for a batch's tokens (``copy_done``), append, stop checks, free

``normal_loop`` runs 1-2-3-4 on the *same* batch: the GPU idles while the CPU does 4 and the next
1-2. ``overlap_loop`` runs 4 on the *previous* batch after launching the next, so the CPU's work
hides behind the forward. The price is *lag one*: a request that stopped at step n-1 may already be
in batch n; its extra token is dropped, its pages go back at once (only forwards write pages, in
launch order), its slot once batch n is done with the slot's token_pool row. The comment at each
touch of memory says which dependency it keeps. With nothing waiting, running or in flight, the
loop blocks on its source: idle time, not CPU work."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from engine.config import EngineConfig, LoopSpec
from engine.scheduler.cache_manager import CacheManager, Pools
from engine.scheduler.checks import MappingCheck
from engine.scheduler.device import Device, ForwardOutput
from engine.scheduler.request import (
    Batch,
    Req,
    Row,
    StepMeta,
    advance_meta,
    build_meta,
    decode_bucket,
)
from engine.scheduler.sources import RequestSource
from engine.scheduler.table import RequestTable
from record.recorder import Timeline
from record.schema import Loop, Phase

IDLE_WAIT_S = 0.05              # an idle loop looks at should_stop at least this often
TokenSink = Callable[[list[Req]], None]    # told which requests got tokens (or ended) in a step


@dataclass(frozen=True)
class ForwardInput:
    batch: Batch
    meta: StepMeta
    uploaded: Any                   # the device's handle to the uploaded metadata


LastData = tuple[ForwardInput, ForwardOutput] | None


class KernelWindow(Protocol):
    """A kernel-level capture over some steps (CUDA: ``engine.devices.kernel_capture``)."""

    def on_step(self, step: int) -> None: ...

    def annotate(self, step: int) -> AbstractContextManager[Any]: ...


class RunCancelled(RuntimeError):
    """The run was stopped on request (``should_stop`` said so between two iterations)."""


class _CpuSpan:
    """One span on the ``cpu`` lane: kept cheap, its cost lands in the gaps it measures."""

    __slots__ = ("timeline", "phase", "step", "batch", "t0")

    def __init__(self, timeline: Timeline, phase: str, step: int, batch: Batch | None) -> None:
        self.timeline, self.phase, self.step, self.batch = timeline, phase, step, batch

    def __enter__(self):
        self.t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> None:
        if self.timeline.enabled:
            b = self.batch
            self.timeline.add_cpu(self.phase, self.step, self.t0, time.perf_counter_ns(),
                                  len(b.rows) if b else 0, b.num_tokens if b else 0,
                                  b.rids if b else ())


class Scheduler:
    def __init__(self, cfg: EngineConfig, device: Device, pools: Pools, timeline: Timeline,
                 loop: LoopSpec, source: RequestSource, sink: TokenSink | None = None, *,
                 capture: KernelWindow | None = None) -> None:
        """One run's scheduler, complete: where its requests come from and its tokens go."""
        self.cfg, self.device = cfg, device
        self.slots, self.pages = slots, pages = pools.slots, pools.pages
        self.source = source
        self.sink = sink                            # streams tokens out (the server); optional
        self.loop = loop                            # which loop; k decode steps; extra CPU work
        # Host copy of each slot's page list (SGLang's req_to_token), scratch page where unused;
        # one extra row for the dummy slot that padding rows read.
        self.page_table = np.full((slots.total + 1, cfg.pages_per_seq), pages.total, np.int64)
        self.memory = CacheManager(cfg, slots, pages, pools.cache, self.page_table)
        self.mapping = MappingCheck(cfg.page_size) if cfg.debug_checks else None
        self.table = RequestTable(cfg, self.memory, timeline, self.mapping)  # waiting, running
        self.capture = capture                      # a torch.profiler window (kernel lanes)
        self.timeline, self.pad_batches = timeline, device.pads_batches
        self.step = 0
        self.wasted_tokens = 0
        self.unguarded_tokens = 0                   # hazard lab: kept where a guard would drop
        # Per step: (step, time, pages used, pages only cached, free): the memory chart.
        self.memory_trace: list[tuple[int, int, int, int, int]] = []

    # ---- the two loops ------------------------------------------------------------------------
    def normal_loop(self) -> None:
        self.receive_requests(in_flight=[])                        # 1
        forward_input = self.schedule_next_batch(in_flight=[])     # 2
        if forward_input is None:
            return
        output = self._forward(forward_input)                      # 3
        self._process_last_data((forward_input, output), in_flight=[])   # 4: the GPU idles

    def overlap_loop(self, last_data: LastData) -> LastData:
        launched = [last_data[0]] if last_data else []             # B(n-1): not processed yet
        self.receive_requests(launched)                            # 1
        forward_input = self.schedule_next_batch(launched)         # 2 (metadata: scheduler stream)
        ongoing_data = None
        if forward_input is not None:                              # 3: forward(Bn), engine stream
            ongoing_data = (forward_input, self._forward(forward_input))
        in_flight = [forward_input] if forward_input else []
        if last_data is not None:
            self._process_last_data(last_data, in_flight)          # 4: process(Bn-1) meanwhile
        elif not in_flight:
            self.table.release_deferred(upto_step=self.step)       # nothing queued: all safe
        return ongoing_data

    def multistep_loop(self, last_data: list) -> list:
        """Overlap with k decode steps per iteration: one scheduling pass and one upload for k
        forwards, each feeding the next through token_pool, processed together one iteration
        later (stop checks k steps late; the extra CPU work is paid once per k forwards)."""
        launched = [fi for fi, _ in last_data]                     # the previous k, not processed
        self.receive_requests(launched)                            # 1
        group = self.schedule_next_group(self.loop.decode_steps, launched)   # 2: k steps, one upload
        ongoing_data = [(fi, self._forward(fi)) for fi in group]   # 3: k launches, no read-back
        for i, data in enumerate(last_data):                       # 4: the previous k steps
            # Not yet processed = still possibly read by the device: this group and the rest.
            in_flight = group + [fi for fi, _ in last_data[i + 1:]]
            self._process_last_data(data, in_flight, scheduler_work=i == len(last_data) - 1)
        if not last_data and not group:
            self.table.release_deferred(upto_step=self.step)       # nothing queued: all safe
        return ongoing_data

    def run(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Drive the loop ``self.loop`` names until the source is done and every request has
        finished (or ``should_stop()`` says stop)."""
        last: Any = None
        stalls = 0
        while True:
            if should_stop is not None and should_stop():
                raise RunCancelled("the run was stopped before it finished")
            if self.table.is_idle() and not last:
                if self.source.done():
                    return
                # Nothing waiting, running or in flight: block until a request may have
                # arrived. Idle time, not CPU work, and not a stall.
                if not self.source.wait(IDLE_WAIT_S):
                    continue
            before = self.step
            match self.loop.loop:
                case Loop.NORMAL:
                    self.normal_loop()
                case Loop.OVERLAP:
                    last = self.overlap_loop(last)
                case Loop.MULTISTEP:
                    last = self.multistep_loop(last or [])
            # Stalled: requests wait or run, yet nothing was launched and nothing is in flight.
            stuck = self.step == before and not last and not self.table.is_idle()
            stalls = stalls + 1 if stuck else 0
            if stalls > 2:
                raise RuntimeError(f"scheduler stalled: {len(self.table.waiting)} waiting and "
                                   f"{len(self.table.running)} running requests can never go on")

    # ---- stage 1 ------------------------------------------------------------------------------
    def receive_requests(self, in_flight: list[ForwardInput]) -> None:
        """Take what has arrived; an aborted request that ``in_flight`` batches carry keeps its
        slot until they are done."""
        with _CpuSpan(self.timeline, Phase.RECEIVE, self.step + 1, None):
            received = self.source.receive()
            self.table.waiting.extend(received.reqs)
            if received.aborts:
                gone = self.table.abort(set(received.aborts), _batches(in_flight))
                if gone and self.sink is not None:
                    self.sink(gone)

    # ---- stage 2 ------------------------------------------------------------------------------
    def schedule_next_batch(self, in_flight: list[ForwardInput]) -> ForwardInput | None:
        group = self.schedule_next_group(1, in_flight)
        return group[0] if group else None

    def schedule_next_group(self, k: int, in_flight: list[ForwardInput]) -> list[ForwardInput]:
        """The next batch (prefill first), or up to ``k`` decode steps of the same rows, laid out
        before any of their tokens exist: a row leaves the group at ``max_new_tokens``; stop
        tokens are seen only when the group is processed. A request retracted here while an
        ``in_flight`` batch carries it gives its memory back after that batch."""
        t0 = time.perf_counter_ns()
        rows, kind = self.table.prefill_rows(), Phase.PREFILL
        if not rows:
            rows, kind = self.table.decode_rows(k, _batches(in_flight), self.step + 1), Phase.DECODE
        if not rows:
            return []
        batches = [self._new_batch(kind, rows)]
        metas = [build_meta(batches[0], self.page_table, self.cfg.page_size,
                            dummy_slot=self.slots.total, full_kv=self.pad_batches)]
        if kind == Phase.DECODE and k > 1:
            # Decode steps each row may still run, counting this one (its length limit).
            left = np.fromiter((r.req.params.max_new_tokens - r.req.num_scheduled + 1
                                for r in rows), np.int64, len(rows))
            for j in range(1, min(k, int(left.max()))):
                keep = left > j
                later = [Row(r.req, r.start + j, 1, samples=True)
                         for r, kept in zip(rows, keep) if kept]
                for row in later:
                    row.req.num_scheduled += 1
                batches.append(self._new_batch(kind, later))
                metas.append(advance_meta(metas[0], batches[-1], keep, j, self.page_table,
                                          self.cfg.page_size, self.slots.total, self.pad_batches))
        if self.mapping is not None:
            self.mapping.launched(batches, metas)
        uploaded = self.device.upload(metas)                      # scheduler stream, one copy
        if kind == Phase.PREFILL and not self.cfg.hazards.late_prefix_insert:
            # The seed's cache_req(req, finished=False), done before the next batch is built, the
            # request keeping its own pages (RadixCache.insert): every later batch maps these
            # positions to the same pages (SGLang remaps later: its PR 38140). A batch that reads
            # them runs after this prefill in the engine stream's order.
            for row in rows:
                self.memory.cache_req(row.req, finished=False)
        self.timeline.add_cpu(Phase.SCHEDULE, batches[0].step, t0, time.perf_counter_ns(), len(rows),
                              sum(b.num_tokens for b in batches), batches[0].rids)
        if self.timeline.enabled:
            self.memory_trace.append((batches[0].step, t0, *self.memory.usage()))
        return [ForwardInput(b, m, u) for b, m, u in zip(batches, metas, uploaded)]

    def _new_batch(self, kind: str, rows: list[Row]) -> Batch:
        self.step += 1
        if self.capture is not None:
            self.capture.on_step(self.step)
        padded = len(rows)
        if self.pad_batches:                     # CUDA: a few batch sizes (graphs, warmed shapes)
            padded = decode_bucket(len(rows), self.cfg.max_batch_size)
        return Batch(self.step, kind, rows, padded)

    # ---- stage 3 ------------------------------------------------------------------------------
    def _forward(self, forward_input: ForwardInput) -> ForwardOutput:
        step = forward_input.batch.step
        with _CpuSpan(self.timeline, Phase.LAUNCH, step, forward_input.batch):
            if self.capture is not None:
                with self.capture.annotate(step):
                    return self.device.forward(forward_input.uploaded)
            return self.device.forward(forward_input.uploaded)

    # ---- stage 4 ------------------------------------------------------------------------------
    def _process_last_data(self, last_data: tuple[ForwardInput, ForwardOutput],
                           in_flight: list[ForwardInput], scheduler_work: bool = True) -> None:
        """Read a launched batch's tokens, append them, check stops, free what finished. A request
        that ``in_flight`` batches carry keeps its slot until they complete (they read its
        token_pool row); its pages go back at once."""
        forward_input, output = last_data
        batch = forward_input.batch
        with _CpuSpan(self.timeline, Phase.WAIT, batch.step, batch):
            if self.timeline.enabled and not output.copy_done.query():
                # The recorder's work, done while this thread would only block (never a wait).
                self.timeline.resolve_while_waiting()
            # Sync point: blocks until batch's tokens are in host memory (its forward is done).
            output.copy_done.synchronize()
            hazards = self.cfg.hazards
            if hazards.single_host_buffer and hazards.inject_delay_us:
                time.sleep(hazards.inject_delay_us / 1e6)   # hazard lab: read the buffer late
        with _CpuSpan(self.timeline, Phase.PROCESS_LAST, batch.step, batch):
            self.table.release_deferred(upto_step=batch.step)
            now = time.perf_counter_ns()
            if batch.kind == Phase.PREFILL and self.cfg.hazards.late_prefix_insert:
                for row in batch.rows:               # hazard lab: after the next batch was built
                    if row.epoch == row.req.epoch and row.req in self.table.running:
                        self.memory.cache_req(row.req, finished=False, remap=True)
            touched = [row.req for row, token in zip(batch.rows, output.tokens())
                       if row.samples and self._append_token(row, token, now, in_flight)]
            if touched and self.sink is not None:
                self.sink(touched)                  # stream the new tokens out (the server)
            if not in_flight:
                self.table.release_deferred(upto_step=self.step)
            if scheduler_work:
                _extra_cpu_work(self.loop.extra_cpu_us)

    def _append_token(self, row: Row, token: int, now: int,
                      in_flight: list[ForwardInput]) -> bool:
        """Keep ``token`` (True), or drop the lag-one token of a finished request (False)."""
        req = row.req
        hazards = self.cfg.hazards
        # The retraction guard: launched before the request was retracted, which resumes from
        # the tokens it had read (its fill_ids); this token comes again.
        if row.epoch != req.epoch and self._drop(req, guarded=not hazards.no_retract_guard):
            return False
        # The finished-request guard (lag one): this request stopped before this step ran, so
        # the token is dropped and the request is not finished a second time.
        if req.finished and self._drop(req, guarded=not hazards.no_finished_guard):
            return False
        req.output_ids.append(token)
        req.token_ns.append(now)
        if len(req.output_ids) == 1:
            req.first_token_ns = now
        if token in req.stop_ids:
            self.table.finish(req, "stop", now, _batches(in_flight))
        elif len(req.output_ids) >= req.params.max_new_tokens:
            self.table.finish(req, "length", now, _batches(in_flight))
        return True

    def _drop(self, req: Req, guarded: bool) -> bool:
        """A guard's token: dropped (True), or kept where the hazard lab turned the guard off."""
        if guarded:
            req.wasted_steps += 1
            self.wasted_tokens += 1
        else:
            self.unguarded_tokens += 1          # hazard lab: the race window opened, unguarded
        return guarded


def _batches(in_flight: list[ForwardInput]) -> list[Batch]:
    return [fi.batch for fi in in_flight]


def _extra_cpu_work(extra_cpu_us: int) -> None:
    """Real per-step CPU work (hashing, like detokenising and bookkeeping), not a sleep."""
    if extra_cpu_us <= 0:
        return
    deadline = time.perf_counter_ns() + extra_cpu_us * 1000
    x = 0
    while time.perf_counter_ns() < deadline:
        for i in range(50):
            x = hash((x, i, "detokenize"))
