"""Kernel-level capture: torch.profiler over a short window of steps, merged as extra lanes.

Step-level CUDA events say *when* a forward ran, not how densely. In eager mode a small model is
launch-bound: the forward's span stretches to the CPU's launch time while the kernels inside are
sparse. Only a kernel-level view shows those gaps, so for a window of steps we run torch.profiler
and merge its kernels into the run's timeline as lanes named ``kernels: <stream>``.

Alignment: each launch in the window is annotated ``ProfilerStep#<step>``; the profiler's clock is
mapped onto ours by the mean offset between those annotations and our ``cpu/launch`` spans.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from contextlib import nullcontext

import torch

from engine.timeline import Span


class KernelCapture:
    def __init__(self, first_step: int, last_step: int) -> None:
        if not 1 <= first_step <= last_step:
            raise ValueError(f"profile window must satisfy 1 <= first <= last, got "
                             f"{first_step}..{last_step}")
        self.first, self.last = first_step, last_step
        self.profiler = None
        self.done = False
        self.trace_path = ""

    def on_step(self, step: int) -> None:
        """Called as each step is scheduled: start at ``first``, stop once ``last`` has run."""
        if self.profiler is None and not self.done and step >= self.first:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            self.profiler = torch.profiler.profile(activities=acts)
            self.profiler.__enter__()
        elif self.profiler is not None and step > self.last:
            self.stop()

    def annotate(self, step: int):
        if self.profiler is None:
            return nullcontext()
        return torch.profiler.record_function(f"ProfilerStep#{step}")

    def stop(self) -> None:
        if self.profiler is None:
            return
        torch.cuda.synchronize()   # outside the window: let the last step's kernels finish
        self.profiler.__exit__(None, None, None)
        fd, self.trace_path = tempfile.mkstemp(suffix=".json", prefix="kernels_")
        os.close(fd)
        self.profiler.export_chrome_trace(self.trace_path)
        self.profiler, self.done = None, True

    def merged_spans(self, spans: list[Span]) -> tuple[list[Span], list[str]]:
        """Kernel spans on our clock, and their lane names."""
        from engine.trace import import_profiler_trace

        if not self.trace_path:
            return [], []
        try:
            run = import_profiler_trace(self.trace_path)
        finally:
            os.unlink(self.trace_path)
        ours = {s.step: s.start_us for s in spans if s.lane == "cpu" and s.phase == "launch"}
        theirs = {s["step"]: s["start_us"] for s in run["spans"]
                  if s["lane"] == "cpu" and s["phase"].startswith("ProfilerStep#")}
        offsets = [ours[k] - theirs[k] for k in theirs if k in ours]
        if not offsets:
            return [], []
        shift = statistics.median(offsets)
        lanes = {lane: f"kernels: {lane}" for lane in run["gpu_lanes"]}
        merged = [Span(lanes[s["lane"]], s["phase"], s["step"], s["start_us"] + shift,
                       s["end_us"] + shift) for s in run["spans"] if s["lane"] in lanes]
        return merged, list(lanes.values())
