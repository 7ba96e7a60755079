"""Our engine beside SGLang and Mini-SGLang, each peer at its best: the same work on the same GPU.

    bash scripts/prepare_peer.sh PATH/TO/mini-sglang          # Mini-SGLang: .whl-peer/
    python -m bench --peer mini-sglang --minisgl .whl-peer/python --site /tmp/site
    python -m bench --peer sglang --sglang-site /tmp/sglang-site   # ../shared/peer/sglang's set
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
  max_batch_size=B, max_seq_len=...))`` with every other setting at its default (what the page
  runs), in both loops, with the span recorder on (as the page runs) and off, interleaved.
- With ``--peer-record DIR``, every engine's two loops on one workload (the first shape,
  ``--peer-record-batch`` requests of ``--peer-record-tokens`` tokens) become one record each
  there, so the page can lay the three side by side.

Everything runs within ``--budget-s``: what no longer fits is not started, and the JSON says
which. Table, JSON and records are built in ``bench/peer_table.py``.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import peer_table
from bench.peer_configs import MINISGL, SGLANG, PeerConfig, minisgl_configs, sglang_configs
from record.schema import Loop

ROOT = Path(__file__).resolve().parents[1]
PEERS = {"mini-sglang": (MINISGL,), "sglang": (SGLANG,), "all": (SGLANG, MINISGL)}
LOOPS = (Loop.NORMAL, Loop.OVERLAP)       # the loops every engine runs
RUNNERS = {MINISGL: "bench.peer_minisgl", SGLANG: "bench.peer_sglang"}


@dataclass(frozen=True)
class PeerWork:
    """What every engine runs."""

    models: tuple[str, ...] = ("qwen2.5-0.5b-shape",)
    batches: tuple[int, ...] = (1, 64)
    prompt_len: int = 32
    new_tokens: int = 128
    repeats: int = 10
    seed: int = 0
    record_batch: int = 16          # every engine's recorded runs, first shape (0: none)
    record_tokens: int = 64
    record_repeats: int = 5
    sglang_compile: bool = False    # also SGLang with torch.compile (minutes of autotuning)
    minisgl_pages_256: bool = False  # also Mini-SGLang with its offline benchmark's pages of 256
    warm: bool = True               # start each peer once per shape first (compiles kernels)
    warm_also: tuple[str, ...] = () # shapes only warmed (kernels cached for a later call)

    @property
    def max_seq_len(self) -> int:
        return self.prompt_len + max(self.new_tokens, self.record_tokens) + 16


def check_work(work: PeerWork) -> None:
    """Refuse what no engine can run, in words."""
    from engine.models.loader import PRESETS
    for model in work.models + work.warm_also:
        if model not in PRESETS:
            raise ValueError(f"--peer runs a model preset's shape with random weights; "
                             f"{model!r} is not one of {', '.join(PRESETS)}")
    if not work.batches or min(work.batches) < 1 or max(work.batches) > 256:
        raise ValueError(f"--batches must be between 1 and 256, got {list(work.batches)}")
    if work.repeats < 1 or work.prompt_len < 1 or work.new_tokens < 2:
        raise ValueError("--repeats and --prompt-len must be at least 1, --new-tokens at least 2")
    if not 0 <= work.record_batch <= 256:
        raise ValueError(f"--peer-record-batch must be between 0 and 256, got {work.record_batch}")


def graph_sizes(batches: tuple[int, ...]) -> list[int]:
    """Mini-SGLang's CUDA-graph batch sizes: powers of two up to the largest batch, and each."""
    top, sizes, b = max(batches), set(batches), 1
    while b < top:
        sizes.add(b)
        b *= 2
    return sorted(sizes)


def write_model_dir(model: str, out: Path) -> Path:
    """A Hugging Face model folder for a peer: the preset's ``config.json`` (it reads only that
    with random weights) and a WordLevel tokenizer over the vocabulary (Mini-SGLang always loads
    a tokenizer; the prompts are token ids, so any tokenizer of the right size serves)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from engine.models.checkpoint import hf_config
    from engine.models.loader import PRESETS
    spec = PRESETS[model]
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({**hf_config(spec), "torch_dtype": "bfloat16"}))
    vocab = {f"t{i}": i for i in range(spec.vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)   # ids back, spaced
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0",
        "model_max_length": spec.max_position_embeddings,
        # Mini-SGLang looks a chat template up on the hub when the folder has none.
        "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}))
    return out


def prompts_for(work: PeerWork, model: str, batch: int) -> list[list[int]]:
    """The token-id prompts every engine gets for ``batch`` requests of ``model``'s shape."""
    from engine.models.loader import PRESETS
    from engine.workloads import make_prompts
    return make_prompts(None, batch, work.prompt_len, work.seed, PRESETS[model].vocab_size)


