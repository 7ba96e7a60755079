"""How a peer runs in the peer benchmark (``benchmark.py``): one process per configuration, shape
and loop (its overlap switch is fixed when it starts), its environment (its packages first, its
compiled kernels cached), SGLang's recorder plugin, the spec its runner reads, and a warm-up that
compiles every shape's kernels before the timed processes start (side by side where the peer
allows two at once). Each process is a session of its own, ended whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from record.schema import Loop
from studies.peers.config import MINISGL, SGLANG, PeerConfig
from studies.peers.work import PeerWork, graph_sizes, prompts_for

ROOT = Path(__file__).resolve().parents[2]
RUNNERS = {MINISGL: "studies.peers.minisglang.runner", SGLANG: "studies.peers.sglang.runner"}


@dataclass(frozen=True)
class PeerPaths:
    """Where each peer's packages, its installed wheels and its compiled kernels are."""

    minisgl: Path                   # the folder that holds minisgl/ (and COMMIT)
    site: Path | None = None        # where Mini-SGLang's wheels were installed (pip --target)
    sglang_site: Path | None = None  # SGLang's packages (studies/peers/sglang/payload.sh's set, unpacked)
    jit_cache: Path = Path(tempfile.gettempdir()) / "peer-jit"
    trace_dir: Path | None = None   # SGLang's own profiler traces go here (None: none made)
    timeout_s: float = 480.0

    def commit(self) -> str:
        path = self.minisgl / "COMMIT"
        return path.read_text().strip() if path.exists() else "unknown"


def peer_env(peer: str, loop: str, paths: PeerPaths, hook_dir: Path | None = None) -> dict[str, str]:
    """The environment of a peer's process for ``loop``."""
    env = dict(os.environ)
    env.pop("MINISGL_DISABLE_OVERLAP_SCHEDULING", None)
    if peer == MINISGL:
        if loop == Loop.NORMAL:
            env["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "1"
        parts = [paths.site, paths.minisgl, ROOT]
        cache = paths.jit_cache / "minisgl"
    else:
        # SGLang's pinned packages first; the hook's plugin folder (an entry point in the group
        # SGLang loads in its scheduler process); this repository for the hook and ``record``.
        parts = [paths.sglang_site, hook_dir, ROOT]
        cache = paths.jit_cache / "sglang"
        env["SGLANG_PLUGINS"] = "overlapdemo"
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in parts if p is not None]
                                        + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["FLASHINFER_WORKSPACE_BASE"] = str(cache / "flashinfer")
    env["TVM_FFI_CACHE_DIR"] = str(cache / "tvm-ffi")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def write_hook_plugin(folder: Path) -> Path:
    """SGLang's plugin registry finds ``studies.peers.sglang.hook.register`` through this entry
    point (``importlib.metadata`` reads a bare ``.dist-info`` folder on the path)."""
    info = folder / "overlapdemo_hook-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: overlapdemo-hook\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[sglang.srt.plugins]\noverlapdemo = studies.peers.sglang.hook:register\n")
    return folder


def run_peer(peer: str, spec: dict[str, Any], paths: PeerPaths, workdir: Path,
             timeout_s: float) -> dict[str, Any]:
    """One loop's runs in the peer's own process; what it measured. The process is a session
    of its own, ended whole afterwards (a peer's helper processes hold the GPU)."""
    tag = f"{peer}-{spec['model']}-{spec['config_index']}-{spec['loop']}".replace(" ", "")
    out_path = workdir / f"out-{tag}.json"
    out_path.unlink(missing_ok=True)
    started = time.perf_counter()
    proc = _start(peer, spec, tag, paths, workdir, spec["loop"])
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        _end_group(proc)
    if not out_path.exists():
        raise RuntimeError(f"{peer}'s {spec['loop']} process "
                           f"{'ran out of time' if code is None else f'failed (exit {code})'}; "
                           "its output is above")
    out = json.loads(out_path.read_text())
    out["process_s"] = time.perf_counter() - started
    if code != 0:
        out["incomplete"] = "ran out of time" if code is None else f"exit {code}"
    return out


