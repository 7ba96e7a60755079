"""What the scheduler process does with each request: ``SchedulerService.handle`` runs it and reports
through ``emit``. One engine per device, rebuilt only when the configuration changes. A live run is
``engine.run.compare_loops``, its spans streamed as ``SpanBatch``es; the web server draws."""

from __future__ import annotations

import statistics
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from engine.config import EngineConfig, LoopSpec, SamplingParams
from engine.scheduler_process.messages import (
    DeviceProfile,
    Event,
    LabFinished,
    LabRequest,
    LiveRunRequest,
    LoopFinished,
    Progress,
    Request,
    RequestFailed,
    RunFinished,
    ServeRequest,
    SpanBatch,
    Warmed,
    WarmRequest,
)
from record.recorder import Timeline
from record.schema import Loop, RunDict

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from engine.engine import Engine, RunResult
    from engine.models.hub import HubProgress

REPORT_S = 0.25                 # how often a live run's new spans are sent
MEASURE_RUNS = 3                # serial runs the GPU warm-up measures the device from (median)
LAB_MAX_SEQ_LEN = 96            # the lab's prompts are at most 48 tokens, and it asks for 12 more

Emit = Callable[[Event], None]


class SchedulerService:
    def __init__(self, device_cpus: tuple[int, ...] = ()) -> None:
        self.device_cpus = device_cpus      # where a CPU device process may run (placement)
        self.engines: dict[str, tuple[EngineConfig, Engine]] = {}      # device -> (config, Engine)
        self.references: dict[str, tuple[EngineConfig, Engine]] = {}   # the lab's reference engines
        self.probes: dict[tuple, list[SamplingParams]] = {}   # a workload's stop tokens, found once
        self.profiles: dict[tuple, DeviceProfile] = {}   # what a decode step cost in the probe

    # ---- dispatch -----------------------------------------------------------------------------
    def handle(self, request: Request, emit: Emit, cancelled: threading.Event) -> None:
        """Run ``request``; every outcome, failures included, ends in exactly one final event."""
        with _failures_said(emit):
            if isinstance(request, LiveRunRequest):
                self._live(request, emit, cancelled)
            elif isinstance(request, LabRequest):
                self._lab(request, emit)
            elif isinstance(request, WarmRequest):
                engine = self._engine(request.engine, self.engines)
                profile = None
                if request.probe is not None and request.probe.engine == request.engine:
                    self._stop_params(engine, request.probe)
                    profile = self.profiles.get(self._probe_key(engine, request.probe))
                    if engine.device_name == "cuda":
                        profile = self._warm_loops(engine, request.probe)
                emit(Warmed(engine.device_label(), profile))
            else:
                emit(RequestFailed("invalid", f"unknown request {type(request).__name__}"))

    def serve(self, request: ServeRequest, conn: Connection, emit: Emit) -> None:
        """A served session (``online.py``): it reads the pipe itself until StopServing, and ends
        in ServingStopped or in one RequestFailed."""
        from engine.scheduler_process.online import serve_session

        with _failures_said(emit):
            emit(Progress("loading"))
            engine = self._engine(request.engine, self.engines, emit)
            serve_session(engine, request, conn, emit)

    def close(self) -> None:
        for cache in (self.engines, self.references):
            for _, engine in cache.values():
                engine.close()
            cache.clear()

    # ---- engines ------------------------------------------------------------------------------
    def _engine(self, config: EngineConfig, cache: dict[str, tuple[EngineConfig, Engine]],
                emit: Emit | None = None) -> Engine:
        """The cached engine for this configuration; a different one on the device replaces it.
        A hub model's download progress goes out as ``Progress("download", detail=...)``."""
        from engine import Engine

        if self.device_cpus and not config.device_cpus:
            config = replace(config, device_cpus=self.device_cpus)
        key = config.device
        cached = cache.get(key)
        if cached and cached[0] == config:
            return cached[1]
        if cached:
            cache.pop(key)
            cached[1].close()
        engine = Engine(config, progress=_download_reporter(emit) if emit else None)
        cache[key] = (config, engine)
        return engine

    # ---- a live run ---------------------------------------------------------------------------
    def _live(self, request: LiveRunRequest, emit: Emit, cancelled: threading.Event) -> None:
        from engine.models.prompts import has_chat_template
        from engine.run import RunOptions, compare_loops

        emit(Progress("loading"))
        engine = self._engine(request.engine, self.engines, emit)
        params = None
        if request.workload.stop_early:
            emit(Progress("probe", detail=engine.device_label()))
            chat = request.workload.chat and has_chat_template(engine.tokenizer)
            params = self._stop_params(engine, request, chat)
        watch = _LiveWatch(emit, engine.device_label(), len(request.loops),
                           report=engine.device_name != "cuda")
        options = RunOptions(repeats=request.rounds, quietest=True,
                             should_stop=cancelled.is_set, watch=watch)
        record = compare_loops(engine, request.workload, request.loops, params, options)
        emit(RunFinished(record))

    def _warm_loops(self, engine: Engine, request: LiveRunRequest) -> DeviceProfile:
        """Run the request's loops once, as a click will, then measure the device from the median
        of ``MEASURE_RUNS`` warm serial runs: one slow first run would size the page's extra CPU
        work to nothing."""
        params = self._stop_params(engine, request)
        prompts = request.workload.prompts(engine)
        for spec in request.loops:                  # the click's own path, no extra CPU work
            engine.clear_prefix_cache()
            _run_reported(engine, prompts, params, replace(spec, extra_cpu_us=0))
        runs = []
        if any(spec.loop == Loop.NORMAL for spec in request.loops):
            for _ in range(MEASURE_RUNS):
                engine.clear_prefix_cache()
                runs.append(_run_reported(engine, prompts, params, LoopSpec(Loop.NORMAL)))
        engine.clear_prefix_cache()
        key = self._probe_key(engine, request)
        if runs:
            self.profiles[key] = _device_profile(engine, runs)
        return self.profiles[key]

    def _stop_params(self, engine: Engine, request: LiveRunRequest,
                     chat: bool = False) -> list[SamplingParams]:
        """Per-request stop tokens picked from a probe run of this workload (kept: the same
        workload on the same engine gives the same probe, so it runs once)."""
        from engine.workloads import stop_params_from_probe

        key = self._probe_key(engine, request, chat)
        if key not in self.probes:
            if len(self.probes) >= 32:
                self.probes.clear()
                self.profiles.clear()
            work = request.workload
            new = work.max_new_tokens
            self.probes[key], probe = stop_params_from_probe(
                engine, work.prompts(engine), new, lo=new // 4, hi=new,
                temperature=work.temperature, chat=chat)
            self.profiles[key] = _device_profile(engine, [probe])
        return self.probes[key]

    @staticmethod
    def _probe_key(engine: Engine, request: LiveRunRequest, chat: bool = False) -> tuple:
        """What a probe's stop tokens depend on: the engine, the prompts and their sampling,
        and whether they went through the chat template (not when the requests arrive: a probe
        runs them all at once)."""
        return (engine.config, replace(request.workload, request_rate=None, chat=False), chat)

    # ---- the hazard lab -----------------------------------------------------------------------
    def _lab(self, request: LabRequest, emit: Emit) -> None:
        from engine.lab.hazard_lab import run_hazard

        emit(Progress("loading"))
        # float32 everywhere: the faulty run is compared token for token with the normal loop,
        # and bfloat16 rounding can differ with batch composition, which lag one changes.
        base = EngineConfig(model=request.model, device=request.device,
                            max_seq_len=LAB_MAX_SEQ_LEN, seed=0, dtype="float32")
        reference = self._engine(replace(base, max_batch_size=min(base.max_batch_size, 4)),
                                 self.references)
        emit(Progress("run", "lab", detail=reference.device_label()))
        report = run_hazard(base, request.switch, seed=request.seed, ref_engine=reference)
        emit(LabFinished(asdict(report)))


