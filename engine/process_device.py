"""The CPU backend: a separate *device process* plays the GPU, so overlap is real on a CPU too.

A worker thread would not do: Python's GIL serialises the forward's op dispatch against the
scheduler's Python work (measured in DESIGN.md). A process has its own interpreter, so
forward(Bn) in the device process truly runs while the scheduler processes Bn-1.

The mapping to CUDA:

| CUDA                          | device process                                           |
|-------------------------------|----------------------------------------------------------|
| stream (in-order queue)       | the command pipe: steps execute in the order sent        |
| H2D metadata upload           | the step message (pickled numpy arrays)                  |
| model, KV cache, token_pool   | owned by the child; the parent never holds them          |
| pinned host result buffers    | a ring of shared-memory buffers the child writes into     |
| ``copy_done`` event           | a "done" message per step; ``synchronize()`` waits for it |

The child stamps its own spans with ``perf_counter_ns`` (one system-wide clock on Linux).
Where a process cannot be started, ``InlineDevice`` runs the same step function in-process
(serial: no overlap), and says so in its label.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from engine.cuda_device import ForwardOutput
from engine.request import StepMeta
from record.timeline import Timeline


@dataclass(frozen=True)
class DeviceInit:
    """What the device process needs to build its runner (plain values: it is pickled)."""

    model: str
    dtype: str
    seed: int
    threads: int
    max_slots: int
    max_seq_len: int
    num_pages: int
    page_size: int
    max_rows: int
    num_buffers: int


def build_runner(init: DeviceInit):
    from engine.loader import load_model
    from engine.runner import ModelRunner

    dtype = getattr(torch, init.dtype)
    loaded = load_model(init.model, "cpu", dtype, init.seed)
    runner = ModelRunner(loaded.model, init.max_slots, init.max_seq_len, init.num_pages,
                         init.page_size, dtype, torch.device("cpu"))
    return loaded, runner


def execute_step(runner, meta: StepMeta, out: np.ndarray) -> list[tuple]:
    """Run one step on the CPU "device"; returns spans
    (lane, phase, step, t0, t1, rows, tokens, request ids)."""
    n, spans = meta.num_rows, []
    t0 = time.perf_counter_ns()
    ints, floats = torch.from_numpy(meta.ints), torch.from_numpy(meta.floats)
    runner.write_prompts(torch.from_numpy(meta.prompt_writes))
    t1 = time.perf_counter_ns()
    rids = list(meta.rids)
    spans.append(("scheduler_stream", "upload", meta.step, t0, t1, n, meta.prompt_writes.shape[1],
                  rids))
    logits = runner.forward_logits(ints, meta.seq_len, meta.kv_pages)
    t2 = time.perf_counter_ns()
    next_tokens = runner.sample_and_store(logits, ints, floats, meta.all_greedy)
    t3 = time.perf_counter_ns()
    out[: next_tokens.shape[0]] = next_tokens.numpy()      # the "D2H copy" into shared memory
    t4 = time.perf_counter_ns()
    tokens = meta.prompt_writes.shape[1] if meta.kind == "prefill" else n
    spans += [("engine_stream", meta.kind, meta.step, t1, t2, n, tokens, rids),
              ("engine_stream", "sample", meta.step, t2, t3, n, n, rids),
              ("scheduler_stream", "copy", meta.step, t3, t4, n, n, rids)]
    return spans


def device_main(init: DeviceInit, cmd_conn, done_conn, shared) -> None:
    """The device process: build the runner, then execute steps in order until told to stop."""
    try:
        torch.set_num_threads(init.threads)
        _, runner = build_runner(init)
        results = np.frombuffer(shared, dtype=np.int64).reshape(init.num_buffers, init.max_rows)
        done_conn.send(("ready", None))
    except Exception:  # noqa: BLE001 - report any start-up failure to the parent
        done_conn.send(("error", traceback.format_exc()))
        return
    while True:
        msg = cmd_conn.recv()
        if msg[0] == "close":
            return
        _, meta, buf = msg
        try:
            spans = execute_step(runner, meta, results[buf])
            done_conn.send(("done", meta.step, spans))
        except Exception:  # noqa: BLE001
            done_conn.send(("error", traceback.format_exc()))


class _StepDone:
    """Plays a CUDA event for one step: ``synchronize()`` blocks until the child says it is done."""

    def __init__(self, device: ProcessDevice, step: int) -> None:
        self.device, self.step = device, step

    def synchronize(self) -> None:
        self.device.wait_done(self.step)

    def query(self) -> bool:
        return self.step in self.device.done_steps


class ProcessDevice:
    kind = "cpu-process"
    label = "CPU, separate device process (forward overlaps the scheduler)"

    def __init__(self, init: DeviceInit, single_buffer: bool = False, start_timeout_s: float = 300):
        ctx = mp.get_context("spawn")   # never fork a process that may already run server threads
        self.num_buffers = 1 if single_buffer else init.num_buffers
        init = DeviceInit(**{**init.__dict__, "num_buffers": self.num_buffers})
        self.shared = ctx.RawArray("b", self.num_buffers * init.max_rows * 8)
        self.results = np.frombuffer(self.shared, dtype=np.int64).reshape(self.num_buffers,
                                                                          init.max_rows)
        cmd_r, self.cmd = ctx.Pipe(duplex=False)
        self.done, done_w = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=device_main, args=(init, cmd_r, done_w, self.shared),
                                daemon=True, name="overlap-demo-device")
        self.proc.start()
        self.timeline = Timeline(enabled=False)
        self.done_steps: set[int] = set()
        self.buf = 0
        if not self.done.poll(start_timeout_s):
            self.close()
            raise RuntimeError("the CPU device process did not start in time")
        kind, payload = self.done.recv()
        if kind != "ready":
            self.close()
            raise RuntimeError(f"the CPU device process failed to start:\n{payload}")

    def begin_run(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.done_steps.clear()

    def end_run(self) -> None:
        pass

    def upload(self, metas: list[StepMeta]) -> list[StepMeta]:
        return metas                    # the metadata travels with each step command

    def forward(self, meta: StepMeta) -> ForwardOutput:
        self.buf = (self.buf + 1) % self.num_buffers
        self.cmd.send(("step", meta, self.buf))   # enqueue: returns before the forward runs
        return ForwardOutput(meta.step, meta.num_rows, _StepDone(self, meta.step),
                             self.results[self.buf])

    def wait_done(self, step: int) -> None:
        while step not in self.done_steps:
            while not self.done.poll(1.0):
                if not self.proc.is_alive():
                    raise RuntimeError("the CPU device process died")
            msg = self.done.recv()
            if msg[0] == "error":
                raise RuntimeError(f"the CPU device process failed:\n{msg[1]}")
            self.done_steps.add(msg[1])
            self.timeline.add_device_spans(msg[2])

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                self.cmd.send(("close",))
            except (BrokenPipeError, OSError):
                pass
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()


class _Done:
    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class InlineDevice:
    """Fallback: the same step function run in the scheduler's own process (serial, no overlap)."""

    kind = "cpu-inline"
    label = "CPU, in-process fallback (no device process: serial, no real overlap)"

    def __init__(self, init: DeviceInit) -> None:
        torch.set_num_threads(init.threads)
        _, self.runner = build_runner(init)
        self.results = np.zeros((init.num_buffers, init.max_rows), dtype=np.int64)
        self.buf = 0
        self.timeline = Timeline(enabled=False)

    def begin_run(self, timeline: Timeline) -> None:
        self.timeline = timeline

    def end_run(self) -> None:
        pass

    def upload(self, metas: list[StepMeta]) -> list[StepMeta]:
        return metas

    def forward(self, meta: StepMeta) -> ForwardOutput:
        self.buf = (self.buf + 1) % len(self.results)
        spans = execute_step(self.runner, meta, self.results[self.buf])
        self.timeline.add_device_spans(spans)
        return ForwardOutput(meta.step, meta.num_rows, _Done(), self.results[self.buf])

    def close(self) -> None:
        pass
