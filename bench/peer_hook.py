"""This project's span recorder hooked into Mini-SGLang's scheduler loop: one instrument for both.

Mini-SGLang (github.com/sgl-project/mini-sglang, ``python/minisgl/scheduler/scheduler.py``) runs
the article's loop: ``overlap_loop`` and ``normal_loop`` call ``receive_msg``,
``_schedule_next_batch`` (which calls ``_prepare_batch``: the batch's metadata, built and copied
to the GPU), ``_forward`` and ``_process_last_data`` (whose ``copy_done.synchronize()`` is the
wait for the sampled tokens). ``MiniSglangRecorder`` wraps those methods on one scheduler
object, without changing its code, and writes what they did into ``record.timeline.Timeline``
with the lanes and phases our own engine records:

- ``cpu``: ``receive``, ``schedule``, ``launch`` (``_forward``: enqueue the forward), ``wait``
  (``copy_done.synchronize()``), ``process_last`` (the rest of ``_process_last_data``);
- GPU spans from CUDA event pairs on the stream that ran the work: ``upload`` around
  ``_prepare_batch``, ``prefill`` / ``decode`` around ``_forward`` (token gather, graph replay,
  argmax, the result copy and the ``token_pool`` write, all on its engine stream).

Mini-SGLang enqueues its metadata as several small copies and kernels while it builds a batch,
so its ``upload`` span runs from the first to the last of them. Its serial loop runs everything
on its engine stream (``run_forever`` enters ``engine_stream_ctx`` before ``normal_loop``), so
there the uploads sit on the ``engine_stream`` lane (``record.metrics`` leaves them out of
T_fwd); in the overlap loop they run on its scheduler stream.

``install`` wraps, ``remove`` restores the object as it was (timed runs without the hook run the
unchanged code). Imports torch; runs inside Mini-SGLang's process (``bench/peer_minisgl.py``).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from engine.devices.cuda_buffers import EventPool
from record.timeline import Timeline

WRAPPED = ("receive_msg", "send_result", "_schedule_next_batch", "_prepare_batch", "_forward",
           "_process_last_data")


class _TimedWait:
    """Mini-SGLang's ``copy_done`` event, whose ``synchronize()`` is recorded as a ``wait``."""

    def __init__(self, event: Any, recorder: MiniSglangRecorder, step: int) -> None:
        self.event, self.recorder, self.step = event, recorder, step

    def synchronize(self) -> None:
        start = time.perf_counter_ns()
        self.event.synchronize()            # the CPU waits for step n's result copy
        end = self.recorder.wait_end = time.perf_counter_ns()
        rows, tokens, ids = self.recorder.batches[self.step]
        self.recorder.timeline.add_cpu("wait", self.step, start, end, rows, tokens, ids)


class MiniSglangRecorder:
    """Records one Mini-SGLang scheduler's loop into a ``Timeline`` (``begin`` ... ``end``)."""

    def __init__(self, scheduler: Any, serial: bool) -> None:
        self.sched = scheduler
        self.upload_lane = "engine_stream" if serial else "scheduler_stream"
        self.engine_stream = scheduler.engine.stream
        self.upload_stream = scheduler.engine.stream if serial else scheduler.stream
        self.events = EventPool()
        self.timeline = Timeline(enabled=False)
        self.saved: dict[str, Any] = {}
        self.reset()

    def reset(self) -> None:
        self.step = 0
        self.steps: dict[int, int] = {}     # id(batch) -> step, while the batch is in flight
        self.batches: dict[int, tuple[int, int, list[int]]] = {}  # step -> rows, tokens, ids
        self.token_ns: dict[int, list[int]] = {}                  # uid -> when each token came
        self.wait_end = 0

    # ---- switching on and off ---------------------------------------------------------------
    def install(self) -> None:
        """Wrap the loop's methods on this one object (instance attributes shadow the class's)."""
        if self.saved:
            return
        sched = self.sched
        self.saved = {name: sched.__dict__.get(name) for name in WRAPPED}
        originals = {name: getattr(sched, name) for name in WRAPPED}
        for name in WRAPPED:
            setattr(sched, name, getattr(self, "_" + name.lstrip("_"))(originals[name]))

    def remove(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                delattr(self.sched, name)   # back to the class's method
            else:
                setattr(self.sched, name, value)
        self.saved = {}

    def begin(self, timeline: Timeline) -> None:
        """Start a run: the GPU clock is mapped onto the host's with one event on an idle GPU."""
        self.reset()
        torch.cuda.synchronize()
        ref = torch.cuda.Event(enable_timing=True)
        host_ns = time.perf_counter_ns()
        ref.record(self.sched.stream)       # the GPU is idle: it fires at about host_ns
        ref.synchronize()
        timeline.set_gpu_reference(ref, host_ns)
        self.timeline = timeline

    def end(self) -> dict[int, list[int]]:
        """Finish a run (every GPU span resolved); returns when each request's tokens came."""
        torch.cuda.synchronize()
        self.timeline.resolve()
        return self.token_ns

    # ---- the wrappers -----------------------------------------------------------------------
    def _receive_msg(self, original):
        def receive_msg(*args, **kwargs):
            start = time.perf_counter_ns()
            msgs = original(*args, **kwargs)    # offline: raises once all requests are done
            self.timeline.add_cpu("receive", self.step + 1, start, time.perf_counter_ns())
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
                self.timeline.add_cpu("schedule", step, start, time.perf_counter_ns(), rows,
                                      tokens, ids)
            return forward_input
        return schedule_next_batch

    def _prepare_batch(self, original):
        def prepare_batch(batch):
            events = self.events.take(2)
            events[0].record(self.upload_stream)
            forward_input = original(batch)
            events[1].record(self.upload_stream)
            self.step += 1
            step = self.step
            self.steps[id(batch)] = step
            reqs = batch.reqs
            ids = [req.uid for req in reqs]
            tokens = sum(req.extend_len for req in reqs)   # before the forward moves them on
            self.batches[step] = (len(reqs), tokens, ids)
            self.timeline.add_gpu_group(events, ((self.upload_lane, "upload", 0, 1, len(reqs),
                                                  tokens),), step, ids, self.events.give_back)
            return forward_input
        return prepare_batch

    def _forward(self, original):
        def forward(forward_input):
            start = time.perf_counter_ns()
            batch = forward_input.batch
            step = self.steps[id(batch)]
            rows, tokens, ids = self.batches[step]
            phase = "prefill" if batch.is_prefill else "decode"
            events = self.events.take(2)
            events[0].record(self.engine_stream)
            output = original(forward_input)
            events[1].record(self.engine_stream)
            self.timeline.add_gpu_group(events, (("engine_stream", phase, 0, 1, rows, tokens),),
                                        step, ids, self.events.give_back)
            timed = output._replace(copy_done_event=_TimedWait(output.copy_done_event, self,
                                                               step))
            self.timeline.add_cpu("launch", step, start, time.perf_counter_ns(), rows, tokens,
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
            self.timeline.add_cpu("process_last", step, max(start, self.wait_end),
                                  time.perf_counter_ns(), rows, tokens, ids)
        return process_last_data
