"""This project's span recorder hooked into SGLang's scheduler: its overlap loop on our lanes.

SGLang (github.com/sgl-project/sglang, release 0.5.17; paths below are ``python/sglang/srt/...``
there) runs its scheduler in a process of its own (``managers/scheduler.py``,
``run_scheduler_process``, started with multiprocessing's spawn). Its two loops,
``event_loop_normal`` and ``event_loop_overlap``, call the same phases:

- ``request_receiver.recv_requests`` and ``process_input_requests``  -> ``receive``
- ``get_next_batch_to_run`` (allocation, ``prepare_for_decode``'s copies on its schedule
  stream)                                                          -> ``schedule``, ``upload``
- ``run_batch`` (under overlap: ``forward_stream.wait_stream(schedule_stream)``, the FutureMap
  resolve, the forward, the result copy on its copy stream)         -> ``launch``
- ``process_batch_result`` (``copy_done.synchronize()`` first under overlap; ``.tolist()`` in
  the normal loop)                                                  -> ``wait``, ``process_last``

and three streams: the schedule stream (``run_event_loop`` enters it for the whole loop), the
forward stream (``model_runner.forward_stream``) and the copy stream (``init_overlap``). In the
normal loop everything runs on the schedule stream. GPU spans come from CUDA event pairs:

- ``resolve`` on the engine lane: ``resolve_forward_inputs`` (``managers/overlap_utils.py``),
  the gather of the last step's tokens from ``output_tokens_buf[req_pool_indices]``, which
  stands in for ``input_ids`` (the token never left the GPU);
- ``prefill`` / ``decode`` on the engine lane: ``TpModelWorker.forward_batch_generation``, from
  the CUDA-graph replay's launch (after FlashInfer's plan, CPU work) to its end (sampling
  included); a forward without a graph starts at the call;
- ``copy`` on the copy lane: ``GenerationBatchResult.copy_to_cpu`` (``managers/utils.py``);
- ``upload`` on the scheduler lane, overlap only, around ``get_next_batch_to_run``: its copies
  and kernels run at the CPU's pace between two of the CPU's waits, so in the serial loop, where
  nothing else runs then, a span there would count the GPU busy while it waits for the CPU.

The hook is a plugin of SGLang's own kind (``sglang/srt/plugins``: an entry point in the group
``sglang.srt.plugins``, which ``run_scheduler_process`` loads before it builds the Scheduler).
``register`` only adds two methods to ``Scheduler``, ``overlapdemo_begin`` and
``overlapdemo_end``, which the benchmark calls through ``Engine.collective_rpc`` around one
``generate``: ``begin`` wraps the phases (on their classes), ``end`` writes the spans to a file
and puts every class back as it was, so the timed runs between run SGLang's code unchanged.
Imports torch; runs inside SGLang's scheduler process (``runner.py`` starts it).
"""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

from record.schema import Lane, Phase
from studies.peers.hooks import TimedWait, map_gpu_clock

RID_PREFIX = "od"           # the benchmark's request ids: od<run>-<i>, i in prompt order


def register() -> None:
    """SGLang's plugin entry point: give ``Scheduler`` the two methods the benchmark calls."""
    from sglang.srt.managers.scheduler import Scheduler

    Scheduler.overlapdemo_begin = _begin
    Scheduler.overlapdemo_end = _end


def _begin(self: Any) -> None:
    """(RPC, at an iteration boundary, nothing in flight) Start recording this scheduler."""
    global _ACTIVE
    if _ACTIVE is not None:
        _ACTIVE.remove()
    _ACTIVE = SglangRecorder(self)
    _ACTIVE.install()


def _end(_sched: Any, path: str) -> None:
    """(RPC) Stop recording; the spans and each request's token times go to ``path``."""
    global _ACTIVE
    recorder, _ACTIVE = _ACTIVE, None
    if recorder is not None:
        recorder.remove()
        recorder.write(path)


_ACTIVE: SglangRecorder | None = None


