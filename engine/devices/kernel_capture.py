"""Kernel-level capture: torch.profiler over a window of steps, merged as ``kernels: <stream>``
lanes (an eager small model is launch-bound, and only kernels show it). A kernel belongs to the
step whose ``ProfilerStep#<step>`` annotation holds its launch; kernel times are placed on our
clock by GPU anchors, each step's first kernel against our engine-stream span of that step."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from contextlib import nullcontext

import torch

from record.recorder import Span
from record.schema import Lane, Phase


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
        """Kernel spans on our clock, and their lane names (one lane per CUDA stream)."""
        if not self.trace_path:
            return [], []
        try:
            with open(self.trace_path) as f:
                events = json.load(f).get("traceEvents", [])
        finally:
            os.unlink(self.trace_path)
        steps, launches, kernels = [], {}, []
        for e in events:
            cat, args = e.get("cat", ""), e.get("args") or {}
            if cat == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"):
                steps.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)),
                              int(e["name"].split("#")[1])))
            elif cat == "cuda_runtime" and "correlation" in args:
                launches[args["correlation"]] = float(e["ts"])   # host time of the launch
            elif cat in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
                kernels.append(e)
        owned = []                                # (step, kernel event)
        for e in kernels:
            launch = launches.get((e.get("args") or {}).get("correlation"))
            step = next((n for t0, t1, n in steps if launch is not None and t0 <= launch <= t1), -1)
            owned.append((step, e))
        shift = _gpu_shift(owned, spans)
        if shift is None:                         # no GPU anchor: through the host clock
            ours = {s.step: s.start_us for s in spans if s.lane == Lane.CPU and s.phase == Phase.LAUNCH}
            offsets = [ours[n] - t0 for t0, _, n in steps if n in ours]
            if not offsets:
                return [], []
            shift = statistics.median(offsets)
        merged, lanes = [], {}
        for step, e in owned:
            lane = lanes.setdefault(e.get("tid"), f"kernels: stream {e.get('tid')}")
            start = float(e["ts"]) + shift
            merged.append(Span(lane, str(e.get("name", ""))[:80], step, start,
                               start + float(e["dur"])))
        return merged, list(lanes.values())


def _gpu_shift(owned: list[tuple[int, dict]], spans: list[Span]) -> float | None:
    """Profiler GPU clock -> our clock: the median offset of each step's first kernel."""
    first: dict[int, float] = {}
    for step, e in owned:
        if step >= 0:
            first[step] = min(first.get(step, float("inf")), float(e["ts"]))
    ours: dict[int, float] = {}
    for s in spans:
        if s.lane == Lane.ENGINE_STREAM and s.step in first:
            ours[s.step] = min(ours.get(s.step, s.start_us), s.start_us)
    offsets = [ours[n] - first[n] for n in ours]
    return statistics.median(offsets) if offsets else None
