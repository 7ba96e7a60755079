"""``Engine``: the public API. Builds a device, runs ``generate`` through the scheduler, reports.

Prompts become requests for a fresh ``Scheduler`` per call (device, KV pool and slot table persist,
so a leak shows in the next run), and what happened becomes a ``RunResult``; ``serve`` runs the same
loops on a source that never ends by itself. A device that dies fails its run only."""

from __future__ import annotations

import gc
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch

from engine.config import OVERLAP, EngineConfig, LoopSpec, SamplingParams
from engine.provenance import engine_commit
from engine.scheduler.cache_manager import Pools
from engine.scheduler.checks import memory_problems
from engine.scheduler.device import Device
from engine.scheduler.intake import Intake, arrival_offsets_ns
from engine.scheduler.kv_cache import CACHE_OWNER, IdPool
from engine.scheduler.radix_cache import RadixCache
from engine.scheduler.request import Req, prefill_shapes
from engine.scheduler.scheduler import Scheduler, TokenSink
from engine.scheduler.sources import RequestSource, ScheduledSource
from record import host_load
from record.recorder import Span, Timeline
from record.run_record import run_dict
from record.schema import BASE_LANES, GPU_LANES, RunDict, loop_label


class EngineBusyError(RuntimeError):
    """``generate`` was called while another call on the same engine was still running."""


@dataclass
class RequestOutput:
    token_ids: list[int]
    text: str
    finish_reason: str
    prompt_tokens: int
    arrival_us: float
    first_token_us: float
    finish_us: float
    wasted_steps: int = 0
    token_us: list[float] = field(default_factory=list)   # when each token was delivered


Summary = tuple[dict[str, Any], dict[str, float]]     # (metrics, host report)


@dataclass
class RunResult:
    """What one ``generate`` call produced. ``metrics`` and ``host`` are worked out when first read,
    so a caller who times ``generate`` times the run, not the metrics."""

    loop: str                       # a record.schema.Loop: normal, overlap or multistep
    decode_steps: int               # k: decode forwards per scheduling iteration (1 unless multi-step)
    outputs: list[RequestOutput]
    timeline: list[Span]
    wall_s: float
    extra_cpu_us: int = 0           # CPU work added to each iteration (spent in process_last)
    label: str = ""
    lanes: list[str] = field(default_factory=lambda: list(BASE_LANES))  # the device's lanes
    extra_lanes: list[str] = field(default_factory=list)   # e.g. kernel lanes from torch.profiler
    memory: dict[str, Any] = field(default_factory=dict)   # KV pages per step (memory_record)
    mapping_faults: list[tuple[int, int, int, int]] = field(default_factory=list)  # debug_checks
    summarize: Callable[[], Summary] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def _summary(self) -> Summary:
        summary = self.summarize() if self.summarize is not None else ({}, {})
        self.summarize = None                  # what it needed can go
        return summary

    @property
    def metrics(self) -> dict[str, Any]:
        return self._summary[0]

    @property
    def host(self) -> dict[str, float]:
        return self._summary[1]

    @property
    def mode(self) -> str:
        """The loop's name, with k for multi-step ("multistep k=3"): for tables and logs."""
        return loop_label(self.loop, self.decode_steps)

    def to_run_dict(self) -> RunDict:
        run = run_dict(self.loop, self.decode_steps, self.label or self.mode, self.timeline,
                       self.metrics, [o.__dict__ for o in self.outputs],
                       lanes=self.lanes + self.extra_lanes,
                       gpu_lanes=[lane for lane in self.lanes if lane in GPU_LANES])
        run["extra_cpu_us"] = self.extra_cpu_us
        if self.host:
            run["host"] = self.host
        if self.memory:
            run["memory"] = self.memory
        return run


def _check_loop(loop: Any) -> None:
    if not isinstance(loop, LoopSpec):
        raise ValueError(f"loop must be an engine.config.LoopSpec, got {loop!r}")


