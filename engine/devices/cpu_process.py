"""The CPU backend: a separate *device process* plays the GPU, so overlap is real on a CPU too (a
thread would not do: the GIL serialises the forward against the scheduler's Python work).

The command pipe is the stream (steps run in the order sent), a ``StepCommand`` the metadata
upload, a ring of shared-memory buffers the pinned host buffers, and a ``StepDone`` message
``copy_done``. Every wait polls the process too, so a dead or stopped device raises
``DeviceError`` instead of hanging. ``InlineDevice`` runs the same step in-process (serial) where
no process can start, and its label says so."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
import traceback
from dataclasses import dataclass, replace

import numpy as np
import torch

from engine.config import RESULT_BUFFERS, EngineConfig
from engine.proc_watch import exit_text, is_stopped, start_deaf_to_ctrl_c
from engine.scheduler.device import ForwardOutput
from engine.scheduler.request import StepMeta
from record.recorder import StampedSpan, Timeline
from record.schema import BASE_LANES, Lane, Phase

POLL_S = 0.25                    # how often a wait looks at the process while it waits
START_TIMEOUT_S = 300.0          # loading a large preset on a slow CPU takes a while
MIN_STEP_DEADLINE_S = 30.0       # a step may take this long before the device counts as hung
STEP_DEADLINE_FACTOR = 50        # ... or this many times the slowest step seen so far


class DeviceError(RuntimeError):
    """The device process died, stopped, failed or did not answer; the message says which."""


@dataclass(frozen=True)
class DeviceInit:
    """What the device process builds its runner from (pickled)."""

    config: EngineConfig
    model: str
    dtype: str
    num_buffers: int = RESULT_BUFFERS


@dataclass(frozen=True)
class StepCommand:
    """Run one step; write its tokens into shared result buffer ``buffer``."""

    run: int                    # which run it belongs to: answers of an aborted run are dropped
    meta: StepMeta
    buffer: int


@dataclass(frozen=True)
class CloseCommand:
    """Exit the device process."""


@dataclass(frozen=True)
class DeviceReady:
    pid: int


@dataclass(frozen=True)
class StepDone:
    """The step's tokens are in its result buffer (this message plays ``copy_done``)."""

    run: int
    step: int
    spans: list[StampedSpan]


@dataclass(frozen=True)
class DeviceFailed:
    traceback: str
    error_type: str = ""        # the exception's class name ("ModelLoadError", ...)
    message: str = ""


# ---- the device side (in the child, or in-process for the fallback) ----

def build_runner(init: DeviceInit):
    from engine.devices.runner import ModelRunner, RunnerConfig
    from engine.models.loader import load_model

    dtype = getattr(torch, init.dtype)
    loaded = load_model(init.model, "cpu", dtype, init.config.seed)
    runner = ModelRunner(loaded.model, RunnerConfig.of(init.config, dtype, torch.device("cpu")))
    return loaded, runner


def execute_step(runner, meta: StepMeta, out: np.ndarray) -> list[StampedSpan]:
    """Run one step on the CPU "device"; returns its spans, stamped with ``perf_counter_ns``."""
    n, rids = meta.num_rows, tuple(meta.rids)
    t0 = time.perf_counter_ns()
    ints, floats = torch.from_numpy(meta.ints), torch.from_numpy(meta.floats)
    runner.write_prompts(torch.from_numpy(meta.prompt_writes))
    t1 = time.perf_counter_ns()
    logits = runner.forward_logits(ints, meta.seq_len, meta.kv_pages)
    t2 = time.perf_counter_ns()
    next_tokens = runner.sample_and_store(logits, ints, floats, meta.all_greedy)
    t3 = time.perf_counter_ns()
    out[: next_tokens.shape[0]] = next_tokens.numpy()      # the "D2H copy" into shared memory
    t4 = time.perf_counter_ns()
    tokens = meta.prompt_writes.shape[1] if meta.kind == Phase.PREFILL else n
    return [StampedSpan(Lane.SCHEDULER_STREAM, Phase.UPLOAD, meta.step, t0, t1, n,
                        meta.prompt_writes.shape[1], rids),
            StampedSpan(Lane.ENGINE_STREAM, meta.kind, meta.step, t1, t2, n, tokens, rids,
                        meta.cached_tokens),
            StampedSpan(Lane.ENGINE_STREAM, Phase.SAMPLE, meta.step, t2, t3, n, n, rids),
            StampedSpan(Lane.SCHEDULER_STREAM, Phase.COPY, meta.step, t3, t4, n, n, rids)]


