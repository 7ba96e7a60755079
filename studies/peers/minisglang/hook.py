"""This project's span recorder hooked into Mini-SGLang's scheduler loop: one instrument for both.

Mini-SGLang (github.com/sgl-project/mini-sglang, ``python/minisgl/scheduler/scheduler.py``) runs
the article's loop: ``overlap_loop`` and ``normal_loop`` call ``receive_msg``,
``_schedule_next_batch`` (which calls ``_prepare_batch``: the batch's metadata, built and copied
to the GPU), ``_forward`` and ``_process_last_data`` (whose ``copy_done.synchronize()`` is the
wait for the sampled tokens). ``MiniSglangRecorder`` wraps those methods on one scheduler
object, without changing its code, and writes what they did into ``record.recorder.Timeline``
with the lanes and phases our own engine records:

- ``cpu``: ``receive``, ``schedule``, ``launch`` (``_forward``: enqueue the forward), ``wait``
  (``copy_done.synchronize()``), ``process_last`` (the rest of ``_process_last_data``);
- GPU spans from CUDA event pairs: ``prefill`` / ``decode`` on the engine stream, from the
  forward's launch to the end of ``_forward``'s GPU work (graph replay, argmax, the result copy,
  the ``token_pool`` write); ``upload`` on the scheduler stream around ``_prepare_batch``.

Two places need care, both because Mini-SGLang's CPU work is interleaved with what it enqueues:

- A decode step's span starts where its graph replay is launched: after FlashInfer's ``plan``
  (``attn_backend.prepare_for_replay``, CPU work inside ``_forward``), so that the time the GPU
  waits for that CPU work is not drawn as forward time. A prefill (no graph) starts with
  ``_forward``.
- Its metadata is several small copies and kernels enqueued while the batch is built, so an
  ``upload`` span runs from the first to the last of them, at the CPU's pace. In the overlap loop
  they run on its scheduler stream, beside the previous forward, and are drawn there. Its serial
  loop runs them on its engine stream (``run_forever`` enters ``engine_stream_ctx`` before
  ``normal_loop``), between forwards: a span there would count the GPU busy while it waits for
  the CPU, so none is drawn; the ``schedule`` span on the CPU lane shows that time.

``install`` wraps, ``remove`` restores the objects as they were (timed runs without the hook run
the unchanged code). Imports torch; runs inside Mini-SGLang's process (``runner.py``).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from engine.devices.cuda_buffers import EventPool
from record.recorder import Timeline
from record.schema import Lane, Phase
from studies.peers.hooks import TimedWait, map_gpu_clock

WRAPPED = ("receive_msg", "send_result", "_schedule_next_batch", "_prepare_batch", "_forward",
           "_process_last_data")


class MiniSglangRecorder:
    """Records one Mini-SGLang scheduler's loop into a ``Timeline`` (``begin`` ... ``end``)."""

    def __init__(self, scheduler: Any, serial: bool) -> None:
        self.sched = scheduler
        self.serial = serial
        self.attention = scheduler.engine.attn_backend    # the object the graph runner calls
        self.engine_stream = scheduler.engine.stream
        self.events = EventPool()
        self.timeline = Timeline(enabled=False)
        self.saved: dict[str, Any] = {}
        self.saved_plan: Any = None
        self.reset()

    def reset(self) -> None:
        self.step = 0
        self.steps: dict[int, int] = {}     # id(batch) -> step, while the batch is in flight
        self.batches: dict[int, tuple[int, int, list[int]]] = {}  # step -> rows, tokens, ids
        self.token_ns: dict[int, list[int]] = {}                  # uid -> when each token came
        self.wait_end = 0
        self.forward_events: list[Any] = []     # the forward in flight: [start, end] events

    def install(self) -> None:
        """Wrap the loop's methods on this one object (instance attributes shadow the class's)."""
        if self.saved:
            return
        sched = self.sched
        self.saved = {name: sched.__dict__.get(name) for name in WRAPPED}
        for name in WRAPPED:
            setattr(sched, name, getattr(self, "_" + name.lstrip("_"))(getattr(sched, name)))
        self.saved_plan = self.attention.__dict__.get("prepare_for_replay")
        self.attention.prepare_for_replay = self._prepare_for_replay(
            self.attention.prepare_for_replay)

    def remove(self) -> None:
        restore = [(self.sched, name, value) for name, value in self.saved.items()]
        if self.saved:
            restore.append((self.attention, "prepare_for_replay", self.saved_plan))
        for owner, name, value in restore:
            if value is None:
                delattr(owner, name)        # back to the class's method
            else:
                setattr(owner, name, value)
        self.saved = {}

    def begin(self, timeline: Timeline) -> None:
        """Start a run: the GPU clock is mapped onto the host's with one event on an idle GPU."""
        self.reset()
        map_gpu_clock(timeline, self.sched.stream)
        self.timeline = timeline

    def end(self) -> dict[int, list[int]]:
        """Finish a run (every GPU span resolved); returns when each request's tokens came."""
        torch.cuda.synchronize()
        self.timeline.resolve()
        return self.token_ns

    def wait(self, step: int, start: int) -> None:
        """The CPU's wait for step ``step``'s result copy, from ``start`` (ns) to now."""
        self.wait_end = time.perf_counter_ns()
        rows, tokens, ids = self.batches[step]
        self.timeline.add_cpu(Phase.WAIT, step, start, self.wait_end, rows, tokens, ids)

    def _gpu(self, events: list[Any], lane: str, phase: str, step: int) -> None:
        rows, tokens, ids = self.batches[step]
        self.timeline.add_gpu_group(events, ((lane, phase, 0, 1, rows, tokens),), step, ids,
                                    self.events.give_back)

    def _receive_msg(self, original):
        def receive_msg(*args, **kwargs):
            start = time.perf_counter_ns()
            msgs = original(*args, **kwargs)    # offline: raises once all requests are done
            self.timeline.add_cpu(Phase.RECEIVE, self.step + 1, start, time.perf_counter_ns())
            return msgs
        return receive_msg

    def _send_result(self, original):
        def send_result(reply):
            now = time.perf_counter_ns()
            for msg in reply:
                self.token_ns.setdefault(msg.uid, []).append(now)
            return original(reply)
        return send_result

    def _schedule_next_batch(self, original):
        def schedule_next_batch():
            start = time.perf_counter_ns()
            forward_input = original()
            if forward_input is not None:
                step = self.steps[id(forward_input.batch)]
                rows, tokens, ids = self.batches[step]
                self.timeline.add_cpu(Phase.SCHEDULE, step, start, time.perf_counter_ns(), rows,
                                      tokens, ids)
            return forward_input
        return schedule_next_batch

    def _prepare_batch(self, original):
        def prepare_batch(batch):
            events = None if self.serial else self.events.take(2)
            if events:
                events[0].record(self.sched.stream)         # its scheduler stream
            forward_input = original(batch)
            self.step += 1
            step = self.step
            self.steps[id(batch)] = step
            reqs = batch.reqs
            ids = [req.uid for req in reqs]
            tokens = sum(req.extend_len for req in reqs)   # before the forward moves them on
            self.batches[step] = (len(reqs), tokens, ids)
            if events:
                events[1].record(self.sched.stream)
                self._gpu(events, Lane.SCHEDULER_STREAM, Phase.UPLOAD, step)
            return forward_input
        return prepare_batch

    def _prepare_for_replay(self, original):
        def prepare_for_replay(batch):
            original(batch)                     # FlashInfer's plan: CPU work, then the replay
            if len(self.forward_events) == 2:
                self.forward_events[0].record(self.engine_stream)
        return prepare_for_replay

    def _forward(self, original):
        def forward(forward_input):
            start = time.perf_counter_ns()
            batch = forward_input.batch
            step = self.steps[id(batch)]
            rows, tokens, ids = self.batches[step]
            phase = Phase.PREFILL if batch.is_prefill else Phase.DECODE
            events = self.forward_events = self.events.take(2)
            events[0].record(self.engine_stream)    # re-recorded before a graph replay
            output = original(forward_input)
            events[1].record(self.engine_stream)
            self.forward_events = []
            self._gpu(events, Lane.ENGINE_STREAM, phase, step)
            timed = output._replace(copy_done_event=TimedWait(output.copy_done_event, self.wait,
                                                              step))
            self.timeline.add_cpu(Phase.LAUNCH, step, start, time.perf_counter_ns(), rows, tokens,
                                  ids)
            return timed
        return forward

    def _process_last_data(self, original):
        def process_last_data(last_data):
            if last_data is None:
                return original(last_data)
            start = self.wait_end = time.perf_counter_ns()
            original(last_data)
            step = self.steps.pop(id(last_data[0].batch))
            rows, tokens, ids = self.batches[step]
            # The wait for the copy was recorded on its own; what follows it is the processing.
            self.timeline.add_cpu(Phase.PROCESS_LAST, step, max(start, self.wait_end),
                                  time.perf_counter_ns(), rows, tokens, ids)
        return process_last_data
