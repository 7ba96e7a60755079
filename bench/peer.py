"""Mini-SGLang, the code the article reads, beside our engine: the same work on the same GPU.

    bash scripts/prepare_peer.sh PATH/TO/mini-sglang          # wheels and its package: .whl-peer/
    python -m bench --peer mini-sglang --minisgl .whl-peer/python --site /tmp/site
    python -m bench --peer mini-sglang ... --peer-record assets/recorded   # + its recorded runs

The work: a model preset's shape with random bf16 weights (``config.json`` for Mini-SGLang, our
preset for us), CUDA graphs, greedy, ``ignore_eos``, the same token-id prompts for both
(``--prompt-len`` tokens each, B prompts admitted at once), ``--new-tokens`` new tokens each.
Each engine's ``generate`` is timed end to end, as a user calls it, ``--repeats`` times after
one warm-up run per configuration; rows report the median with the range.

- Mini-SGLang runs in a process per loop (``bench/peer_minisgl.py``; its overlap switch is read
  at import): its code as it is, and with this project's recorder hooked into its loop
  (``bench/peer_hook.py``), whose spans give its decode step and forward times.
- Ours runs here, ``Engine(EngineConfig(model, device="cuda", cuda_graph=True,
  max_batch_size=B, max_seq_len=...))`` with every other setting at its default (what the page
  runs), in both loops, with the span recorder on (as the page runs) and off. Step and forward
  times come from the run's own metrics (``record.metrics``).

Table, JSON and record are built in ``bench/peer_table.py``.
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import peer_table
from record.schema import Loop

ROOT = Path(__file__).resolve().parents[1]
PEERS = ("mini-sglang",)
LOOPS = (Loop.NORMAL, Loop.OVERLAP)       # the loops both engines run


@dataclass(frozen=True)
class PeerWork:
    """What both engines run."""

    model: str = "qwen2.5-0.5b-shape"
    batches: tuple[int, ...] = (1, 64)
    prompt_len: int = 32
    new_tokens: int = 128
    repeats: int = 5
    seed: int = 0
    record_batch: int = 16          # Mini-SGLang's recorded runs (0: none)
    record_tokens: int = 64
    record_repeats: int = 5

    @property
    def max_seq_len(self) -> int:
        return self.prompt_len + max(self.new_tokens, self.record_tokens) + 16


def check_work(work: PeerWork) -> None:
    """Refuse what neither engine can run, in words."""
    from engine.models.loader import PRESETS
    if work.model not in PRESETS:
        raise ValueError(f"--peer runs a model preset's shape with random weights; "
                         f"{work.model!r} is not one of {', '.join(PRESETS)}")
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
    """A Hugging Face model folder for Mini-SGLang: the preset's ``config.json`` (it reads only
    that with random weights) and a WordLevel tokenizer over the vocabulary (it always loads a
    tokenizer; the prompts are token ids, so any tokenizer of the right size serves)."""
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


def prompts_for(work: PeerWork, batch: int) -> list[list[int]]:
    """The token-id prompts both engines get for ``batch`` requests."""
    from engine.models.loader import PRESETS
    from engine.workloads import make_prompts
    return make_prompts(None, batch, work.prompt_len, work.seed, PRESETS[work.model].vocab_size)


# ---- Mini-SGLang ------------------------------------------------------------------------------

@dataclass(frozen=True)
class PeerPaths:
    """Where Mini-SGLang's package, its installed wheels and its compiled kernels are."""

    minisgl: Path                   # the folder that holds minisgl/ (and COMMIT)
    site: Path | None = None        # where the wheels were installed (pip --target)
    jit_cache: Path = Path(tempfile.gettempdir()) / "peer-jit"
    timeout_s: float = 480.0

    def commit(self) -> str:
        path = self.minisgl / "COMMIT"
        return path.read_text().strip() if path.exists() else "unknown"


