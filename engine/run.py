"""One run pipeline: a workload and the loops to compare become one run record.

``compare_loops`` is the only maker of our runs' records (the CLI, the scheduler process, the
benchmarks): every loop runs the same prompts, sampling and arrival times, each from an empty prefix
cache. ``session_record`` makes a served session's. Both type the config with ``run_config``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

from engine.config import EngineConfig, LoopSpec, SamplingParams
from engine.workloads import Workload
from record.host_load import machine_load
from record.metrics import compute_metrics, latency_summary
from record.recorder import Span, Timeline
from record.run_record import make_record, run_dict
from record.schema import GPU_LANES, OURS, OutputDict, RecordDict, RunConfig, RunDict

if TYPE_CHECKING:
    from engine.engine import Engine

WARM_TOKENS = 16            # new tokens of each loop's warm-up run (every shape, not measured)


class LoopWatch(Protocol):
    """Who watches the loops of a comparison as they run (the scheduler process streams each
    loop's spans to the page). ``loop`` wraps one loop's run and gives the timeline it records
    into (None: the engine's own); ``finished`` hears each run as it ends (every repeat's)."""

    def loop(self, index: int, spec: LoopSpec) -> AbstractContextManager[Timeline | None]: ...

    def finished(self, index: int, run: RunDict) -> None: ...


@dataclass(frozen=True)
class RunOptions:
    """How a comparison runs, beside what it runs."""

    warm_up: bool = False           # every loop once first, not measured (first-use costs)
    # Runs of each loop, the loops alternating (a burst of other load hits them alike); the
    # record keeps each loop's run of median time, or with ``quietest`` the round (one run of
    # each loop, side by side in time) in which other programs took the least of the machine.
    repeats: int = 1
    quietest: bool = False
    profile_steps: tuple[int, int] | None = None    # CUDA: kernel lanes for these steps
    should_stop: Callable[[], bool] | None = None   # asked every iteration: end the run
    watch: LoopWatch | None = None                  # None: each loop records as the engine does

    def __post_init__(self) -> None:
        if not (isinstance(self.repeats, int) and self.repeats >= 1):
            raise ValueError(f"RunOptions.repeats must be a whole number >= 1, got "
                             f"{self.repeats!r}")


def compare_loops(engine: Engine, work: Workload, loops: Sequence[LoopSpec],
                  params: SamplingParams | list[SamplingParams] | None = None,
                  options: RunOptions = RunOptions()) -> RecordDict:
    """Run ``work`` in each of ``loops`` on ``engine``, one after another (``options.repeats``
    rounds of them); the record of it. ``params``: the requests' sampling where the caller has it
    (else the workload's, with stop tokens from a probe run where it asks for them)."""
    from engine.models.prompts import has_chat_template
    from engine.workloads import stop_params_from_probe

    # A model without a chat template (a base model) takes the prompts as plain text.
    chat = work.chat and has_chat_template(engine.tokenizer)
    prompts = work.prompts(engine)
    if options.warm_up:
        _warm_up(engine, prompts, loops, work, options.should_stop)
    if params is None and work.stop_early:
        _stop_if(options.should_stop)
        new = work.max_new_tokens
        params = stop_params_from_probe(engine, prompts, new, lo=new // 4, hi=new,
                                        temperature=work.temperature, chat=chat)[0]
    params = params if params is not None else work.sampling()
    times = arrival_times(work)
    rounds: list[list[tuple[float, RunDict]]] = []       # (wall s, run) of each loop, a round
    for _ in range(options.repeats):
        rounds.append([])
        for index, spec in enumerate(loops):
            _stop_if(options.should_stop)
            # Like with like: no loop finds the prompts the one before it (or the probe) cached.
            engine.clear_prefix_cache()
            watch = options.watch
            with watch.loop(index, spec) if watch else nullcontext() as timeline:
                result = engine.generate(
                    prompts, params, spec, timeline=timeline, profile_steps=options.profile_steps,
                    should_stop=options.should_stop, arrivals=times, chat=chat)
            run = result.to_run_dict()
            if watch:
                watch.finished(index, run)
            rounds[-1].append((result.wall_s, run))
    if options.quietest:
        runs = [run for _, run in min(rounds, key=_round_load)]
    else:                                                # each loop's run of median time
        runs = [sorted((r[i] for r in rounds), key=lambda pair: pair[0])[len(rounds) // 2][1]
                for i in range(len(loops))]
    return _record(engine.env_info(), run_config(engine.config, work, chat), runs)


def session_record(env: dict[str, Any], config: RunConfig, loop: LoopSpec, label: str,
                   spans: Sequence[Span], outputs: Sequence[OutputDict],
                   spans_dropped: int = 0) -> RecordDict:
    """A served session as a record: its spans (``spans_dropped`` older ones left out of its
    window), the requests that finished, and metrics from both. ``config`` is ``run_config``'s
    of the session's engine (the scheduler process sends it when the session starts)."""
    metrics = {**compute_metrics(spans, list(outputs), GPU_LANES),
               **latency_summary(list(outputs))}
    run = run_dict(loop.loop, loop.decode_steps, label, spans, metrics, outputs)
    run["extra_cpu_us"] = loop.extra_cpu_us
    if spans_dropped:
        run["spans_dropped"] = spans_dropped
    return _record(env, config, [run])


def run_config(engine: EngineConfig, work: Workload | None, chat: bool = False) -> RunConfig:
    """The record's config: the engine's settings under ``EngineConfig``'s names, the workload
    under ``Workload``'s (None: a served session, whose clients choose their own), ``chat`` as
    it ran."""
    settings = {f.name: getattr(engine, f.name) for f in fields(EngineConfig)}
    hazards = settings.pop("hazards")
    off = tuple(f.name if value is True else f"{f.name}={value}" for f in fields(hazards)
                if (value := getattr(hazards, f.name)) not in (False, 0))
    if work is None:
        return RunConfig(**settings, hazards=off, requests=None, prompt_tokens=None,
                         prompt_words=None, max_new_tokens=None, temperature=None,
                         ignore_eos=False, stop_tokens_from_probe=False, chat=chat,
                         shared_prefix=0, request_rate=None, arrivals_file=None, served=True)
    trace = list(work.arrivals)
    words = work.prompt_words or None       # a prompt in words has no one token length
    given = trace and all(a.prompt_tokens for a in trace)   # a trace's own lengths
    rate = work.request_rate            # an infinite rate is a burst: all at t=0, as without
    return RunConfig(
        **settings, hazards=off, requests=work.requests,
        prompt_tokens=None if words or given else work.prompt_tokens, prompt_words=words,
        max_new_tokens=None if trace and all(a.output_tokens for a in trace)
        else work.max_new_tokens,
        temperature=work.temperature, ignore_eos=work.ignore_eos,
        stop_tokens_from_probe=work.stop_early, chat=chat, shared_prefix=work.shared_prefix,
        request_rate=rate if rate is not None and math.isfinite(rate) else None,
        arrivals_file=work.arrivals_file, served=False)


def arrival_times(work: Workload) -> list[float] | None:
    """When each request arrives, seconds from the run's start: a trace's times, else Poisson
    times at the workload's rate (seeded: the same for every loop); None: all at t=0."""
    from engine.scheduler.arrivals import check_rate, poisson_times

    if work.arrivals:
        return [a.at_s for a in work.arrivals]
    if work.request_rate is None:
        return None
    return poisson_times(check_rate(work.request_rate), work.requests, work.seed)


def _record(env: dict[str, Any], config: RunConfig, runs: list[RunDict]) -> RecordDict:
    """Where every record of our runs is made: the engine named, the config typed."""
    return make_record({**env, "engine": OURS}, config, runs)


def _warm_up(engine: Engine, prompts: list, loops: Sequence[LoopSpec], work: Workload,
             should_stop: Callable[[], bool] | None) -> None:
    """Every loop once on the same prompts (the same prefill shapes, decode batch sizes and
    code paths), not measured, so no measured run pays first-use costs."""
    warm = SamplingParams(max_new_tokens=min(WARM_TOKENS, work.max_new_tokens), ignore_eos=True)
    for spec in loops:
        engine.generate(prompts, warm, spec, should_stop=should_stop)


def _stop_if(should_stop: Callable[[], bool] | None) -> None:
    from engine.scheduler.scheduler import RunCancelled

    if should_stop is not None and should_stop():
        raise RunCancelled("the run was stopped")


def _round_load(round_: list[tuple[float, RunDict]]) -> tuple[bool, float]:
    """How busy the machine was for a round's runs: too busy to compare, then other programs'
    largest share of the cores (a run that measured nothing counts as quiet)."""
    loads = [machine_load(run) for _, run in round_]
    return (any(load is not None and load.busy for load in loads),
            max((load.other_share or 0.0 for load in loads if load is not None), default=0.0))
