"""Our engine's side of the peer benchmark: the same work as the peers', in both loops.

``Engine(EngineConfig(model, device="cuda", cuda_graph=True, max_batch_size=B, ...))``, every
other setting at its default. Its engines are built once per call and timed at the call's start
and end, recording on and off alternating, so the host's drift shows and hits every setting alike.
"""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from record.schema import Loop
from studies.peers import table as peer_table
from studies.peers.work import PeerWork

LOOPS = (Loop.NORMAL, Loop.OVERLAP)       # the loops every engine runs
# Our configuration as the tables name it: EngineConfig's defaults on CUDA, as the CLI and the
# benchmarks run (the page leaves torch.compile off: ui/live_runs.build_request).
OURS_CONFIG = "CUDA graphs, compiled decode step (the engine's defaults)"
RECORDING = ("on", "off")


class OursTimed:
    """Our engines for every (shape, B) of ``work``, built once; ``time(when)`` runs each setting
    ``work.repeats`` times; ``rows()`` pools every timing into one row per setting."""

    def __init__(self, work: PeerWork, device: str = "cuda") -> None:
        self.work, self.device = work, device
        self.stack = ExitStack()
        self.engines: dict[tuple[str, int], Any] = {}
        self.start_s: dict[str, float] = {}
        self.timed: dict[tuple, list[tuple[float, Any]]] = {}
        self.by_timing: dict[tuple, dict[str, float]] = {}

    def __enter__(self) -> OursTimed:
        from engine import Engine
        from engine.config import EngineConfig
        for model in self.work.models:
            for batch in self.work.batches:
                started = time.perf_counter()
                cfg = EngineConfig(model=model, device=self.device,
                                   cuda_graph=self.device == "cuda", max_batch_size=batch,
                                   max_seq_len=self.work.max_seq_len)
                self.engines[(model, batch)] = self.stack.enter_context(Engine(cfg))
                self.start_s[f"{model} B={batch}"] = time.perf_counter() - started
                for loop in LOOPS:                      # warm-up: first-use costs, not timed
                    for rec in RECORDING:
                        self._one(model, batch, loop, rec)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def _one(self, model: str, batch: int, loop: Loop, rec: str) -> tuple[float, Any]:
        from engine.config import LoopSpec
        from record.recorder import Timeline
        eng = self.engines[(model, batch)]
        work = self.work.workload(model, batch)
        eng.clear_prefix_cache()         # every run from the same memory: no cached prompts
        timeline = None if rec == "on" else Timeline(enabled=False)   # None: the default, on
        prompts, params = work.prompts(eng), work.sampling()
        start = time.perf_counter()
        result = eng.generate(prompts, params, LoopSpec(loop), timeline=timeline)
        return time.perf_counter() - start, result

    def time(self, when: str) -> None:
        """Every setting ``work.repeats`` times; each round alternates which of recording on and
        off goes first, so neither always follows the other."""
        for (model, batch) in self.engines:
            got: dict[tuple, list] = {}
            for i in range(self.work.repeats):
                for loop in LOOPS:
                    for rec in RECORDING if i % 2 == 0 else RECORDING[::-1]:
                        got.setdefault((model, batch, loop, rec), []).append(
                            self._one(model, batch, loop, rec))
            for key, runs in got.items():
                self.timed.setdefault(key, []).extend(runs)
                tokens = sum(len(o.token_ids) for o in runs[0][1].outputs)
                self.by_timing.setdefault(key, {})[when] = statistics.median(
                    tokens / s for s, _ in runs)

    def rows(self) -> list[dict[str, Any]]:
        from record.metrics import cpu_phase_times
        rows = []
        for (model, batch, loop, rec), runs in self.timed.items():
            tokens = sum(len(o.token_ids) for o in runs[0][1].outputs)
            figures = None
            if rec == "on":
                figures = {key: statistics.median(r.metrics[key] for _, r in runs)
                           for key in ("steady_step_us", "t_fwd_us", "t_cpu_us")}
                phases = [cpu_phase_times(r.timeline) for _, r in runs]
                figures["cpu_phases_us"] = {p: statistics.median(ph.get(p, 0.0) for ph in phases)
                                            for p in sorted({p for ph in phases for p in ph})}
            setting = peer_table.Setting(peer_table.OURS, OURS_CONFIG, model, loop, batch, rec)
            row = peer_table.speed_row(setting, [s for s, _ in runs], tokens, figures,
                                       "these runs (the run's own metrics)")
            row["loop_s_median"] = statistics.median(r.wall_s for _, r in runs)
            row["tok_s_by_timing"] = self.by_timing[(model, batch, loop, rec)]
            rows.append(row)
        return rows

    def summary(self) -> dict[str, Any]:
        return {"start_s": self.start_s,
                "config": next(iter(self.engines.values())).config.to_dict()
                if self.engines else {}}


def save_our_record(work: PeerWork, model: str, record_dir: Path, commit: str) -> Path:
    """Our two loops on the record's workload (the median of ``record_repeats`` runs, recording
    on), as one record beside the peers', through the one run pipeline."""
    from engine import Engine
    from engine.config import EngineConfig, LoopSpec
    from engine.provenance import engine_commit
    from engine.run import RunOptions, compare_loops
    from record.run_record import save_record
    from record.schema import OURS_DETAIL
    commit = commit or engine_commit() or "unknown"
    batch = work.record_batch
    cfg = EngineConfig(model=model, device="cuda", cuda_graph=True, max_batch_size=batch,
                       max_seq_len=work.max_seq_len)
    with Engine(cfg) as eng:
        record = compare_loops(eng, work.workload(model, batch, work.record_tokens),
                               [LoopSpec(loop) for loop in LOOPS],
                               options=RunOptions(warm_up=True, repeats=work.record_repeats))
        for run in record["runs"]:
            run["label"] = f"{run['loop']} ({OURS_DETAIL} {commit[:7]}, {eng.device_label()})"
    record["env"]["engine_commit"] = commit
    name = peer_table.record_name(record["env"]["device_name"], peer_table.OURS, model, batch)
    return save_record(record, record_dir / name)