def minisgl_env(loop: str, paths: PeerPaths) -> dict[str, str]:
    """The environment of Mini-SGLang's process for ``loop``."""
    env = dict(os.environ)
    env.pop("MINISGL_DISABLE_OVERLAP_SCHEDULING", None)
    if loop == Loop.NORMAL:
        env["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "1"
    parts = [str(p) for p in (paths.site, paths.minisgl, ROOT) if p is not None]
    env["PYTHONPATH"] = os.pathsep.join(parts + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["FLASHINFER_WORKSPACE_BASE"] = str(paths.jit_cache / "flashinfer")
    env["TVM_FFI_CACHE_DIR"] = str(paths.jit_cache / "tvm-ffi")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_minisgl(loop: str, spec: dict[str, Any], paths: PeerPaths, workdir: Path) -> dict[str, Any]:
    """One loop's runs in Mini-SGLang's own process; what it measured."""
    spec_path, out_path = workdir / f"spec-{loop}.json", workdir / f"out-{loop}.json"
    spec_path.write_text(json.dumps({**spec, "loop": loop}))
    out_path.unlink(missing_ok=True)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.peer_minisgl", str(spec_path),
                           str(out_path)], cwd=ROOT, env=minisgl_env(loop, paths),
                          timeout=paths.timeout_s)
    if proc.returncode != 0 or not out_path.exists():
        raise RuntimeError(f"Mini-SGLang's {loop} process failed (exit {proc.returncode}); "
                           "its output is above")
    out = json.loads(out_path.read_text())
    out["process_s"] = time.perf_counter() - started
    return out


# ---- ours -------------------------------------------------------------------------------------