class SglangRecorder:
    """Records one SGLang scheduler's loop into a ``record.recorder.Timeline``."""

    def __init__(self, sched: Any) -> None:
        from engine.devices.cuda_buffers import EventPool
        from record.recorder import Timeline

        self.sched = sched
        self.overlap = bool(sched.enable_overlap)
        self.events = EventPool()
        self.timeline = Timeline()
        self.saved: list[tuple[Any, str, Any]] = []
        self.batches: dict[int, tuple[int, int, list[int]]] = {}   # step -> rows, tokens, ids
        self.token_ns: dict[str, list[int]] = {}                    # rid -> each token's time
        self.forward_start: Any = None         # the forward in flight: its start event
        self.wait_end = 0
        # The GPU is idle between two generate calls.
        self.timeline.t0_ns = map_gpu_clock(self.timeline)

    def install(self) -> None:
        """Wrap each phase on its class (the loop looks every one up at call time)."""
        from sglang.srt.managers import scheduler as scheduler_module
        from sglang.srt.managers import tp_worker
        from sglang.srt.managers.scheduler import Scheduler
        from sglang.srt.managers.scheduler_components.request_receiver import (
            SchedulerRequestReceiver,
        )
        from sglang.srt.managers.utils import GenerationBatchResult

        targets = [(SchedulerRequestReceiver, "recv_requests", self._receive),
                   (Scheduler, "process_input_requests", partial(self._receive, takes_what_came=True)),
                   (Scheduler, "get_next_batch_to_run", self._schedule),
                   (Scheduler, "run_batch", self._launch),
                   (Scheduler, "process_batch_result", self._process),
                   (tp_worker.TpModelWorker, "forward_batch_generation", self._forward),
                   (GenerationBatchResult, "copy_to_cpu",
                    self._gpu_span(Lane.COPY_STREAM, Phase.COPY)),
                   (scheduler_module, "resolve_forward_inputs",
                    self._gpu_span(Lane.ENGINE_STREAM, Phase.RESOLVE))]
        targets += [(cls, "replay", self._replay) for cls in _graph_backends()]
        for owner, name, wrap in targets:
            original = getattr(owner, name)
            self.saved.append((owner, name, original))
            setattr(owner, name, wrap(original))

    def remove(self) -> None:
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved = []

    def write(self, path: str) -> None:
        """Resolve every GPU span and write them, with each request's token times."""
        import torch

        torch.cuda.synchronize()
        self.timeline.resolve()
        spans = [span.to_dict() for span in self.timeline.snapshot()]
        with open(path, "w") as out:
            json.dump({"t0_ns": self.timeline.t0_ns, "overlap": self.overlap, "spans": spans,
                       "token_ns": self.token_ns}, out)

    def _describe(self, batch: Any, step: int) -> None:
        """Keep a batch's rows, tokens and our request numbers by its step."""
        reqs = batch.reqs
        ids = [_number(req.rid) for req in reqs]
        tokens = int(batch.extend_num_tokens or 0) if batch.forward_mode.is_extend() else len(reqs)
        self.batches[step] = (len(reqs), tokens, ids)

    def _cpu(self, phase: str, step: int, start: int, end: int) -> None:
        rows, tokens, ids = self.batches.get(step, (0, 0, []))
        self.timeline.add_cpu(phase, step, start, end, rows, tokens, ids)

    def _gpu(self, events: list[Any], lane: str, phase: str, step: int) -> None:
        rows, tokens, ids = self.batches.get(step, (0, 0, []))
        self.timeline.add_gpu_group(events, ((lane, phase, 0, 1, rows, tokens),), step, ids,
                                    self.events.give_back)

    def _busy(self) -> bool:
        """Work is queued or running (SGLang's idle loop polls: its empty passes are not drawn)."""
        sched = self.sched
        return bool(sched.last_batch is not None or sched.waiting_queue
                    or (sched.running_batch is not None and not sched.running_batch.is_empty()))

    def wait(self, step: int, start: int) -> None:
        self.wait_end = time.perf_counter_ns()
        self._cpu(Phase.WAIT, step, start, self.wait_end)

    def _receive(self, original, takes_what_came: bool = False):
        """A ``receive`` span around a call that got requests (its result, or for one that
        ``takes_what_came``, its first argument) or ran while work was busy."""
        def receive(owner, *args, **kwargs):
            start = time.perf_counter_ns()
            out = original(owner, *args, **kwargs)
            if (args[0] if takes_what_came else out) or self._busy():
                self._cpu(Phase.RECEIVE, self.sched.forward_ct + 1, start, time.perf_counter_ns())
            return out
        return receive

    def _schedule(self, original):
        def schedule(sched, *args, **kwargs):
            start = time.perf_counter_ns()
            events = self.events.take(2) if self.overlap else None
            if events:
                events[0].record()                  # the schedule stream (the loop's own)
            plan = original(sched, *args, **kwargs)
            batch = plan.batch_to_run
            if batch is None:
                if events:
                    self.events.give_back(events)
                return plan
            step = sched.forward_ct + 1             # run_batch numbers it next
            self._describe(batch, step)
            if events:
                events[1].record()
                self._gpu(events, Lane.SCHEDULER_STREAM, Phase.UPLOAD, step)
            self._cpu(Phase.SCHEDULE, step, start, time.perf_counter_ns())
            return plan
        return schedule

    def _launch(self, original):
        def launch(sched, batch, *args, **kwargs):
            start = time.perf_counter_ns()
            result = original(sched, batch, *args, **kwargs)
            step = batch.forward_iter
            if getattr(result, "copy_done", None) is not None:
                result.copy_done = TimedWait(result.copy_done, self.wait, step)
            self._cpu(Phase.LAUNCH, step, start, time.perf_counter_ns())
            return result
        return launch

    def _process(self, original):
        def process(sched, batch, result, *args, **kwargs):
            import torch

            step = batch.forward_iter
            start = self.wait_end = time.perf_counter_ns()
            if getattr(result, "copy_done", None) is None and torch.is_tensor(
                    getattr(result, "next_token_ids", None)):
                # The normal loop's wait is the .tolist() inside: the same wait, made visible
                # (the forward is the last work on this stream; nothing else is waited for).
                torch.cuda.current_stream().synchronize()
                self.wait(step, start)
            before = {req.rid: len(req.output_ids) for req in batch.reqs}
            out = original(sched, batch, result, *args, **kwargs)
            now = time.perf_counter_ns()
            for req in batch.reqs:
                new = len(req.output_ids) - before.get(req.rid, 0)
                if new > 0:
                    self.token_ns.setdefault(req.rid, []).extend([now] * new)
            self._cpu(Phase.PROCESS_LAST, step, max(start, self.wait_end), now)
            return out
        return process

    def _forward(self, original):
        def forward(worker, batch, *args, **kwargs):
            step = self.sched.forward_ct
            phase = Phase.DECODE if batch.forward_mode.is_decode() else Phase.PREFILL
            events = self.events.take(2)
            events[0].record()                      # re-recorded at a graph's replay
            self.forward_start = events[0]
            out = original(worker, batch, *args, **kwargs)
            events[1].record()
            self.forward_start = None
            self._gpu(events, Lane.ENGINE_STREAM, phase, step)
            return out
        return forward

    def _replay(self, original):
        def replay(backend, *args, **kwargs):
            if self.forward_start is not None:      # FlashInfer's plan is done: the GPU's
                self.forward_start.record()         # forward starts with the replay
            return original(backend, *args, **kwargs)
        return replay

    def _gpu_span(self, lane: str, phase: str):
        """A wrapper recording its call's GPU work as one span of ``phase`` on ``lane``."""
        def wrap(original):
            def timed(*args, **kwargs):
                events = self.events.take(2)
                events[0].record()                  # the current stream (copy: the copy stream)
                out = original(*args, **kwargs)
                events[1].record()
                self._gpu(events, lane, phase, self.sched.forward_ct)
                return out
            return timed
        return wrap

def _graph_backends() -> list[type]:
    """SGLang's CUDA-graph backends that define ``replay`` (full and breakable graphs)."""
    found = []
    for module, name in (("full_cuda_graph_backend", "FullCudaGraphBackend"),
                         ("breakable_cuda_graph_backend", "BreakableCudaGraphBackend")):
        try:
            imported = __import__(f"sglang.srt.model_executor.runner_backend.{module}",
                                  fromlist=[name])
            found.append(getattr(imported, name))
        except (ImportError, AttributeError):
            pass
    return found


def _number(rid: Any) -> int:
    """Our number of a request: ``od3-7`` -> 7 (-1 for a request the benchmark did not name)."""
    text = str(rid)
    tail = text.rpartition("-")[2]
    return int(tail) if text.startswith(RID_PREFIX) and tail.isdigit() else -1

