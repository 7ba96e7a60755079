"""Our engine beside SGLang and Mini-SGLang, each peer at its best: the same work on the same GPU.

    bash scripts/prepare_peer.sh PATH/TO/mini-sglang          # Mini-SGLang: .whl-peer/
    python -m bench --peer mini-sglang --minisgl .whl-peer/python --site /tmp/site
    python -m bench --peer sglang --sglang-site /tmp/sglang-site   # scripts/sglang_payload.sh's set
    python -m bench --peer all ... --models qwen2.5-0.5b-shape llama-3.1-8b-shape

The work: a model preset's shape with random bf16 weights (``config.json`` for a peer, our preset
for us), CUDA graphs, greedy, ``ignore_eos``, the same token-id prompts for every engine
(``--prompt-len`` tokens each, B prompts admitted at once), ``--new-tokens`` new tokens each.
Each engine's ``generate`` is timed end to end, as a user calls it, ``--repeats`` times after a
warm-up; rows report the median with the range and every run.

- A peer runs in a process per configuration, shape and loop (its overlap switch is fixed when it
  starts): ``bench/peer_minisgl.py`` and ``bench/peer_sglang.py``, in each configuration of
  ``bench/peer_configs.py`` (what its users would choose for this work). Its timed runs are its
  code as it is; runs with this project's recorder hooked into its loop (``bench/peer_hook.py``,
  ``bench/peer_sglang_hook.py``), interleaved with them, give its decode step, forward and CPU
  phases. First, one process per shape of each peer only starts and warms, all at once: the
  kernels FlashInfer compiles for a shape are then cached for the timed processes, which start in
  seconds.
- Ours runs here, ``Engine(EngineConfig(model, device="cuda", cuda_graph=True,
  max_batch_size=B, max_seq_len=...))`` with every other setting at its default (on CUDA: the
  decode step compiled; the page alone turns that off), in both loops, with the span recorder
  on (as the page runs) and off, interleaved.
- With ``--peer-record DIR``, every engine's two loops on one workload (the first shape,
  ``--peer-record-batch`` requests of ``--peer-record-tokens`` tokens) become one record each
  there, so the page can lay the three side by side.

Everything runs within ``--budget-s``: what no longer fits is not started, and the JSON says
which. The work is ``bench/peer_work.py``, a peer's processes ``bench/peer_processes.py``;
table, JSON and records are built in ``bench/peer_table.py``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import peer_table
from bench.peer_configs import MINISGL, SGLANG
from bench.peer_processes import ROOT, PeerPaths, peer_spec, run_peer, warm_up
from bench.peer_work import PeerWork, check_work, configs_of, prompts_for, write_model_dir
from record.schema import Loop

PEERS = {"mini-sglang": (MINISGL,), "sglang": (SGLANG,), "all": (SGLANG, MINISGL)}
LOOPS = (Loop.NORMAL, Loop.OVERLAP)       # the loops every engine runs
# Our configuration as the tables name it: EngineConfig's defaults on CUDA, as the CLI and the
# benchmarks run (the page leaves torch.compile off: ui/live_runs.build_request).
OURS_CONFIG = "CUDA graphs, compiled decode step (the engine's defaults)"


# ---- ours ---------------------------------------------------------------------------------------

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


# ---- the whole ----------------------------------------------------------------------------------

def run(peer: str, work: PeerWork, paths: PeerPaths, json_path: Path | None,
        record_dir: Path | None, command: str, ours_commit: str = "", budget_s: float = 3600.0,
        merge: bool = False, with_ours: bool = True) -> int:
    """Every engine on ``work``; prints the tables, writes the JSON (by default
    ``bench/results/peer-<gpu>.json``; with ``merge``, beside the rows of engines and shapes it
    did not run) and, with ``record_dir``, every engine's record."""
    if peer not in PEERS:
        raise ValueError(f"--peer knows {', '.join(PEERS)}, not {peer!r}")
    check_work(work)
    peers = PEERS[peer]
    if MINISGL in peers and not (paths.minisgl / "minisgl").is_dir():
        raise ValueError(f"no Mini-SGLang package in {paths.minisgl} (expected "
                         f"{paths.minisgl / 'minisgl'}): run scripts/prepare_peer.sh first")
    if SGLANG in peers and (paths.sglang_site is None or not (paths.sglang_site / "sglang").is_dir()):
        raise ValueError("--peer sglang needs --sglang-site DIR, the folder holding sglang/ "
                         "(scripts/sglang_payload.sh's set, unpacked)")
    import torch
    if not torch.cuda.is_available():
        raise ValueError("every engine runs on a CUDA GPU, and torch finds none here")
    deadline = time.monotonic() + budget_s
    host = {"cpu": _cpu_model(), "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    outs: dict[str, list[dict[str, Any]]] = {p: [] for p in peers}
    ours: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="peer-") as tmp:
        workdir = Path(tmp)
        dirs = {m: write_model_dir(m, workdir / m) for m in work.models + work.warm_also}
        for name in peers:
            rows += _run_peer(name, work, paths, dirs, workdir, deadline, outs[name], notes,
                              record=record_dir is not None)
    for model in work.models if with_ours else ():
        for batch in work.batches:
            if time.monotonic() > deadline - 60:
                notes.append(f"ours on {model} B={batch}: not run (out of time)")
                continue
            batch_rows, ours[f"{model} B={batch}"] = run_ours(work, model, batch)
            rows += batch_rows
    host["loadavg_end"] = os.getloadavg()
    header = _header(work, paths, ours_commit, command, outs, ours, notes,
                     torch.cuda.get_device_name(), torch.__version__)
    header["host"] = host            # a busy or slow host shows in a peer's CPU-side work
    json_path = json_path or ROOT / "bench" / "results" / f"peer-{peer_table.gpu_tag(header['gpu'])}.json"
    if merge and json_path.exists():
        old = json.loads(json_path.read_text())
        rows = peer_table.merge(old.get("rows", []), rows)
        # what this call does not know (a peer it did not run) stays as the earlier calls said
        header = peer_table.merge_header(old.get("header", {}), header)
    doc = peer_table.document(header, rows)
    print(peer_table.report(doc), flush=True)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(f"\nwrote {json_path}")
    if record_dir is not None and work.record_batch:
        _save_records(work, paths, outs, record_dir, deadline, notes, with_ours,
                      header["commits"]["ours"])
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 1 if notes else 0


