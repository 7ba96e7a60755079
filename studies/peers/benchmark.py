"""Our engine beside SGLang and Mini-SGLang, each peer at its best: the same work on the same GPU.

    bash studies/peers/minisglang/prepare.sh PATH/TO/mini-sglang          # Mini-SGLang: .whl-peer/
    python -m studies peers mini-sglang --minisgl .whl-peer/python --site /tmp/site
    python -m studies peers sglang --sglang-site DIR     # studies/peers/sglang/payload.sh's set
    python -m studies peers all ... --models qwen2.5-0.5b-shape llama-3.1-8b-shape

The work (``work.py``): a preset's shape with random bf16 weights, CUDA graphs, greedy,
``ignore_eos``, the same token-id prompts for every engine. Each engine's ``generate`` is timed
end to end, ``--repeats`` times after a warm-up. A peer runs in a process per configuration
(its ``config.py``), shape and loop (``processes.py``); runs with our recorder hooked into its
loop (its ``hook.py``), interleaved with the timed runs of its unchanged code, give its decode
step, forward and CPU phases. Warm-up processes first compile and cache every shape's kernels.
Ours (``ours.py``) runs in both loops, recording on and off, at the call's start and end. With
``--record DIR`` every engine's two loops on one workload become one record each. What no
longer fits in ``--budget-s`` is not started, and the JSON says which (``table.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import cli
from engine.provenance import engine_commit
from record.schema import Loop
from studies.peers import table as peer_table
from studies.peers.config import MINISGL, SGLANG
from studies.peers.ours import LOOPS, OursTimed, save_our_record
from studies.peers.processes import ROOT, PeerPaths, Target, peer_spec, run_peer, warm_up
from studies.peers.work import PeerWork, check_work, configs_of, write_model_dir

PEERS = {"mini-sglang": (MINISGL,), "sglang": (SGLANG,), "all": (SGLANG, MINISGL)}


@dataclass(frozen=True)
class Call:
    """What one call writes (the JSON, None: ``studies/results/peer-<gpu>.json``; each engine's
    record), the command and commit it names, its time budget, and whether ours runs in it."""

    json_path: Path | None = None
    record_dir: Path | None = None
    command: str = ""
    ours_commit: str = ""
    budget_s: float = 3600.0
    merge: bool = False
    with_ours: bool = True


@dataclass
class _Under:
    """What a call's peer runs share: the shapes' folders, the scratch folder, the deadline and
    the notes of what did not run."""

    dirs: dict[str, Path]
    workdir: Path
    deadline: float
    notes: list[str]


def run(peer: str, work: PeerWork, paths: PeerPaths, call: Call) -> int:
    """Every engine on ``work``; prints the tables, writes the JSON and, with a record folder,
    every engine's record."""
    if peer not in PEERS:
        raise ValueError(f"the peers are {', '.join(PEERS)}, not {peer!r}")
    check_work(work)
    peers = PEERS[peer]
    if MINISGL in peers and not (paths.minisgl / "minisgl").is_dir():
        raise ValueError(f"no Mini-SGLang package in {paths.minisgl} (expected "
                         f"{paths.minisgl / 'minisgl'}): run studies/peers/minisglang/prepare.sh "
                         "first")
    if SGLANG in peers and (paths.sglang_site is None or not (paths.sglang_site / "sglang").is_dir()):
        raise ValueError("sglang needs --sglang-site DIR, the folder holding sglang/ "
                         "(studies/peers/sglang/payload.sh's set, unpacked)")
    import torch
    if not torch.cuda.is_available():
        raise ValueError("every engine runs on a CUDA GPU, and torch finds none here")
    deadline = time.monotonic() + call.budget_s
    where = call_provenance(call.ours_commit)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    outs: dict[str, list[dict[str, Any]]] = {p: [] for p in peers}
    ours: dict[str, Any] = {}
    with ExitStack() as stack:
        # Ours at the call's start and again at its end, the peers between: the host's drift
        # over the call shows in our own figures, and every ratio divides rows of this host.
        timed = stack.enter_context(OursTimed(work)) if call.with_ours else None
        if timed is not None:
            timed.time("start")
        with tempfile.TemporaryDirectory(prefix="peer-") as tmp:
            workdir = Path(tmp)
            under = _Under({m: write_model_dir(m, workdir / m)
                            for m in work.models + work.warm_also}, workdir, deadline, notes)
            if work.warm:
                _warm_all(peers, work, paths, under)
            for name in peers:
                rows += _run_peer(name, work, paths, under, outs[name],
                                  record=call.record_dir is not None)
        if timed is not None:
            timed.time("end")
            rows += timed.rows()
            ours = timed.summary()
    where["loadavg_end"] = list(os.getloadavg())
    for row in rows:
        row["where"] = {**where, **_peer_version(row, outs, paths)}
    header = _header(work, paths, where, call.command, (outs, ours, notes))
    json_path = call.json_path or (ROOT / "studies" / "results"
                                   / f"peer-{peer_table.gpu_tag(header['gpu'])}.json")
    if call.merge and json_path.exists():
        old = json.loads(json_path.read_text())
        rows = peer_table.merge(old.get("rows", []), rows)
        # what this call does not know (a peer it did not run) stays as the earlier calls said
        header = peer_table.merge_header(old.get("header", {}), header)
    doc = peer_table.document(header, rows)
    print(peer_table.report(doc), flush=True)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(f"\nwrote {json_path}")
    if call.record_dir is not None and work.record_batch:
        _save_records(work, paths, outs, call, _Under({}, call.record_dir, deadline, notes))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return 1 if notes else 0