def _device_profile(engine: Engine, runs: list[RunResult]) -> DeviceProfile:
    """What a decode step of serial ``runs`` on ``engine`` cost: the median over the runs of
    each one's forward and of the scheduler's own work."""
    env = engine.env_info()
    return DeviceProfile(env["device_kind"], env["device_name"], engine.config.model,
                         engine.config.max_batch_size, engine.config.cuda_graph,
                         statistics.median(r.metrics["t_fwd_us"] for r in runs),
                         statistics.median(r.metrics["t_cpu_us"] for r in runs))


@contextmanager
def _failures_said(emit: Emit) -> Iterator[None]:
    """Whatever ends the block early is said to the server as one ``RequestFailed``."""
    from engine.devices.cpu_process import DeviceError
    from engine.models.loader import ModelLoadError
    from engine.scheduler.scheduler import RunCancelled

    try:
        yield
    except RunCancelled:
        emit(RequestFailed("cancelled", "the run was stopped"))
    except DeviceError as error:
        emit(RequestFailed("device", str(error)))
    except ModelLoadError as error:                  # not found, offline, or a hub guard
        emit(RequestFailed("offline" if error.offline else "model", str(error)))
    except ValueError as error:                      # bad input, named by the engine
        emit(RequestFailed("invalid", str(error)))
    except Exception as error:  # noqa: BLE001 - the server must hear about anything
        emit(RequestFailed("error", f"{type(error).__name__}: {error}\n"
                                    f"{traceback.format_exc(limit=4)}"))


