"""The CUDA device: real streams over one ``ModelRunner``, events, reused buffers.

The scheduler stream uploads each step's metadata (and prompt writes); the engine stream runs the
forward and sampling. They are ordered both ways, each at its line: the forward waits for its
upload; an upload into a staging buffer waits for the last forward that read it; the copy waits
for the forward's end. Where the result copy runs (``result_copy_stream``) decides whether the GPU
serialises:

- ``"copy"`` (the default, as vLLM and SGLang): on a copy stream of its own, after a wait for the
  forward; forward(n+1) follows forward(n) at once. The graph's output is rewritten by every
  replay, so each forward also stores its tokens in its own row of a device result ring
  (``COL_OUT``) and the copy reads that row.
- ``"engine"`` (Mini-SGLang's): on the engine stream after sampling; forward(n+1) waits for it.
- ``"scheduler"``: on the scheduler stream after a wait for forward(n); upload(n+1) queues behind
  it, so every forward waits for the previous one, its copy and the next upload in turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from engine.config import MAX_DECODE_STEPS, RESULT_BUFFERS, EngineConfig
from engine.devices.cuda_buffers import EventPool, EventRing, Ring, UploadRing
from engine.devices.runner import ModelRunner
from engine.scheduler.device import ForwardOutput
from engine.scheduler.request import NUM_INT_COLS, StepMeta
from record.recorder import Timeline
from record.schema import BASE_LANES, LANES, Lane, Phase


@dataclass(frozen=True)
class Uploaded:
    """One step's metadata on the device: views into its group's single upload."""

    meta: StepMeta
    ints: torch.Tensor
    floats: torch.Tensor
    writes: torch.Tensor
    ready: Any                      # event recorded after the group's upload (its forward waits)
    released: Any                   # the group's last forward records it: its buffer is reusable
    result: tuple[int, torch.Tensor]  # this step's host result buffer: index, buffer
    out_base: int = 0               # its first row in the device result ring (a copy stream)
    first_of_group: bool = True     # only a group's first forward waits for the upload
    last_of_group: bool = True      # the next forward starts a new group (and so waits)


class CudaDevice:
    """CUDA streams over one ``ModelRunner``; upload and result buffers used in rings. The launch
    path is the scheduler thread's time per forward: every ``event.record(stream)`` names its
    stream, work goes on a stream by ``torch.cuda.set_stream``, a step's metadata goes up in one
    H2D copy, and no event or buffer is made per step."""

    kind = "cuda"
    lanes: tuple[str, ...]
    pads_batches = True             # to the shapes it warmed (and captured as graphs)

    def __init__(self, runner: ModelRunner, cfg: EngineConfig, graphs: Any = None,
                 ring: int = 2) -> None:
        """``graphs``: the runner's ``StepGraphs`` (None: eager); ``ring`` upload buffers."""
        self.runner, self.graphs = runner, graphs
        self.hazards = cfg.hazards
        self.placement = cfg.result_copy_stream      # where the result copy runs (module doc)
        self.label = (f"{torch.cuda.get_device_name()}, {'CUDA graphs' if graphs else 'eager'}, "
                      f"{runner.attention} attention" + (", compiled" if runner.compiled else ""))
        self.scheduler_stream = torch.cuda.Stream()
        self.engine_stream = torch.cuda.Stream()
        self.copy_stream = torch.cuda.Stream() if self.placement == "copy" else None
        self.lanes = LANES if self.copy_stream is not None else BASE_LANES
        self.timeline = Timeline(enabled=False)
        self.events = EventPool()                 # timing events, lent to the timeline
        results = RESULT_BUFFERS
        self.forward_done = EventRing(results)    # scheduler-stream copies wait on these
        self.max_rows, self.ring = cfg.max_batch_size, ring
        self.int_width = NUM_INT_COLS + cfg.pages_per_seq
        self.max_writes = max(cfg.max_prefill_tokens, 1)
        # Room for a multi-step group of the longest k from the start: growing later waits.
        self._grow_staging(self.max_rows * MAX_DECODE_STEPS)
        pin = dict(pin_memory=True)
        single = self.hazards.single_host_buffer
        self.results = Ring([torch.zeros(self.max_rows, dtype=torch.int64, **pin)
                             for _ in range(1 if single else results)], guard=not single)
        self._ring_slots, self._ring_slot = results, 0
        if self.copy_stream is not None:
            # Result buffer i pairs with ring rows [i * max_rows, (i + 1) * max_rows): reusing
            # the buffer (Ring's guard: its last copy is done) frees that ring row too.
            result_ring = runner.result_ring
            assert result_ring is not None and result_ring.shape[0] > results * self.max_rows, \
                "result ring too small"

    def begin_run(self, timeline: Timeline) -> None:
        import time
        torch.cuda.synchronize()
        self.timeline = timeline
        if timeline.enabled:
            ref = torch.cuda.Event(enable_timing=True)
            host_ns = time.perf_counter_ns()
            ref.record(self.scheduler_stream)   # the GPU is idle: it fires at about host_ns
            ref.synchronize()
            timeline.set_gpu_reference(ref, host_ns)

    def end_run(self) -> None:
        torch.cuda.synchronize()

    def _grow_staging(self, rows: int) -> None:
        """(Re)make the upload buffers for up to ``rows`` rows. The old ones may go at once: an
        in-flight forward keeps views of its device buffer (``keep_alive``), and the pinned
        allocator keeps a dropped host buffer until its queued copies have run."""
        self.staging = UploadRing(self.ring, rows, self.int_width, self.max_writes,
                                  self.runner.device)
        # Sync point, guarding the new device buffers: their zero fill is queued on the current
        # stream behind the forwards in flight there, while the upload that writes them runs at
        # once on the scheduler stream (an upload zeroed after it landed); and their memory may
        # still be read by in-flight work on that stream.
        torch.cuda.synchronize()

    def upload(self, metas: list[StepMeta]) -> list[Uploaded]:
        """Stage 2's device part, on the scheduler stream: one H2D copy of the packed ints, floats
        and prompt writes, then the prompt writes. A multi-step group's k steps share the copy."""
        sizes = [m.ints.shape[0] for m in metas]
        total = sum(sizes)
        first = metas[0]
        assert all(m.prompt_writes.shape[1] == 0 for m in metas[1:]), "prompt writes in a group"
        if not self.staging.fits(total, first.prompt_writes.shape[1]):
            self._grow_staging(max(total, self.max_rows * len(metas)))
        # Each step's result buffer (its ring row on a copy stream), once its last copy is done.
        results = [self.results.next() for _ in metas]
        bases = [self._out_base(i) for i, _ in results] if self.copy_stream is not None else None
        i, rows, nw, words = self.staging.pack([m.ints for m in metas],
                                               [m.floats for m in metas], first.prompt_writes,
                                               bases)
        stream = self.scheduler_stream
        torch.cuda.set_stream(stream)                     # everything below: scheduler stream
        timing = self.events.take(2) if self.timeline.enabled else None
        if timing:
            timing[0].record(stream)
        if self.hazards.no_wait_stream and self.hazards.inject_delay_us:
            self._sleep()                        # hazard lab: make the upload late
        slot = self.staging.send(i, rows, nw, words, stream)
        # Prompt writes into token_pool wait for no forward: a slot is handed out only after the
        # batches that read its row are done (RequestTable._release).
        self.runner.write_prompts(slot.writes)
        ready = self.staging.copied[i]
        ready.record(stream)                     # host buffer i is free after; forwards wait
        released = self.staging.read[i]
        if timing:
            timing[1].record(stream)
            self.timeline.add_gpu_group(timing, ((Lane.SCHEDULER_STREAM, Phase.UPLOAD, 0, 1,
                                                  first.num_rows, nw),),
                                        first.step, first.rids, self.events.give_back)
        bases = bases or [0] * len(metas)
        if len(metas) == 1:
            return [Uploaded(first, slot.ints, slot.floats, slot.writes, ready, released,
                             results[0], bases[0])]
        out, row = [], 0
        for j, (meta, size) in enumerate(zip(metas, sizes)):
            out.append(Uploaded(meta, slot.ints[row:row + size], slot.floats[row:row + size],
                                slot.writes if j == 0 else slot.writes[:, :0], ready, released,
                                results[j], bases[j], first_of_group=j == 0,
                                last_of_group=j == len(metas) - 1))
            row += size
        return out

    def _out_base(self, i: int) -> int:
        """The first result-ring row of a step whose host result buffer is ``i`` (the buffer's
        reuse guard frees them too); with the lab's single host buffer, the rows in turn."""
        if not self.hazards.single_host_buffer:
            return i * self.max_rows
        self._ring_slot = (self._ring_slot + 1) % self._ring_slots
        return self._ring_slot * self.max_rows

    def forward(self, uploaded: Uploaded) -> ForwardOutput:
        """Stage 3 on the engine stream, then the async result copy (on a copy stream by default)."""
        meta, ints, floats = uploaded.meta, uploaded.ints, uploaded.floats
        stream = self.engine_stream
        torch.cuda.set_stream(stream)                     # everything below: engine stream
        if uploaded.first_of_group and not self.hazards.no_wait_stream:
            # Metadata -> forward: this forward reads the metadata its group uploaded on the
            # scheduler stream (Mini-SGLang's wait_stream, narrowed to the upload's event).
            stream.wait_event(uploaded.ready)
        # A group's later steps need no wait: its first forward already waited for the whole
        # group's upload, and the engine stream runs its work in order.
        if self.hazards.inject_delay_us and (self.hazards.no_deferred_free
                                             or self.hazards.no_deferred_retract_free):
            self._sleep()                        # hazard lab: keep forward(n) busy for longer
        graph = self.graphs.lookup(meta) if self.graphs is not None else None
        timing = None
        if self.timeline.enabled:                # start, [logits,] sampled, [copied]
            timing = self.events.take((2 if graph is not None else 3)
                                      + (self.placement != "scheduler"))
            timing[0].record(stream)
        rows = meta.num_rows
        tokens = int(meta.prompt_writes.shape[1]) if meta.kind == Phase.PREFILL else rows
        forward = (Lane.ENGINE_STREAM, meta.kind, 0, 1, rows, tokens, meta.cached_tokens)
        if graph is not None:
            # One graph: forward + sample. The next replay overwrites its output, so a copy that
            # reads it may do so in place only if the next replay is ordered after the copy.
            next_tokens = graph.replay(ints, floats, keep=not self._out_read_in_time(uploaded))
            spans = [forward]
        else:
            logits = self.runner.forward_logits(ints, meta.seq_len, meta.kv_pages)
            if timing:
                timing[1].record(stream)
            next_tokens = self.runner.sample_and_store(logits, ints, floats, meta.all_greedy)
            spans = [forward, (Lane.ENGINE_STREAM, Phase.SAMPLE, 1, 2, rows, rows)]
        sampled = len(spans)
        if uploaded.last_of_group:
            # The group's upload buffer may be overwritten once this forward has read it: the
            # next upload into it waits for this event on the GPU (UploadRing.read).
            uploaded.released.record(stream)
        if timing:
            timing[sampled].record(stream)
        copy_done, host = self._copy_result(uploaded, next_tokens, timing, sampled, spans)
        if timing:
            self.timeline.add_gpu_group(timing, spans, meta.step, meta.rids, self.events.give_back)
        return ForwardOutput(meta.step, rows, copy_done, host.numpy(),
                             keep_alive=(ints, floats, uploaded.writes, next_tokens))

    def _out_read_in_time(self, uploaded: Uploaded) -> bool:
        """Is every read of this replay's output done before the next replay can rewrite it? On a
        copy stream the copy reads the ring, never the output; on the engine stream it runs
        before the next replay; on the scheduler stream only when the next forward starts a new
        group (its wait for its upload also waits for this copy)."""
        if self.placement != "scheduler":
            return True
        return uploaded.last_of_group and not self.hazards.no_wait_stream

    def _copy_result(self, uploaded: Uploaded, next_tokens: torch.Tensor, timing, sampled: int,
                     spans: list):
        """Async D2H copy of the sampled tokens into this step's host buffer, where
        ``self.placement`` says; its span joins ``spans`` (or, on the scheduler stream, a group
        of its own)."""
        i, host = uploaded.result
        meta = uploaded.meta
        rows = meta.num_rows
        copy_done = self.results.events[i]
        if self.placement == "copy":
            # The forward's end, for the copy stream to wait for: the recorder's event after
            # sampling when recording (one record, two uses), else a plain one.
            forward_done = (timing[sampled] if timing
                            else self.forward_done.record(self.engine_stream))
            stream = self.copy_stream
            torch.cuda.set_stream(stream)                 # everything below: copy stream
            # Forward -> copy: the copy reads the ring row this forward's sampling wrote; it waits
            # on its own stream, so the next forward starts beside it.
            stream.wait_event(forward_done)
            if self.hazards.no_result_ring:
                # Hazard lab: copy the graph's output, which the next replay rewrites (late).
                if self.hazards.inject_delay_us:
                    self._sleep()
                source = next_tokens[:rows]
            else:
                base = uploaded.out_base
                source = self.runner.result_ring[base:base + rows]
            host[:rows].copy_(source, non_blocking=True)
            copy_done.record(stream)
            if timing:
                # The group's last event is on this stream, which waited for the forward's end
                # after the others: once it has completed, all of them have.
                timing[sampled + 1].record(stream)
                spans.append((Lane.COPY_STREAM, Phase.COPY, sampled, sampled + 1, rows, rows))
            return copy_done, host
        if self.placement == "engine":
            stream = self.engine_stream           # in stream order after the sampling it reads
            host[: next_tokens.shape[0]].copy_(next_tokens, non_blocking=True)
            copy_done.record(stream)
            if timing:
                timing[sampled + 1].record(stream)
                spans.append((Lane.ENGINE_STREAM, Phase.COPY, sampled, sampled + 1, rows, rows))
            return copy_done, host
        forward_done = self.forward_done.record(self.engine_stream)
        stream = self.scheduler_stream
        torch.cuda.set_stream(stream)
        # The copy reads the sampled tokens: it waits for this forward here, and every upload
        # queued on this stream after it (the next step's) waits for it in turn.
        stream.wait_event(forward_done)
        copy_timing = self.events.take(2) if timing else None
        if copy_timing:
            copy_timing[0].record(stream)
        host[: next_tokens.shape[0]].copy_(next_tokens, non_blocking=True)
        copy_done.record(stream)
        if copy_timing:
            copy_timing[1].record(stream)
            self.timeline.add_gpu_group(copy_timing, ((Lane.SCHEDULER_STREAM, Phase.COPY, 0, 1,
                                                       rows, rows),), meta.step, meta.rids,
                                        self.events.give_back)
        return copy_done, host

    def _sleep(self) -> None:
        torch.cuda._sleep(int(self.hazards.inject_delay_us * 1500))   # ~1.5k cycles per us

    def close(self) -> None:
        pass