def _pick_device(requested: str) -> str:
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA requested but not available on this machine (no GPU found by "
                           "torch); use device='cpu' or 'auto'")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


class Engine:
    def __init__(self, config: EngineConfig | None = None,
                 progress: Callable[[Any], None] | None = None) -> None:
        from engine.models.loader import PRESETS, load_tokenizer

        self.config = cfg = config or EngineConfig()
        self._progress = progress
        self.device_name = _pick_device(cfg.device)
        auto_dtype = "bfloat16" if self.device_name == "cuda" else "float32"
        self.dtype = auto_dtype if cfg.dtype == "auto" else cfg.dtype
        self._new_pools()
        self.totals = {"prefix_hit_tokens": 0, "retractions": 0}   # over this engine's runs
        self._running: Scheduler | None = None          # the run in progress (its counts)
        self.random_weights = cfg.model in PRESETS
        # Start-up is part of the user's wait: seconds per phase (load, warm_up incl. compile, capture).
        self.startup_s: dict[str, float] = {}
        t0 = time.perf_counter()
        self.device: Device = self._build_device()
        self.startup_s["total"] = time.perf_counter() - t0
        self.tokenizer = load_tokenizer(self.model_path, preset=self.random_weights)
        self._runs = 0
        self._busy = threading.Lock()
        # What loading made lives as long as the process: out of the collector's sight, so a full
        # collection scans only what runs allocate (SGLang's freeze_gc after its warm-up).
        gc.collect()
        gc.freeze()

    def _build_device(self) -> Device:
        cfg = self.config
        if self.device_name == "cuda":
            return self._build_cuda()
        from engine.devices.cpu_process import DeviceError, DeviceInit, InlineDevice, ProcessDevice
        from engine.models.loader import describe_model

        if cfg.compile:
            raise ValueError("compile=True needs a CUDA device (CPU mode never compiles: its "
                             "device process runs the plain-PyTorch model)")
        # Resolve and validate the model here, so a bad name fails before a process starts.
        self.spec, self.model_path, self.eos_ids = describe_model(cfg.model, self._progress)
        self._check_context()
        self.device_init = DeviceInit(cfg, self.model_path or cfg.model, self.dtype)
        if not cfg.cpu_device_process:
            return InlineDevice(self.device_init)
        try:
            return ProcessDevice(self.device_init)
        except (OSError, DeviceError) as err:
            # Say why in the label: a serial fallback must never pass for real overlap.
            return InlineDevice(self.device_init, reason=str(err).splitlines()[0])

    def _check_context(self) -> None:
        limit = self.spec.max_position_embeddings
        if self.config.max_seq_len > limit:
            raise ValueError(f"max_seq_len={self.config.max_seq_len} is longer than the model's "
                             f"context ({limit} positions); use shorter prompts or fewer new tokens")

    def _build_cuda(self) -> Device:
        from engine.devices.cuda import CudaDevice
        from engine.devices.runner import ModelRunner, RunnerConfig
        from engine.models.loader import load_model

        cfg = self.config
        t0 = time.perf_counter()
        loaded = load_model(cfg.model, "cuda", getattr(torch, self.dtype), cfg.seed,
                            self._progress)
        self.spec, self.model_path, self.eos_ids = loaded.spec, loaded.path, loaded.eos_token_ids
        self._check_context()
        runner = ModelRunner(loaded.model, RunnerConfig.of(cfg, getattr(torch, self.dtype),
                                                           torch.device("cuda")))
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        # Kernel JIT (Triton) and, with compile, the compiled regions for batch 1 and any batch;
        # then every prefill shape the scheduler can make (it pads prefills to these buckets):
        # eagerly here, or, with CUDA graphs, as the capture's own warm-up runs.
        runner.warm_up((1, 2), cfg.pages_per_seq)
        if not cfg.cuda_graph:
            runner.warm_up_prefill(*prefill_shapes(cfg), cfg.pages_per_seq)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        graphs = None
        if cfg.cuda_graph:
            from engine.devices.cuda_graph import StepGraphs
            graphs = StepGraphs(runner, cfg)
        self.startup_s.update(load=t1 - t0, warm_up=t2 - t1, capture=time.perf_counter() - t2)
        return CudaDevice(runner, cfg, graphs)

    def _replace_dead_device(self) -> None:
        if getattr(self.device, "healthy", True):
            return
        self.device.close()
        self.device = self._build_device()

    def generate(self, prompts, params: SamplingParams | list[SamplingParams] | None = None,
                 loop: LoopSpec = OVERLAP, *, timeline: Timeline | None = None,
                 profile_steps: tuple[int, int] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 arrivals: Sequence[float] | None = None, chat: bool = False) -> RunResult:
        """Run ``prompts`` (strings or token-id lists) to completion in ``loop``. ``arrivals``: each
        request's arrival, seconds from the start (None: all at t=0). ``chat``: through the chat
        template. ``profile_steps=(a, b)``: kernel lanes for steps a..b (CUDA). ``should_stop()``
        is asked every iteration; True ends the run with ``RunCancelled``."""
        _check_loop(loop)
        busy = ("this engine is already running a generate call (one at a time: use one Engine "
                "per thread, or wait for the first call)")
        with self._exclusive(busy), _no_collection():
            self._replace_dead_device()
            reqs = self.intake().requests(prompts, params, chat)
            timeline = timeline or Timeline(enabled=self.config.record_timeline)
            capture = None
            if profile_steps is not None:
                if self.device_name != "cuda":
                    raise ValueError("kernel-level capture (profile_steps) needs a CUDA device")
                from engine.devices.kernel_capture import KernelCapture
                capture = KernelCapture(*profile_steps)
            for req, offset in zip(reqs, arrival_offsets_ns(arrivals, len(reqs))):
                req.arrival_ns = offset                # from the run's start, until it starts
            sched = Scheduler(self.config, self.device, self.pools, timeline, loop,
                              ScheduledSource(reqs), capture=capture)
            device_pid = getattr(getattr(self.device, "proc", None), "pid", None)
            cpu_start = host_load.snapshot(host_load.our_pids(device_pid))
            timeline.t0_ns = time.perf_counter_ns()
            try:
                t0 = self._drive(sched, timeline, should_stop, reqs)
            finally:
                if capture is not None:
                    capture.stop()
            wall_s = (time.perf_counter_ns() - t0) / 1e9
            cpu_end = host_load.snapshot(list(cpu_start.ours_s) if cpu_start else [])
            return self._result(loop, reqs, sched, timeline, wall_s,
                                (cpu_start, cpu_end, device_pid), capture)

    def serve(self, source: RequestSource, sink: TokenSink, loop: LoopSpec = OVERLAP, *,
              timeline: Timeline | None = None) -> None:
        """Serve requests from ``source`` until it is done, streaming tokens to ``sink``. The
        collector stays on (a session never ends), over the session's own objects."""
        _check_loop(loop)
        with self._exclusive("this engine is already running (one generate or serve at a time)"):
            self._replace_dead_device()
            timeline = timeline or Timeline(enabled=self.config.record_timeline)
            sched = Scheduler(self.config, self.device, self.pools, timeline, loop, source, sink)
            gc.collect()
            gc.freeze()
            try:
                self._drive(sched, timeline, None)
            finally:
                gc.unfreeze()

    @contextmanager
    def _exclusive(self, busy: str) -> Iterator[None]:
        """One run (or prefix-cache clearing) at a time; a second caller gets ``EngineBusyError``."""
        if not self._busy.acquire(blocking=False):
            raise EngineBusyError(busy)
        try:
            yield
        finally:
            self._busy.release()

    def _drive(self, sched: Scheduler, timeline: Timeline, should_stop: Callable[[], bool] | None,
               reqs: Sequence[Req] = ()) -> int:
        """Run ``sched`` to its end; returns when it started (``reqs``' arrival offsets become
        times). A failed run's held slots and pages are let go (the pools start clean)."""
        try:
            self.device.begin_run(timeline)
            t0 = time.perf_counter_ns()
            for req in reqs:
                req.arrival_ns += t0
            self._running = sched
            sched.run(should_stop)
            self.device.end_run()
            self._runs += 1
            return t0
        except BaseException:
            with suppress(Exception):          # the run's own error is the one to report
                self.device.end_run()
            self._new_pools()
            raise
        finally:
            self._running = None
            self.totals["prefix_hit_tokens"] += sched.memory.prefix_hit_tokens
            self.totals["retractions"] += sched.table.retractions

    def _new_pools(self) -> None:
        """Request slots, KV pages and the prefix cache over them, all free."""
        cfg = self.config
        self.pools = Pools(IdPool(cfg.max_batch_size, "request slot"),
                           IdPool(cfg.total_pages, "KV page"),
                           RadixCache(cfg.page_size) if cfg.prefix_cache else None)

    def intake(self) -> Intake:
        return Intake(self.config, self.tokenizer, self.spec.vocab_size, tuple(self.eos_ids),
                      self.pools.pages.total)

    def _texts(self, id_lists: list[list[int]]) -> list[str]:
        """The text of each output (ids past the tokenizer's vocabulary left out), in one call of a
        fast tokenizer's backend where it needs no clean-up."""
        if self.tokenizer is None:
            return ["" for _ in id_lists]
        n = len(self.tokenizer)
        known = [[t for t in ids if t < n] for ids in id_lists]
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None and not getattr(self.tokenizer, "clean_up_tokenization_spaces",
                                               True):
            return backend.decode_batch(known, skip_special_tokens=True)
        return [self.tokenizer.decode(ids, skip_special_tokens=True) for ids in known]

    def _result(self, spec: LoopSpec, reqs, sched, timeline, wall_s, host, capture) -> RunResult:
        t0 = timeline.t0_ns

        def us(ns: int) -> float:
            return (ns - t0) / 1000.0 if ns else 0.0

        texts = self._texts([r.output_ids for r in reqs])
        outputs = [RequestOutput(r.output_ids, text, r.finish_reason or "", r.prompt_len,
                                 us(r.arrival_ns), us(r.first_token_ns), us(r.finish_ns),
                                 r.wasted_steps, [(t - t0) / 1000.0 for t in r.token_ns])
                   for r, text in zip(reqs, texts)]
        spans = timeline.snapshot()
        counts = {"wasted_tokens": sched.wasted_tokens, "unsafe_frees": sched.table.unsafe_frees,
                  # hazard lab: tokens a switched-off guard let through
                  "unguarded_tokens": sched.unguarded_tokens,
                  **memory_metrics(sched)}
        kernel_spans, kernel_lanes = [], []
        if capture is not None:
            kernel_spans, kernel_lanes = capture.merged_spans(spans)
        result = RunResult(spec.loop, spec.decode_steps, outputs,
                           sorted(spans + kernel_spans, key=lambda s: s.start_us),
                           wall_s, spec.extra_cpu_us, lanes=list(self.device.lanes), extra_lanes=kernel_lanes,
                           memory=memory_record(sched, timeline, self.pools.pages.total),
                           mapping_faults=sched.mapping.faults if sched.mapping else [],
                           summarize=lambda: _summary(spans, outputs, wall_s, counts, *host))
        result.label = f"{result.mode} ({self.device_label()})"
        return result

    def device_label(self) -> str:
        return self.device.label

    def stats(self) -> dict[str, Any]:
        """Pools and counters. ``kv_pages_cached``: pages held only by the prefix cache, so after a
        run ``kv_pages_free + kv_pages_cached == kv_pages_total``."""
        slots, pages, cache = self.pools.slots, self.pools.pages, self.pools.cache
        return {"kv_pages_free": pages.num_free, "kv_pages_total": pages.total,
                "kv_pages_cached": cache.evictable() if cache else 0,
                "req_slots_free": slots.num_free, "req_slots_total": slots.total,
                "device": self.device_name, "device_kind": self.device.kind, "runs": self._runs,
                **self._totals_now()}

    def _totals_now(self) -> dict[str, int]:
        running = self._running
        if running is None:
            return dict(self.totals)
        return {"prefix_hit_tokens": self.totals["prefix_hit_tokens"]
                + running.memory.prefix_hit_tokens,
                "retractions": self.totals["retractions"] + running.table.retractions}

    def clear_prefix_cache(self) -> int:
        """Empty the prefix cache (loops compared on one engine each start from an empty one)."""
        with self._exclusive("the prefix cache can't be cleared while a run is on"):
            if self.pools.cache is None:
                return 0
            freed = self.pools.cache.evict_all()
            self.pools.pages.free(freed, CACHE_OWNER)
            return len(freed)

    def memory_problems(self) -> list[str]:
        """What is wrong with the slots, pages and prefix cache between runs (empty: nothing)."""
        return memory_problems(self.pools.slots, self.pools.pages, self.pools.cache)

    def env_info(self) -> dict[str, Any]:
        gpu = torch.cuda.get_device_name() if self.device_name == "cuda" else None
        return {"device_name": gpu or f"CPU ({platform.processor() or platform.machine()})",
                "device_kind": self.device.kind, "torch_version": str(torch.__version__),
                "python_version": sys.version.split()[0], "platform": platform.platform(),
                "date": time.strftime("%Y-%m-%d"), "dtype": self.dtype,
                "model": self.config.model, "random_weights": self.random_weights,
                "num_parameters": self.spec.num_parameters(),
                **({"engine_commit": commit} if (commit := engine_commit()) else {})}

    def close(self) -> None:
        self.device.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _summary(spans: list[Span], outputs: list[RequestOutput], wall_s: float,
             counts: dict[str, Any], cpu_start, cpu_end, device_pid) -> Summary:
    from record.metrics import compute_metrics, latency_summary

    out_dicts = [o.__dict__ for o in outputs]
    metrics = compute_metrics(spans, out_dicts, GPU_LANES, wall_us=wall_s * 1e6)
    metrics.update(latency_summary(out_dicts, wall_us=wall_s * 1e6))
    metrics.update(counts)
    host = host_load.host_report(cpu_start, cpu_end, device_pid,
                                 metrics["gpu_busy_frac"] * wall_s)
    return metrics, host