def _run_peer(peer: str, work: PeerWork, paths: PeerPaths, dirs: dict[str, Path], workdir: Path,
              deadline: float, outs: list[dict[str, Any]], notes: list[str],
              record: bool) -> list[dict[str, Any]]:
    """Every configuration, shape and loop of one peer (warm-ups first, at once)."""
    rows: list[dict[str, Any]] = []
    plan = [(model, index, config, loop) for model in work.models
            for index, config in enumerate(configs_of(peer, work, model)) for loop in LOOPS]
    first = [peer_spec(peer, configs_of(peer, work, model)[0], 0, work, model, dirs[model],
                       Loop.OVERLAP, paths, False) for model in work.models + work.warm_also]
    if work.warm:
        notes += warm_up(peer, first, paths, workdir,
                         min(paths.timeout_s, deadline - time.monotonic() - 60))
    for model, index, config, loop in plan:
        left = deadline - time.monotonic()
        if left < 90:
            notes.append(f"{peer} {config.name} on {model}, {loop}: not run (out of time)")
            continue
        spec = peer_spec(peer, config, index, work, model, dirs[model], loop, paths,
                         record and model == work.models[0] and index == 0)
        try:
            out = run_peer(peer, spec, paths, workdir, min(paths.timeout_s, left - 30))
        except (RuntimeError, ValueError, KeyError) as error:
            notes.append(f"{peer} {config.name} on {model}, {loop}: {error}")
            print(notes[-1], file=sys.stderr, flush=True)
            continue
        out.update(model=model, config_name=config.name)
        if out.get("incomplete"):
            notes.append(f"{peer} {config.name} on {model}, {loop}: {out['incomplete']}")
        outs.append(out)
        rows += peer_table.peer_rows(peer, config.name, model, out)
    return rows


def _save_records(work: PeerWork, paths: PeerPaths, outs: dict[str, list[dict[str, Any]]],
                  record_dir: Path, deadline: float, notes: list[str], with_ours: bool,
                  ours_commit: str) -> None:
    """Each peer's record (both loops of its first configuration on the first shape) and ours."""
    from record.run_record import make_record, save_record

    model = work.models[0]
    for peer, found in outs.items():
        both = [o for o in found if o.get("record") and o["model"] == model]
        if len(both) != len(LOOPS):
            notes.append(f"{peer}: no record (its two loops did not both finish)")
            continue
        commit = paths.commit() if peer == MINISGL else both[0]["env"].get("sglang_version", "")
        env, config, runs, record_notes = peer_table.record_parts(
            peer, both, model, work.prompt_len, commit, work.max_seq_len)
        record = make_record(env, config, runs)
        record["notes"] = record_notes
        record_dir.mkdir(parents=True, exist_ok=True)
        name = peer_table.record_name(env["device_name"], peer, model, work.record_batch)
        print(f"wrote {save_record(record, record_dir / name)}")
    if not with_ours:
        return
    if time.monotonic() < deadline - 60:
        print(f"wrote {save_our_record(work, model, record_dir, ours_commit)}")
    else:
        notes.append("ours: no record (out of time)")


def _header(work: PeerWork, paths: PeerPaths, ours_commit: str, command: str,
            outs: dict[str, list[dict[str, Any]]], ours: dict[str, Any], notes: list[str],
            gpu: str, torch_version: str) -> dict[str, Any]:
    every = [o for found in outs.values() for o in found]
    return {
        "gpu": gpu, "torch_version": torch_version, "python_version": platform.python_version(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commits": {"ours": ours_commit or _git_commit(), "mini-sglang": paths.commit()},
        "versions": {o["env"].get("sglang_version") and "sglang" or "mini-sglang":
                     {k: v for k, v in o["env"].items() if k.endswith("_version")}
                     for o in every},
        "configurations": {f"{o['env'].get('sglang_version') and SGLANG or MINISGL}: "
                           f"{o['config_name']}": o.get("config", {}) for o in every},
        "command": command, "workload": {**asdict(work), "max_seq_len": work.max_seq_len},
        "how": {
            "tok_s": "output tokens over the seconds of one generate() call, timed end to end; "
                     "median [min-max] of the timed runs after a warm-up",
            "step": "steady_step_us of record.metrics: forward start to the next forward's "
                    "start, mean over the steady decode steps, median over the runs",
            "forward": "t_fwd_us of record.metrics: the engine stream's work per steady decode "
                       "step; a peer's from its graph replay's launch (after FlashInfer's "
                       "plan) to the end of its forward's GPU work (sampling included; "
                       "Mini-SGLang's also the result copy and the token_pool write), ours the "
                       "decode graph (forward, sampling)",
            "figures_from": "ours: the timed runs with recording on; a peer: the runs with "
                            "the recorder hooked in, interleaved with the timed runs of its "
                            "unchanged code (its 'on' rows)",
            "vs": "a row's median tok/s over each peer's best (its fastest configuration, "
                  "recording off), same shape, loop and B"},
        "start_s": {f"{o['config_name']} {o['model']} {o['loop']}": o["start_s"] for o in every},
        "ours": ours, "notes": notes}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