def _download_reporter(emit: Emit) -> Callable[[HubProgress], None]:
    """A hub download's progress as ``Progress("download")`` events, at most every ``REPORT_S``
    (and always its first and last word)."""
    last = [0.0]

    def report(progress: HubProgress) -> None:
        now = time.monotonic()
        if progress.stage != "downloading" or now - last[0] >= REPORT_S:
            last[0] = now
            emit(Progress("download", detail=progress.describe(),
                          done_mib=progress.done_bytes / 2**20,
                          total_mib=progress.total_bytes / 2**20))

    return report


class _LiveWatch:
    """A live run's loops, watched for the page: each loop announced (``Progress``), its spans
    streamed as it runs (where ``report``, see ``_reporting``), its run sent when done."""

    def __init__(self, emit: Emit, label: str, total: int, report: bool) -> None:
        self.emit, self.label, self.total, self.report = emit, label, total, report

    @contextmanager
    def loop(self, index: int, spec: LoopSpec) -> Iterator[Timeline | None]:
        self.emit(Progress("run", spec.loop, index, self.total, self.label))
        timeline = Timeline()
        with _reporting(timeline, index, self.emit) if self.report else nullcontext():
            yield timeline

    def finished(self, index: int, run: RunDict) -> None:
        self.emit(LoopFinished(index, run))


def _run_reported(engine: Engine, prompts: list[Any],
                  params: SamplingParams | list[SamplingParams], loop: LoopSpec) -> RunResult:
    """One loop's run as a click makes it: its spans read as it runs (not on CUDA), sent nowhere."""
    timeline = Timeline()
    with _reporting(timeline, 0, lambda _: None) if engine.device_name != "cuda" else nullcontext():
        return engine.generate(prompts, params, loop=loop, timeline=timeline)


@contextmanager
def _reporting(timeline: Timeline, index: int, emit: Emit) -> Iterator[None]:
    """While the block runs, a reporter thread emits the spans recorded since its last look every
    ``REPORT_S`` as one ``SpanBatch``. Not on CUDA: there every moment the reporter holds the GIL
    is GPU idle time in the loop being measured; a GPU's spans arrive whole with ``LoopFinished``."""
    done = threading.Event()

    def report() -> None:
        cursor = 0
        while not done.wait(REPORT_S):
            spans, cursor = timeline.since(cursor)
            if spans:
                emit(SpanBatch(index, spans))

    reporter = threading.Thread(target=report, name="span-reporter", daemon=True)
    reporter.start()
    try:
        yield
    finally:
        done.set()
        reporter.join(timeout=max(1.0, 2 * REPORT_S))
