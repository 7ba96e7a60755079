"""Our engine's side of the peer benchmark: the same work as the peers', in both loops.

``Engine(EngineConfig(model, device="cuda", cuda_graph=True, max_batch_size=B, max_seq_len=...))``
with every other setting at its default (on CUDA: the decode step compiled; the page alone turns
that off), with the span recorder on (as the page runs) and off, interleaved; and our record
beside the peers' (both loops on the record's workload).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from record.schema import Loop
from studies.peers import table as peer_table
from studies.peers.work import PeerWork, prompts_for

LOOPS = (Loop.NORMAL, Loop.OVERLAP)       # the loops every engine runs
# Our configuration as the tables name it: EngineConfig's defaults on CUDA, as the CLI and the
# benchmarks run (the page leaves torch.compile off: ui/live_runs.build_request).
OURS_CONFIG = "CUDA graphs, compiled decode step (the engine's defaults)"


def run_ours(work: PeerWork, model: str, batch: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Our rows for one shape and batch size (both loops, recording on every time and off every
    second time, interleaved), and the engine's config."""
    from bench.decode import fresh
    from engine import Engine
    from engine.config import EngineConfig, LoopSpec, SamplingParams
    from record.metrics import cpu_phase_times
    from record.recorder import Timeline

    cfg = EngineConfig(model=model, device="cuda", cuda_graph=True, max_batch_size=batch,
                       max_seq_len=work.max_seq_len)
    prompts = prompts_for(work, model, batch)
    params = SamplingParams(max_new_tokens=work.new_tokens, temperature=0.0, ignore_eos=True)
    settings = [(loop, rec) for loop in LOOPS for rec in ("on", "off")]

    def one(loop: Loop, rec: str):
        timeline = None if rec == "on" else Timeline(enabled=False)   # None: the default, on
        eng_ = fresh(eng)
        start = time.perf_counter()
        result = eng_.generate(prompts, params, LoopSpec(loop), timeline=timeline)
        return time.perf_counter() - start, result

    started = time.perf_counter()
    with Engine(cfg) as eng:
        start_s = time.perf_counter() - started
        for loop, rec in settings:
            one(loop, rec)                                   # warm-up
        timed: dict[tuple[Loop, str], list] = {key: [] for key in settings}
        for i in range(work.repeats):        # recording off (the recorder's cost) every second
            for loop, rec in settings:
                if rec == "on" or i % 2 == 1 or work.repeats == 1:
                    timed[(loop, rec)].append(one(loop, rec))
        config = eng.config.to_dict()
    rows = []
    for (loop, rec), runs in timed.items():
        tokens = sum(len(o.token_ids) for o in runs[0][1].outputs)
        figures = None
        if rec == "on":
            figures = {key: statistics.median(r.metrics[key] for _, r in runs)
                       for key in ("steady_step_us", "t_fwd_us", "t_cpu_us")}
            phases = [cpu_phase_times(r.timeline) for _, r in runs]
            figures["cpu_phases_us"] = {p: statistics.median(ph.get(p, 0.0) for ph in phases)
                                        for p in sorted({p for ph in phases for p in ph})}
        row = peer_table.speed_row(peer_table.OURS, OURS_CONFIG, model,
                                   loop, batch, rec, [s for s, _ in runs], tokens, figures,
                                   "these runs (the run's own metrics)")
        row["loop_s_median"] = statistics.median(r.wall_s for _, r in runs)
        rows.append(row)
    return rows, {"start_s": start_s, "config": config}


def save_our_record(work: PeerWork, model: str, record_dir: Path, commit: str) -> Path:
    """Our two loops on the record's workload (the median of ``record_repeats`` runs by time,
    recording on, as the page runs), as one record beside the peers'."""
    from engine import Engine
    from engine.config import EngineConfig, LoopSpec, SamplingParams
    from engine.provenance import engine_commit
    from record.run_record import make_record, save_record
    from record.schema import OURS_DETAIL
    commit = commit or engine_commit() or "unknown"
    batch = work.record_batch
    cfg = EngineConfig(model=model, device="cuda", cuda_graph=True, max_batch_size=batch,
                       max_seq_len=work.max_seq_len)
    prompts = prompts_for(work, model, batch)
    params = SamplingParams(max_new_tokens=work.record_tokens, ignore_eos=True)
    with Engine(cfg) as eng:
        runs = []
        for loop in LOOPS:
            eng.generate(prompts, params, LoopSpec(loop))                     # warm-up
            results = sorted((eng.generate(prompts, params, LoopSpec(loop))
                              for _ in range(work.record_repeats)), key=lambda r: r.wall_s)
            run = results[len(results) // 2].to_run_dict()
            run["label"] = f"{loop} ({OURS_DETAIL} {commit[:7]}, {eng.device_label()})"
            runs.append(run)
        config = {**eng.config_dict(), "requests": batch, "prompt_len": work.prompt_len,
                  "max_new_tokens": work.record_tokens, "ignore_eos": True, "extra_cpu_us": 0}
        env = {**eng.env_info(), "engine": "ours", "engine_commit": commit}
        record = make_record(env, config, runs)
    name = peer_table.record_name(env["device_name"], peer_table.OURS, model, batch)
    return save_record(record, record_dir / name)
