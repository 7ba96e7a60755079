"""The CUDA device: real streams over one ``ModelRunner``, events, reused buffers.

The verbs are those of ``engine.scheduler.device.Device``. On the **scheduler stream**: the
metadata upload (and prompt writes). On the **engine stream**: the forward and sampling. The
streams are ordered both ways, each at its line: the forward waits for its upload (metadata ->
forward, ``forward``); an upload into a staging buffer waits for the last forward that read it
(``UploadRing.send``, ``cuda_buffers.py``); the copy waits for the forward's end
(``_copy_result``). The prompt writes into ``token_pool`` rows wait for no forward: a slot is
handed to a new request only after the launched batches that read its row are done
(``RequestTable._release``, ``engine/scheduler/table.py``).

Where the result copy runs (``result_copy_stream``) decides whether the GPU serialises:

- ``"copy"`` (the default, as vLLM and SGLang place it): on a **copy stream** of its own, after a
  wait for the forward's end. Nothing on the engine stream waits for it, so forward(n+1) follows
  forward(n) at once while copy(n) runs beside it. That needs somewhere the next forward does not
  write: here sampling is captured inside the CUDA graph, whose output every replay rewrites, so
  each forward also stores its tokens in its own row of a device result ring (its metadata says
  which, ``COL_OUT``), and the copy reads that row. (vLLM and SGLang sample outside the graph,
  into a fresh tensor kept alive for the copy, and need no ring.)
- ``"engine"`` (Mini-SGLang's): on the engine stream right after the sampling it reads, in stream
  order; upload(n+1) never waits for forward(n), but forward(n+1) starts only after the copy's
  few microseconds.
- ``"scheduler"``: on the scheduler stream after a wait for forward(n); upload(n+1) queues behind
  the copy in that stream's order and forward(n+1) waits for the upload, so every forward starts
  only after the previous one, its copy and the next upload, one after the other.

``process.py`` is the CPU implementation of the same verbs.
"""

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
    """CUDA streams over one ``ModelRunner``; upload and result buffers used in rings.

    The launch path is the scheduler thread's own time per forward, so it avoids Python costs the
    GPU never sees (measured with ``python -m studies launch-cost``): every ``event.record(stream)``
    names its stream (a bare ``record()`` looks the current stream up), the work is put on a
    stream with ``torch.cuda.set_stream`` rather than a ``with torch.cuda.stream(...)`` block
    (about 10 µs each, three per forward), a step's metadata goes up in one H2D copy into a
    device buffer made once (three ``.to()`` calls, each allocating, cost about 26 µs), a
    graph's sampled tokens are copied to the host from the step's own result-ring row (on a copy
    stream) or straight from the graph's static output where that is safe (no clone), and no
    event is made per step:
    signals re-record events of a ring, and the recorder's timing events come from a pool.
    """

    kind = "cuda"
    lanes: tuple[str, ...]
    pads_batches = True             # to the shapes it warmed (and captured as graphs)

    def __init__(self, runner: ModelRunner, cfg: EngineConfig, graphs: Any = None,
                 ring: int = 2) -> None:
        """Streams over ``runner`` for an engine of ``cfg`` (``graphs``: its ``StepGraphs``, or
        None for eager steps); ``ring`` upload buffers."""
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

    # ---- run boundaries ------------------------------------------------------------------------
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

    # ---- verbs --------------------------------------------------------------------------------
    def _grow_staging(self, rows: int) -> None:
        """(Re)make the ring of upload buffers for uploads of up to ``rows`` rows.

        The old buffers may go at once: an in-flight forward holds views of the old device
        buffers (its ``keep_alive``) until it is processed, and PyTorch's pinned-memory allocator
        keeps a dropped host buffer until the copies queued from it have run. The new ones need
        one wait (growing is rare: a multi-step group larger than any before it)."""
        self.staging = UploadRing(self.ring, rows, self.int_width, self.max_writes,
                                  self.runner.device)
        # Sync point, guarding two dependencies of the new device buffers: they were made (and
        # zero-filled) on whatever stream was current, so the fill is queued behind the forwards
        # in flight there while the upload that writes them runs at once on the scheduler
        # stream, and the allocator may have handed them memory that in-flight work on that
        # stream still reads. Without this wait an upload could be zeroed after it landed
        # (tests/test_cuda_device.py makes that happen).
        torch.cuda.synchronize()

    def upload(self, metas: list[StepMeta]) -> list[Uploaded]:
        """Stage 2's device part, on the scheduler stream: one H2D copy, then the prompt writes.

        The step's ints, floats and prompt writes travel packed in one buffer
        (``UploadRing``). A multi-step group's k steps go up together in the same copy, then each
        step reads its own rows of it. Only a prefill carries prompt writes, and a prefill is a
        group of one.
        """
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
        """The first device result-ring row of a step whose host result buffer is ``i``: the
        buffer's own rows, so the buffer's reuse guard also frees them. With the lab's single
        host buffer (no guard) the steps still take the ring's rows in turn, so that lab run
        shows the one race it is about, the host buffer's, and not also a device-side one."""
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
            # scheduler stream. (Mini-SGLang writes engine_stream.wait_stream(scheduler_stream): with the
            # copy elsewhere the scheduler stream holds only uploads, so it is the same edge;
            # with the copy there, wait_stream would also wait for that copy.)
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
        """Is every read of this replay's output done before the next replay can overwrite it?
        On a copy stream the copy reads the result ring, never the output. On the engine stream
        the copy runs in stream order before the next replay. On the scheduler stream only when
        the next forward starts a new group, whose wait for its upload also waits for this copy
        queued before it."""
        if self.placement != "scheduler":
            return True
        return uploaded.last_of_group and not self.hazards.no_wait_stream

    def _copy_result(self, uploaded: Uploaded, next_tokens: torch.Tensor, timing, sampled: int,
                     spans: list):
        """D2H copy of the sampled tokens into this step's host buffer, async, where
        ``self.placement`` says. Adds its span to ``spans`` (this forward's group of events) or,
        on the scheduler stream, records it as a group of its own."""
        i, host = uploaded.result
        meta = uploaded.meta
        rows = meta.num_rows
        copy_done = self.results.events[i]
        if self.placement == "copy":
            # The forward's end, as an event the copy stream can wait for: when recording, the
            # recorder's timing event after sampling serves (one record, two uses), else a plain
            # one. The copy's span then starts there, as the copy itself does (or where the
            # copy before it on this stream ended, if later: record.recorder).
            forward_done = (timing[sampled] if timing
                            else self.forward_done.record(self.engine_stream))
            stream = self.copy_stream
            torch.cuda.set_stream(stream)                 # everything below: copy stream
            # The copy reads what this forward's sampling wrote into its result ring row: it
            # waits for the forward here, on its own stream; nothing on the engine stream waits
            # for the copy, so the next forward starts beside it.
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
