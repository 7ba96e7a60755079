"""The CUDA device: two real streams over one ``ModelRunner``, events, pinned host buffer rings.

The verbs are those of ``engine.scheduler.device.Device``. On the **scheduler stream**: the metadata upload
(and prompt writes) and, by default, the result copy; on the **engine stream**: the forward and
sampling. The one sync edge is ``engine_stream.wait_stream(scheduler_stream)`` (metadata ->
forward); the result copy waits for the forward through an event. ``process_device.py`` is the CPU
implementation of the same verbs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine.devices.runner import ModelRunner
from engine.scheduler.device import ForwardOutput
from engine.scheduler.request import StepMeta
from record.timeline import Timeline


@dataclass(frozen=True)
class Uploaded:
    """One step's metadata on the device: views into its group's single upload."""

    meta: StepMeta
    ints: torch.Tensor
    floats: torch.Tensor
    writes: torch.Tensor
    first_of_group: bool            # only a group's first forward waits for the upload
    last_of_group: bool = True      # the next forward starts a new group (and so waits)


class _Ring:
    """N host buffers used in turn; one is reused only after the copy that read it has finished."""

    def __init__(self, buffers: list, events: list, guard: bool = True) -> None:
        self.buffers, self.events, self.i, self.guard = buffers, events, 0, guard

    def next(self):
        self.i = (self.i + 1) % len(self.buffers)
        if self.guard:
            # Hazard 2 guard: the async copy from/into this host buffer must be done before reuse.
            self.events[self.i].synchronize()
        return self.i, self.buffers[self.i]


class _TimingEvents:
    """The timing events of one piece of device work, by name: ``mark("start", stream)`` records
    an event on ``stream`` when the timeline is on, and does nothing when it is off; ``span``
    hands a named pair to the timeline, which resolves it later (never a sync in the loop)."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.events: dict[str, torch.cuda.Event] = {}

    def mark(self, name: str, stream: torch.cuda.Stream) -> None:
        if self.timeline.enabled:
            event = torch.cuda.Event(enable_timing=True)
            event.record(stream)
            self.events[name] = event

    def span(self, lane: str, phase: str, meta: StepMeta, start: str, end: str,
             tokens: int) -> None:
        if start in self.events and end in self.events:
            self.timeline.add_gpu(lane, phase, meta.step, self.events[start], self.events[end],
                                  meta.num_rows, tokens, list(meta.rids))