def configs_of(peer: str, work: PeerWork, model: str) -> list[PeerConfig]:
    """The configurations of ``peer`` tried on ``model``'s shape."""
    found = (minisgl_configs(max(work.batches + (work.record_batch,)), work.max_seq_len,
                             work.minisgl_pages_256)
             if peer == MINISGL else sglang_configs(work.batches, work.sglang_compile))
    return [c for c in found if not c.models or model in c.models]


# ---- a peer's processes ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PeerPaths:
    """Where each peer's packages, its installed wheels and its compiled kernels are."""

    minisgl: Path                   # the folder that holds minisgl/ (and COMMIT)
    site: Path | None = None        # where Mini-SGLang's wheels were installed (pip --target)
    sglang_site: Path | None = None  # SGLang's packages (../shared/peer/sglang's set, unpacked)
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
    """SGLang's plugin registry finds ``bench.peer_sglang_hook.register`` through this entry
    point (``importlib.metadata`` reads a bare ``.dist-info`` folder on the path)."""
    info = folder / "overlapdemo_hook-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: overlapdemo-hook\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[sglang.srt.plugins]\noverlapdemo = bench.peer_sglang_hook:register\n")
    return folder


def run_peer(peer: str, spec: dict[str, Any], paths: PeerPaths, workdir: Path,
             timeout_s: float) -> dict[str, Any]:
    """One loop's runs in the peer's own process; what it measured. The process is a session
    of its own, ended whole afterwards (a peer's helper processes hold the GPU)."""
    tag = f"{peer}-{spec['model']}-{spec['config_index']}-{spec['loop']}".replace(" ", "")
    spec_path, out_path = workdir / f"spec-{tag}.json", workdir / f"out-{tag}.json"
    spec_path.write_text(json.dumps(spec))
    out_path.unlink(missing_ok=True)
    hook_dir = write_hook_plugin(workdir / "plugin") if peer == SGLANG else None
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", RUNNERS[peer], str(spec_path), str(out_path)],
                            cwd=ROOT, env=peer_env(peer, spec["loop"], paths, hook_dir),
                            start_new_session=True)
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


def warm_up(peer: str, specs: list[dict[str, Any]], paths: PeerPaths, workdir: Path,
            limit_s: float) -> list[str]:
    """Start one process per shape at once, each only building its engine and running its
    batches once, so FlashInfer's kernels for every shape are compiled side by side and cached
    for the timed processes. What failed, in words (a timed process says it again)."""
    procs = []
    for spec in specs:
        warm = {**spec, "warm_only": True, "config_index": f"warm{spec['config_index']}"}
        if peer == SGLANG:                  # two engines on one GPU at once: a share each
            warm["config"] = {**warm["config"], "mem_fraction_static": 0.3}
        tag = f"{peer}-{spec['model']}-warm".replace(" ", "")
        path = workdir / f"spec-{tag}.json"
        path.write_text(json.dumps(warm))
        hook_dir = write_hook_plugin(workdir / "plugin") if peer == SGLANG else None
        procs.append((spec["model"], subprocess.Popen(
            [sys.executable, "-m", RUNNERS[peer], str(path), str(workdir / f"out-{tag}.json")],
            cwd=ROOT, env=peer_env(peer, Loop.OVERLAP, paths, hook_dir), start_new_session=True)))
    deadline = time.monotonic() + limit_s
    failed = []
    for model, proc in procs:
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        _end_group(proc)
        if code != 0:
            failed.append(f"{peer} warm-up on {model}: "
                          f"{'out of time' if code is None else f'exit {code}'}")
    return failed


def peer_spec(peer: str, config: PeerConfig, index: int, work: PeerWork, model: str,
              model_dir: Path, loop: str, paths: PeerPaths, record: bool) -> dict[str, Any]:
    """What one of a peer's processes runs (its runner reads it)."""
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
        row = peer_table.speed_row(peer_table.OURS, "the page's defaults, CUDA graphs", model,
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
    from record.run_record import make_record, save_record

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
            run["label"] = f"{loop} (this project {commit[:7]}, {eng.device_label()})"
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
                         "(../shared/peer/sglang/build_payload.sh's set, unpacked)")
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
        earlier = old.get("header", {})
        header["earlier"] = {k: v for k, v in earlier.items() if k != "earlier"}
        # what a later call does not know (a peer it did not run) stays as the earlier one said
        header["commits"] = {**earlier.get("commits", {}), **{
            k: v for k, v in header["commits"].items() if v and v != "unknown"}}
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