def _warm_all(peers: tuple[str, ...], work: PeerWork, paths: PeerPaths, under: _Under) -> None:
    """Every peer's warm-up processes at once, before any timed one: their kernels compile side
    by side and the timed processes start warm."""
    from concurrent.futures import ThreadPoolExecutor

    def specs(peer: str) -> list[dict[str, Any]]:
        return [peer_spec(Target(peer, configs[0], 0, model, under.dirs[model], Loop.OVERLAP),
                          work, paths, False)
                for model in work.models + work.warm_also
                if (configs := configs_of(peer, work, model))]

    limit = min(paths.timeout_s, under.deadline - time.monotonic() - 60)
    with ThreadPoolExecutor(max(len(peers), 1)) as pool:
        for failed in pool.map(lambda peer: warm_up(peer, specs(peer), paths, under.workdir,
                                                    limit), peers):
            under.notes += failed


def _run_peer(peer: str, work: PeerWork, paths: PeerPaths, under: _Under,
              outs: list[dict[str, Any]], record: bool) -> list[dict[str, Any]]:
    """Every configuration, shape and loop of one peer (warm-ups first, at once)."""
    dirs, workdir, deadline, notes = under.dirs, under.workdir, under.deadline, under.notes
    rows: list[dict[str, Any]] = []
    plan = [(model, index, config, loop) for model in work.models
            for index, config in enumerate(configs_of(peer, work, model)) for loop in LOOPS]
    for model, index, config, loop in plan:
        left = deadline - time.monotonic()
        if left < 90:
            notes.append(f"{peer} {config.name} on {model}, {loop}: not run (out of time)")
            continue
        spec = peer_spec(Target(peer, config, index, model, dirs[model], loop), work, paths,
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
                  call: Call, under: _Under) -> None:
    """Each peer's record (both loops of its first configuration on the first shape) and ours,
    into ``under.workdir``."""
    from record.run_record import save_record

    record_dir, deadline, notes = under.workdir, under.deadline, under.notes
    model = work.models[0]
    for peer, found in outs.items():
        both = [o for o in found if o.get("record") and o["model"] == model]
        if len(both) != len(LOOPS):
            notes.append(f"{peer}: no record (its two loops did not both finish)")
            continue
        commit = paths.commit() if peer == MINISGL else both[0]["env"].get("sglang_version", "")
        record = peer_table.peer_record(peer, both, model, work.prompt_len, commit,
                                        work.max_seq_len)
        record_dir.mkdir(parents=True, exist_ok=True)
        name = peer_table.record_name(record["env"]["device_name"], peer, model,
                                      work.record_batch)
        print(f"wrote {save_record(record, record_dir / name)}")
    if not call.with_ours:
        return
    if time.monotonic() < deadline - 60:
        print(f"wrote {save_our_record(work, model, record_dir, call.ours_commit)}")
    else:
        notes.append("ours: no record (out of time)")


def _header(work: PeerWork, paths: PeerPaths, where: dict[str, Any], command: str,
            found: tuple[dict[str, list[dict[str, Any]]], dict[str, Any], list[str]]
            ) -> dict[str, Any]:
    """The JSON's header: where the call ran, every engine's versions and configurations, the
    workload, how each figure is read; ``found``: the peers' outputs, ours, the notes."""
    import torch
    outs, ours, notes = found
    every = [o for peer_outs in outs.values() for o in peer_outs]
    return {
        "gpu": where["gpu"], "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "host": where,
        "commits": {"ours": where["commit"], "mini-sglang": paths.commit()},
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


def call_provenance(commit: str) -> dict[str, Any]:
    """Where this call runs, for every row it makes: a call id of its own, the GPU's name and
    UUID and the driver (nvidia-smi), the host's CPU model, cores and load, our commit."""
    import torch
    gpu = {"gpu": torch.cuda.get_device_name(), "gpu_uuid": "", "driver": ""}
    try:
        line = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid,driver_version",
                               "--format=csv,noheader", "-i", "0"], capture_output=True,
                              text=True, timeout=20).stdout.strip()
        name, gpu_uuid, driver = (part.strip() for part in line.split(","))
        gpu = {"gpu": name, "gpu_uuid": gpu_uuid, "driver": driver}
    except (OSError, ValueError, subprocess.SubprocessError):   # no nvidia-smi: ask torch
        try:
            gpu["gpu_uuid"] = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
        except (RuntimeError, AssertionError, AttributeError):
            gpu["gpu_uuid"] = "unknown"
    return {"call": f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:6]}",
            **gpu, "cpu": _cpu_model(), "cpus": os.cpu_count(),
            "loadavg_start": list(os.getloadavg()),
            "commit": commit or engine_commit() or "unknown"}