@contextmanager
def _no_collection():
    """No garbage collection during a ``generate`` call: a full collection would stall a step."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def memory_metrics(sched: Scheduler) -> dict[str, Any]:
    """A run's KV-memory numbers: prompt tokens served from the prefix cache, their share of the
    tokens admitted, and retractions. Without a prefix cache the first two are None (nothing to
    find them in is not the same as finding none)."""
    if not sched.cfg.prefix_cache:
        hits, rate = None, None
    else:
        hits, admitted = sched.memory.prefix_hit_tokens, sched.memory.fill_tokens
        rate = hits / admitted if admitted else 0.0
    return {"prefix_hit_tokens": hits, "prefix_hit_rate": rate,
            "retractions": sched.table.retractions,
            "kv_remaps": len(sched.mapping.faults) if sched.mapping else 0}


def memory_record(sched: Scheduler, timeline: Timeline, total_pages: int) -> dict[str, Any]:
    """What the KV-memory chart draws (``record.schema.MemoryTrace``)."""
    if not sched.memory_trace:
        return {}
    return {"total_pages": total_pages,
            "steps": [[step, round(timeline.to_us(t), 1), used, cached, free]
                      for step, t, used, cached, free in sched.memory_trace],
            "retractions": [[step, round(timeline.to_us(t), 1), rid]
                            for step, t, rid in sched.table.retraction_trace]}