class CudaDevice:
    """Two CUDA streams over one ``ModelRunner``; pinned host buffers used in rings.

    The launch path is the scheduler thread's own time per forward, so it avoids Python costs the
    GPU never sees (measured with ``python -m bench --launch-cost``): every ``event.record(stream)``
    names its stream (a bare ``record()`` looks the current stream up), the work is put on a
    stream with ``torch.cuda.set_stream`` rather than a ``with torch.cuda.stream(...)`` block
    (about 10 µs each, three per forward), and a graph's sampled tokens are copied to the host
    straight from its static output where that is safe (no clone).
    """

    kind = "cuda"

    def __init__(self, runner: ModelRunner, max_rows: int, int_width: int, max_writes: int,
                 graphs: Any = None, hazards: Any = None, ring: int = 2,
                 results: int = 2, copy_on_engine: bool = False) -> None:
        from engine.config import HazardSwitches
        self.runner, self.graphs = runner, graphs
        self.hazards = hazards or HazardSwitches()
        self.copy_on_engine = copy_on_engine
        self.label = (f"{torch.cuda.get_device_name()}, {'CUDA graphs' if graphs else 'eager'}, "
                      f"{runner.attention} attention" + (", compiled" if runner.compiled else ""))
        self.scheduler_stream = torch.cuda.Stream()
        self.engine_stream = torch.cuda.Stream()
        self.timeline = Timeline(enabled=False)
        self.max_rows, self.int_width, self.max_writes, self.ring = max_rows, int_width, max_writes, ring
        self._grow_staging(max_rows)
        pin = dict(pin_memory=True)
        single = self.hazards.single_host_buffer
        n_results = 1 if single else results
        self.results = _Ring([torch.zeros(max_rows, dtype=torch.int64, **pin)
                              for _ in range(n_results)],
                             [_DoneEvent() for _ in range(n_results)], guard=not single)

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
        """(Re)allocate the ring of pinned staging buffers for uploads of up to ``rows`` rows."""
        torch.cuda.synchronize()     # no queued copy may still read the buffers being replaced
        pin = dict(pin_memory=True)
        self.staging_rows = rows
        self.staging = _Ring(
            [(torch.zeros(rows, self.int_width, dtype=torch.int64, **pin),
              torch.zeros(rows, 2, dtype=torch.float32, **pin),
              torch.zeros(3, self.max_writes, dtype=torch.int64, **pin)) for _ in range(self.ring)],
            [torch.cuda.Event() for _ in range(self.ring)])

    def upload(self, metas: list[StepMeta]) -> list[Uploaded]:
        """Stage 2's device part, on the scheduler stream: H2D copies + prompt writes.

        A multi-step group's k steps go up together: one copy per array, then each step reads its
        own rows of it. Only a prefill carries prompt writes, and a prefill is a group of one.
        """
        sizes = [m.ints.shape[0] for m in metas]
        total = sum(sizes)
        if total > self.staging_rows:
            self._grow_staging(max(total, self.max_rows * len(metas)))
        i, (ints_h, floats_h, writes_h) = self.staging.next()
        first = metas[0]
        nw = first.prompt_writes.shape[1]
        assert all(m.prompt_writes.shape[1] == 0 for m in metas[1:]), "prompt writes in a group"
        np.concatenate([m.ints for m in metas], out=ints_h[:total].numpy())
        np.concatenate([m.floats for m in metas], out=floats_h[:total].numpy())
        writes_h[:, :nw].numpy()[:] = first.prompt_writes
        timing = _TimingEvents(self.timeline)
        torch.cuda.set_stream(self.scheduler_stream)      # everything below: scheduler stream
        timing.mark("start", self.scheduler_stream)
        if self.hazards.no_wait_stream and self.hazards.inject_delay_us:
            self._sleep()                        # hazard lab: make the upload late
        ints = ints_h[:total].to(self.runner.device, non_blocking=True)
        floats = floats_h[:total].to(self.runner.device, non_blocking=True)
        writes = writes_h[:, :nw].to(self.runner.device, non_blocking=True)
        self.runner.write_prompts(writes)
        self.staging.events[i].record(self.scheduler_stream)       # staging buffer i free after
        timing.mark("end", self.scheduler_stream)
        timing.span("scheduler_stream", "upload", first, "start", "end", nw)
        out, row = [], 0
        for j, (meta, size) in enumerate(zip(metas, sizes)):
            out.append(Uploaded(meta, ints[row:row + size], floats[row:row + size],
                                writes if j == 0 else writes[:, :0], first_of_group=j == 0,
                                last_of_group=j == len(metas) - 1))
            row += size
        return out

    def forward(self, uploaded: Uploaded) -> ForwardOutput:
        """Stage 3 on the engine stream, then the async result copy (scheduler stream default)."""
        meta, ints, floats = uploaded.meta, uploaded.ints, uploaded.floats
        timing = _TimingEvents(self.timeline)
        torch.cuda.set_stream(self.engine_stream)         # everything below: engine stream
        if uploaded.first_of_group and not self.hazards.no_wait_stream:
            # THE sync edge: this forward reads the metadata uploaded on the scheduler stream.
            # It also orders this forward after every result copy queued there so far.
            self.engine_stream.wait_stream(self.scheduler_stream)
        # A group's later steps need no wait: its first forward already waited for the whole
        # group's upload, and the engine stream runs its work in order. (Waiting again would
        # also wait for the previous step's result copy, a small gap every step.)
        if self.hazards.no_deferred_free and self.hazards.inject_delay_us:
            self._sleep()                        # hazard lab: keep forward(n) busy for longer
        timing.mark("start", self.engine_stream)
        graph = self.graphs.lookup(meta) if self.graphs is not None else None
        if graph is not None:
            # One graph: forward + sample. The next replay overwrites its output. After a group's
            # last step the next forward starts a new group and waits for the scheduler stream,
            # so it runs after this result's copy: the copy may read the output in place. Inside
            # a group the next step does not wait, so the output is copied out first.
            in_place = uploaded.last_of_group and not self.hazards.no_wait_stream
            next_tokens = graph.replay(ints, floats, keep=not in_place)
        else:
            logits = self.runner.forward_logits(ints, meta.seq_len, meta.kv_pages)
            timing.mark("logits", self.engine_stream)
            next_tokens = self.runner.sample_and_store(logits, ints, floats, meta.all_greedy)
        timing.mark("end", self.engine_stream)
        forward_done = torch.cuda.Event()
        forward_done.record(self.engine_stream)
        tokens = int(meta.prompt_writes.shape[1]) if meta.kind == "prefill" else meta.num_rows
        if graph is not None:
            timing.span("engine_stream", meta.kind, meta, "start", "end", tokens)
        else:
            timing.span("engine_stream", meta.kind, meta, "start", "logits", tokens)
            timing.span("engine_stream", "sample", meta, "logits", "end", meta.num_rows)
        copy_done, host = self._copy_result(meta, next_tokens, forward_done)
        return ForwardOutput(meta.step, meta.num_rows, copy_done, host.numpy(),
                             keep_alive=(ints, floats, uploaded.writes, next_tokens))

    def _copy_result(self, meta: StepMeta, next_tokens: torch.Tensor, forward_done):
        """D2H copy of the sampled tokens into the next host buffer of the ring, async."""
        i, host = self.results.next()
        timing = _TimingEvents(self.timeline)
        on_engine = self.copy_on_engine
        stream = self.engine_stream if on_engine else self.scheduler_stream
        torch.cuda.set_stream(stream)
        if not on_engine:
            # The copy reads the sampled tokens: it waits for this forward, nothing else does.
            self.scheduler_stream.wait_event(forward_done)
        timing.mark("start", stream)
        host[: next_tokens.shape[0]].copy_(next_tokens, non_blocking=True)
        copy_done = self.results.events[i].record_new(stream)
        timing.mark("end", stream)
        lane = "engine_stream" if on_engine else "scheduler_stream"
        timing.span(lane, "copy", meta, "start", "end", meta.num_rows)
        return copy_done, host

    def _sleep(self) -> None:
        torch.cuda._sleep(int(self.hazards.inject_delay_us * 1500))   # ~1.5k cycles per us

    def close(self) -> None:
        pass


class _DoneEvent:
    """Holds the latest CUDA event recorded for one result buffer (a fresh event per copy)."""

    def __init__(self) -> None:
        self.event: torch.cuda.Event | None = None

    def record_new(self, stream: torch.cuda.Stream) -> torch.cuda.Event:
        self.event = torch.cuda.Event()
        self.event.record(stream)
        return self.event

    def synchronize(self) -> None:
        if self.event is not None:
            self.event.synchronize()