def _peer_version(row: dict[str, Any], outs: dict[str, list[dict[str, Any]]],
                  paths: PeerPaths) -> dict[str, str]:
    """A peer row's version: SGLang's release, Mini-SGLang's commit (ours: the call's commit)."""
    if row["engine"] == MINISGL:
        return {"version": paths.commit()}
    for out in outs.get(row["engine"], []):
        if out["env"].get("sglang_version"):
            return {"version": f"release {out['env']['sglang_version']}"}
    return {}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str]) -> int:
    """``python -m studies peers``: bad settings get a message, not a traceback."""
    args = _parser().parse_args(argv)
    work = PeerWork(models=tuple(args.models or PeerWork.models),
                    batches=tuple(args.batches or PeerWork.batches),
                    prompt_len=args.prompt_len, new_tokens=args.new_tokens,
                    repeats=args.repeats, seed=args.seed,
                    record_batch=args.record_batch if args.record else 0,
                    record_tokens=args.record_tokens, sglang_compile=args.sglang_compile,
                    warm=not args.no_warm, minisgl_pages_256=args.minisgl_pages_256,
                    only=tuple(args.only),
                    warm_also=tuple(args.warm_also))
    given = {name: Path(value).resolve() if value else None for name, value in (
        ("site", args.site), ("sglang_site", args.sglang_site), ("traces", args.sglang_traces))}
    paths = PeerPaths(Path(args.minisgl).resolve(), given["site"], given["sglang_site"],
                      Path(args.jit_cache).resolve(), given["traces"])
    call = Call(Path(args.json) if args.json else None, Path(args.record) if args.record else None,
                "python -m studies peers " + " ".join(argv), args.commit, args.budget_s,
                args.merge, not args.skip_ours)
    try:
        return run(args.peer, work, paths, call)
    except ValueError as error:
        print(f"python -m studies peers: {error}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = cli.parser("python -m studies peers", __doc__)
    p.add_argument("peer", choices=list(PEERS), help="the peer engines to run beside ours")
    p.add_argument("--models", nargs="+", default=None, help="preset shapes (random weights)")
    p.add_argument("--batches", nargs="+", type=int, default=None)
    cli.add_work(p, repeats=10)
    p.add_argument("--seed", type=int, default=0, help="the prompts' seed")
    p.add_argument("--json", metavar="PATH", help="default: studies/results/peer-<gpu>.json")
    p.add_argument("--merge", action="store_true",
                   help="keep the JSON's rows of engines and shapes not run this time")
    p.add_argument("--record", metavar="DIR", help="also write each engine's record (both loops)")
    p.add_argument("--record-batch", type=int, default=16, metavar="B")
    p.add_argument("--record-tokens", type=int, default=64, metavar="N")
    p.add_argument("--budget-s", type=float, default=3600.0,
                   help="what no longer fits in this many seconds is not started")
    p.add_argument("--no-warm", action="store_true",
                   help="no warm-up processes (the kernels are cached already)")
    p.add_argument("--warm-also", nargs="+", default=[], metavar="MODEL",
                   help="shapes only warmed, their kernels cached for a later call")
    p.add_argument("--skip-ours", action="store_true",
                   help="the peers only (our rows and record from another call, merged)")
    p.add_argument("--commit", default="", help="this checkout's commit, where git cannot tell")
    p.add_argument("--minisgl", default=".whl-peer/python", metavar="DIR",
                   help="the folder holding Mini-SGLang's minisgl/ (minisglang/prepare.sh)")
    p.add_argument("--site", metavar="DIR", help="where its wheels were installed (pip --target)")
    p.add_argument("--minisgl-pages-256", action="store_true",
                   help="also Mini-SGLang with its offline benchmark's pages of 256")
    p.add_argument("--sglang-site", metavar="DIR",
                   help="the folder holding SGLang's packages (its payload.sh's set)")
    p.add_argument("--only", nargs="+", default=[], metavar="PART",
                   help="only the configurations whose name holds one of these (a later call "
                        "adding a configuration on the same machine)")
    p.add_argument("--sglang-compile", action="store_true",
                   help="also SGLang's torch.compile configuration (minutes of autotuning)")
    p.add_argument("--sglang-traces", metavar="DIR",
                   help="SGLang's own profiler traces of both loops go there")
    p.add_argument("--jit-cache", default=str(Path(tempfile.gettempdir()) / "peer-jit"),
                   metavar="DIR", help="where FlashInfer and tvm-ffi keep the kernels they "
                                       "compile (FLASHINFER_WORKSPACE_BASE, TVM_FFI_CACHE_DIR)")
    return p