def _start(peer: str, spec: dict[str, Any], tag: str, paths: PeerPaths, workdir: Path,
           loop: str) -> subprocess.Popen:
    """The peer's runner on ``spec`` (``spec-TAG.json``, out to ``out-TAG.json``), a session of
    its own."""
    spec_path = workdir / f"spec-{tag}.json"
    spec_path.write_text(json.dumps(spec))
    hook_dir = write_hook_plugin(workdir / "plugin") if peer == SGLANG else None
    return subprocess.Popen(
        [sys.executable, "-m", RUNNERS[peer], str(spec_path), str(workdir / f"out-{tag}.json")],
        cwd=ROOT, env=peer_env(peer, loop, paths, hook_dir), start_new_session=True)


def _end_group(proc: subprocess.Popen) -> None:
    """End a peer's process and every process it started (SIGTERM, then SIGKILL)."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        time.sleep(1.0)                 # its children get the signal too; let them go


# Mini-SGLang's processes all meet at one fixed rendezvous address (``distributed_addr`` in
# ``python/minisgl/engine/config.py``: tcp://127.0.0.1:2333), so two of them at once collide
# (EADDRINUSE): its warm-ups run one after another. SGLang's pick a free port each.
SIDE_BY_SIDE = {MINISGL: False, SGLANG: True}


def warm_up(peer: str, specs: list[dict[str, Any]], paths: PeerPaths, workdir: Path,
            limit_s: float) -> list[str]:
    """One process per shape that only builds its engine and runs its batches once, caching its
    kernels for the timed processes (side by side where ``SIDE_BY_SIDE``); what failed."""
    deadline = time.monotonic() + limit_s
    failed: list[str] = []

    def finish(model: str, proc: subprocess.Popen) -> None:
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        _end_group(proc)
        if code != 0:
            failed.append(f"{peer} warm-up on {model}: "
                          f"{'out of time' if code is None else f'exit {code}'}")

    procs = []
    for spec in specs:
        warm = {**spec, "warm_only": True, "config_index": f"warm{spec['config_index']}"}
        if peer == SGLANG:                  # two engines on one GPU at once: a share each
            warm["config"] = {**warm["config"], "mem_fraction_static": 0.3}
        proc = _start(peer, warm, f"{peer}-{spec['model']}-warm".replace(" ", ""), paths,
                      workdir, Loop.OVERLAP)
        if SIDE_BY_SIDE[peer]:
            procs.append((spec["model"], proc))
        else:
            finish(spec["model"], proc)
    for model, proc in procs:
        finish(model, proc)
    return failed


class Target(NamedTuple):
    """One of a peer's processes: the peer, its configuration, the shape and the folder it loads
    it from, and the loop."""

    peer: str
    config: PeerConfig
    place: int                      # the configuration's place in the peer's list
    model: str
    model_dir: Path
    loop: str


def peer_spec(target: Target, work: PeerWork, paths: PeerPaths, record: bool) -> dict[str, Any]:
    """What one of a peer's processes runs (its runner reads it)."""
    peer, config, index, model, model_dir, loop = target
    spec: dict[str, Any] = {
        "model": model, "model_dir": str(model_dir), "loop": str(loop), "config": config.args,
        "config_name": config.name, "config_index": index, "commit": paths.commit(),
        "graph_bs": graph_sizes(work.batches + (work.record_batch or 1,)),
        "max_seq_len": work.max_seq_len, "new_tokens": work.new_tokens,
        "repeats": work.repeats, "prompts": [prompts_for(work, model, b) for b in work.batches],
        "record": None, "traces": [], "trace_dir": str(paths.trace_dir or "")}
    if record and work.record_batch:
        spec["record"] = {"prompts": prompts_for(work, model, work.record_batch),
                          "new_tokens": work.record_tokens, "repeats": work.record_repeats}
    if peer == SGLANG and paths.trace_dir is not None and index == 0:
        # SGLang's own profiler: the B=16 at full length, and the smallest and largest
        # batches at a few tokens (enough steps to read the loop, small files).
        sizes = [(16, work.new_tokens)] if record else []
        sizes += [(b, 16) for b in sorted({min(work.batches), max(work.batches)})]
        spec["traces"] = [{"prompts": prompts_for(work, model, b), "new_tokens": n}
                          for b, n in sizes]
    return spec