def device_main(init: DeviceInit, cmd_conn, done_conn, shared) -> None:
    """The device process: build the runner, then run steps in order until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if init.config.device_cpus:
            os.sched_setaffinity(0, init.config.device_cpus)
        torch.set_num_threads(init.config.cpu_threads)
        _, runner = build_runner(init)
        results = np.frombuffer(shared, dtype=np.int64).reshape(init.num_buffers, -1)
        ready: DeviceReady | DeviceFailed = DeviceReady(os.getpid())
    except Exception as error:  # noqa: BLE001 - report any start-up failure to the parent
        ready = DeviceFailed(traceback.format_exc(), type(error).__name__, str(error))
    if not _tell(done_conn, ready) or isinstance(ready, DeviceFailed):
        return
    while True:
        try:
            msg = cmd_conn.recv()
        except (EOFError, OSError):
            return                       # the parent is gone: nothing left to serve
        if isinstance(msg, CloseCommand):
            return
        try:
            answer: StepDone | DeviceFailed = StepDone(
                msg.run, msg.meta.step, execute_step(runner, msg.meta, results[msg.buffer]))
        except Exception:  # noqa: BLE001
            answer = DeviceFailed(traceback.format_exc())
        if not _tell(done_conn, answer):
            return


def _tell(conn, message) -> bool:
    """Send ``message`` to the parent; False when the parent is gone."""
    try:
        conn.send(message)
        return True
    except OSError:                      # BrokenPipeError among them
        return False


# ---- the parent side ----

class _StepDone:
    """Plays a CUDA event for one step: ``synchronize()`` blocks until the child says it is done."""

    def __init__(self, device: ProcessDevice, step: int) -> None:
        self.device, self.step = device, step

    def synchronize(self) -> None:
        self.device.wait_done(self.step)

    def query(self) -> bool:
        return self.device.is_done(self.step)


class ProcessDevice:
    kind = "cpu-process"
    label = "CPU, separate device process"
    lanes = BASE_LANES              # one process plays both streams, in order; no copy stream
    pads_batches = False

    def __init__(self, init: DeviceInit) -> None:
        ctx = mp.get_context("spawn")   # never fork a process that may already run server threads
        self.num_buffers = 1 if init.config.hazards.single_host_buffer else init.num_buffers
        init = replace(init, num_buffers=self.num_buffers)
        self.shared = ctx.RawArray("b", self.num_buffers * init.config.max_batch_size * 8)
        self.results = np.frombuffer(self.shared, dtype=np.int64).reshape(self.num_buffers, -1)
        cmd_r, self.cmd = ctx.Pipe(duplex=False)
        self.done, done_w = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=device_main, args=(init, cmd_r, done_w, self.shared),
                                daemon=True, name="overlap-demo-device")
        start_deaf_to_ctrl_c(self.proc)
        # Drop our copies of the child's ends: once the child dies, reading ``done`` gives EOF
        # instead of waiting forever for a write end that only we still hold.
        cmd_r.close()
        done_w.close()
        self.timeline = Timeline(enabled=False)
        self.done_upto = 0               # the child answers steps in launch order
        self.run_id = 0
        self.sent = self.answered = 0
        self.slowest_step_s = 0.0
        self.broken = ""                 # why this device can no longer be used ("" = fine)
        self.buf = 0
        try:
            msg = self._receive(time.monotonic() + START_TIMEOUT_S, "starting")
        except DeviceError:
            self.close()
            raise
        if not isinstance(msg, DeviceReady):
            self.close()
            if msg.error_type == "ModelLoadError":
                # The model itself is wrong: loading it again in-process would fail the same way.
                from engine.models.loader import ModelLoadError
                raise ModelLoadError(msg.message)
            raise DeviceError(f"the CPU device process failed to start:\n{msg.traceback}")

    def begin_run(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.done_upto = 0
        self.run_id += 1

    def end_run(self) -> None:
        """Wait until every step sent has been answered, so none is read as the next run's."""
        deadline = time.monotonic() + self._step_deadline_s()
        while self.answered < self.sent and not self.broken:
            self._receive(deadline, "finishing a run")

    def upload(self, metas: list[StepMeta]) -> list[StepMeta]:
        return list(metas)               # the metadata travels with each step command

    def forward(self, meta: StepMeta) -> ForwardOutput:
        self._check_usable()
        self.buf = (self.buf + 1) % self.num_buffers
        try:
            self.cmd.send(StepCommand(self.run_id, meta, self.buf))   # enqueue: returns at once
        except (BrokenPipeError, OSError) as error:
            raise self._fail(f"the CPU device process is gone ({exit_text(self.proc)})") \
                from error
        self.sent += 1
        return ForwardOutput(meta.step, meta.num_rows, _StepDone(self, meta.step),
                             self.results[self.buf])

    def is_done(self, step: int) -> bool:
        return step <= self.done_upto

    def wait_done(self, step: int) -> None:
        started = time.monotonic()
        deadline = started + self._step_deadline_s()
        while not self.is_done(step):
            msg = self._receive(deadline, f"running step {step}")
            if isinstance(msg, DeviceFailed):
                raise self._fail(f"the CPU device process failed:\n{msg.traceback}")
            if msg.run == self.run_id:
                self.done_upto = msg.step
                self.timeline.add_stamped(msg.spans)
        self.slowest_step_s = max(self.slowest_step_s, time.monotonic() - started)

    def _receive(self, deadline: float, doing: str):
        self._check_usable()
        while True:
            try:
                if self.done.poll(POLL_S):
                    msg = self.done.recv()
                    if isinstance(msg, (StepDone, DeviceFailed)):
                        self.answered += 1       # a step is answered by its result or its error
                    return msg
                alive = self.proc.is_alive()
            except (EOFError, OSError):
                alive = False
            if not alive:
                self.proc.join(timeout=1.0)
                raise self._fail(f"the CPU device process died while {doing} "
                                 f"({exit_text(self.proc)})") from None
            if is_stopped(self.proc.pid):
                raise self._fail(f"the CPU device process is stopped (SIGSTOP?) while {doing}")
            if time.monotonic() > deadline:
                raise self._fail(f"the CPU device process did not answer in "
                                 f"{self._step_deadline_s():.0f} s while {doing}")

    def _step_deadline_s(self) -> float:
        return max(MIN_STEP_DEADLINE_S, STEP_DEADLINE_FACTOR * self.slowest_step_s)

    def _fail(self, why: str) -> DeviceError:
        self.broken = why
        self._stop_process()
        return DeviceError(why)

    def _check_usable(self) -> None:
        if self.broken:
            raise DeviceError(f"the CPU device is out of service: {self.broken}")

    @property
    def healthy(self) -> bool:
        return not self.broken and self.proc.is_alive()

    def _stop_process(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()              # SIGKILL also ends a stopped process
        self.proc.join(timeout=5)         # reap it: no zombie left behind

    def close(self) -> None:
        if self.proc.is_alive() and not self.broken:
            with contextlib.suppress(OSError):      # BrokenPipeError among them
                self.cmd.send(CloseCommand())
            self.proc.join(timeout=5)
        self._stop_process()
        for conn in (self.cmd, self.done):
            conn.close()


class _Done:
    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class InlineDevice:
    """Fallback: the same step function run in the scheduler's own process (serial, no overlap)."""

    kind = "cpu-inline"
    label = "CPU, in-process fallback (no device process: serial, no real overlap)"
    lanes = BASE_LANES
    pads_batches = False
    healthy = True

    def __init__(self, init: DeviceInit, reason: str = "") -> None:
        torch.set_num_threads(init.config.cpu_threads)
        _, self.runner = build_runner(init)
        self.results = np.zeros((init.num_buffers, init.config.max_batch_size), dtype=np.int64)
        self.buf = 0
        self.timeline = Timeline(enabled=False)
        if reason:
            self.label = f"{self.label} [device process failed to start: {reason[:160]}]"

    def begin_run(self, timeline: Timeline) -> None:
        self.timeline = timeline

    def end_run(self) -> None:
        pass

    def upload(self, metas: list[StepMeta]) -> list[StepMeta]:
        return list(metas)

    def forward(self, meta: StepMeta) -> ForwardOutput:
        self.buf = (self.buf + 1) % len(self.results)
        spans = execute_step(self.runner, meta, self.results[self.buf])
        self.timeline.add_stamped(spans)
        return ForwardOutput(meta.step, meta.num_rows, _Done(), self.results[self.buf])

    def close(self) -> None:
        pass