def run_ours(work: PeerWork, batch: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Our rows for one batch size (both loops, recording on and off), and the engine's config."""
    from bench.decode import fresh
    from engine import Engine
    from engine.config import EngineConfig, LoopSpec, SamplingParams
    from record.metrics import cpu_phase_times
    from record.recorder import Timeline

    cfg = EngineConfig(model=work.model, device="cuda", cuda_graph=True, max_batch_size=batch,
                       max_seq_len=work.max_seq_len)
    prompts = prompts_for(work, batch)
    params = SamplingParams(max_new_tokens=work.new_tokens, temperature=0.0, ignore_eos=True)
    settings = [(loop, rec) for loop in LOOPS for rec in ("on", "off")]

    def one(loop: str, rec: str):
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
        timed: dict[tuple[str, str], list] = {key: [] for key in settings}
        for _ in range(work.repeats):
            for key in settings:
                timed[key].append(one(*key))
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
        row = peer_table.speed_row(peer_table.OURS, loop, batch, rec, [s for s, _ in runs],
                                   tokens, figures, "these runs (the run's own metrics)")
        row["loop_s_median"] = statistics.median(r.wall_s for _, r in runs)
        rows.append(row)
    return rows, {"start_s": start_s, "config": config}


# ---- the whole ----------------------------------------------------------------------------------

def minisgl_spec(work: PeerWork, model_dir: Path, commit: str) -> dict[str, Any]:
    """What Mini-SGLang's processes run (``bench/peer_minisgl.py`` reads it)."""
    spec = {"model_dir": str(model_dir), "commit": commit,
            "graph_bs": graph_sizes(work.batches + (work.record_batch or 1,)),
            "max_seq_len": work.max_seq_len, "new_tokens": work.new_tokens,
            "repeats": work.repeats, "prompts": [prompts_for(work, b) for b in work.batches],
            "record": None}
    if work.record_batch:
        spec["record"] = {"prompts": prompts_for(work, work.record_batch),
                          "new_tokens": work.record_tokens, "repeats": work.record_repeats}
    return spec


def run(peer: str, work: PeerWork, paths: PeerPaths, json_path: Path | None,
        record_dir: Path | None, command: str, ours_commit: str = "") -> int:
    """Both engines on ``work``; prints the tables, writes the JSON (by default
    ``bench/results/peer-<gpu>.json``) and, with ``record_dir``, Mini-SGLang's record."""
    if peer not in PEERS:
        raise ValueError(f"--peer knows {', '.join(PEERS)}, not {peer!r}")
    check_work(work)
    if not (paths.minisgl / "minisgl").is_dir():
        raise ValueError(f"no Mini-SGLang package in {paths.minisgl} (expected "
                         f"{paths.minisgl / 'minisgl'}): run scripts/prepare_peer.sh first")
    import torch
    if not torch.cuda.is_available():
        raise ValueError("both engines run on a CUDA GPU, and torch finds none here")
    commit = paths.commit()
    host = {"cpu": _cpu_model(), "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    outs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="peer-") as tmp:
        workdir = Path(tmp)
        model_dir = write_model_dir(work.model, workdir / work.model)
        spec = minisgl_spec(work, model_dir, commit)
        for loop in LOOPS:                      # before this process touches the GPU
            try:
                outs.append(run_minisgl(loop, spec, paths, workdir))
                rows += peer_table.minisgl_rows(outs[-1])
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as error:
                errors.append(f"Mini-SGLang {loop}: {error}")
                print(errors[-1], file=sys.stderr, flush=True)
    ours: dict[str, Any] = {}
    for batch in work.batches:
        batch_rows, ours[f"B={batch}"] = run_ours(work, batch)
        rows += batch_rows
    peer_table.add_ratios(rows)
    host["loadavg_end"] = os.getloadavg()
    header = _header(work, commit, ours_commit, command, outs, ours, errors,
                     torch.cuda.get_device_name(), torch.__version__)
    header["host"] = host            # a busy or slow host shows in Mini-SGLang's CPU-side work
    doc = peer_table.document(header, rows)
    print(_report(doc), flush=True)
    json_path = json_path or ROOT / "bench" / "results" / f"peer-{peer_table.gpu_tag(header['gpu'])}.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(f"\nwrote {json_path}")
    if record_dir is not None and len(outs) == len(LOOPS) and all(o.get("record") for o in outs):
        print(f"wrote {save_minisgl_record(outs, work, commit, record_dir)}")
    return 1 if errors else 0


def save_minisgl_record(outs: list[dict[str, Any]], work: PeerWork, commit: str,
                        record_dir: Path) -> Path:
    """Mini-SGLang's serial and overlap runs as one record (schema 1), with the hook's cost."""
    from record.run_record import make_record, save_record
    env, config, runs, notes = peer_table.record_parts(outs, work.model, work.prompt_len, commit,
                                                       work.max_seq_len)
    record = make_record(env, config, runs)
    record["notes"] = notes
    record_dir.mkdir(parents=True, exist_ok=True)
    return save_record(record, record_dir / peer_table.record_name(env["device_name"], work.model,
                                                                   work.record_batch))


def _header(work: PeerWork, commit: str, ours_commit: str, command: str, outs, ours, errors,
            gpu: str, torch_version: str) -> dict[str, Any]:
    return {
        "gpu": gpu, "torch_version": torch_version, "python_version": platform.python_version(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commits": {"ours": ours_commit or _git_commit(), "mini-sglang": commit},
        "flashinfer_version": next((o["env"]["flashinfer_version"] for o in outs), None),
        "command": command, "workload": {**asdict(work), "max_seq_len": work.max_seq_len},
        "how": {
            "tok_s": "output tokens over the seconds of one generate() call, timed end to end; "
                     "median [min-max] of the timed runs after one warm-up run each",
            "step": "steady_step_us of record.metrics: forward start to the next forward's "
                    "start, mean over the steady decode steps, median over the runs",
            "forward": "t_fwd_us of record.metrics: the engine stream's work per steady decode "
                       "step; Mini-SGLang's from its graph replay's launch (after FlashInfer's "
                       "plan) to the end of _forward's GPU work (argmax, result copy, token_pool "
                       "write), ours the decode graph (forward, sampling)",
            "figures_from": "ours: the timed runs with recording on; Mini-SGLang: the runs with "
                            "the recorder hooked in, interleaved with the timed runs of its "
                            "unchanged code (its 'on' rows)",
            "vs_minisgl": "median tok/s over Mini-SGLang's (recording off), same loop and B"},
        "minisgl_start_s": {o["loop"]: o["start_s"] for o in outs},
        "ours": ours, "errors": errors}


def _report(doc: dict[str, Any]) -> str:
    h = doc["header"]
    return "\n\n".join([
        f"{h['gpu']}, torch {h['torch_version']}; ours {h['commits']['ours'][:10]}, Mini-SGLang "
        f"{h['commits']['mini-sglang'][:10]} (FlashInfer {h['flashinfer_version']}); "
        f"{h['workload']['model']}, {h['workload']['prompt_len']}-token prompts, "
        f"{h['workload']['new_tokens']} new tokens, {h['workload']['repeats']} timed runs each",
        peer_table.format_table(doc["rows"]),
        "* measured in the hooked runs beside the timed ones (Mini-SGLang's 'on' rows); "
        "ours / Mini-SGLang: a row's median tok/s over Mini-SGLang's with recording off (its "
        "code as it is), same loop and B",
        "Where a decode step goes (recording on; µs per steady decode step):",
        peer_table.format_phases(doc["rows"]),
        "Overlap's gain:", peer_table.format_gains(doc["overlap_gains"])])


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
