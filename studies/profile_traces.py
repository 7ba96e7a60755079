"""torch.profiler traces of three real decode loops, as production engines' traces come (CUDA): the
importer's test material and something to load in the app's *Import a trace* tab.

    python -m studies profile-traces --out tests/data/traces

``hf-generate-qwen05-b8.json.gz`` (transformers' ``generate``), ``engine-eager-qwen05-b8.json.gz``
and ``engine-graph-qwen05-b8.json.gz`` (our overlap loop, eager and with CUDA graphs)."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from bench import cli

MODEL, BATCH, PROMPT, NEW = "qwen2.5-0.5b-shape", 8, 32, 12


def _save(prof, path: Path) -> None:
    raw = path.with_suffix("")                  # name.json
    prof.export_chrome_trace(str(raw))
    path.write_bytes(gzip.compress(raw.read_bytes(), compresslevel=9))
    raw.unlink()
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)", flush=True)


def hf_generate(out: Path, workdir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from bench.decode import materialise

    path = materialise(MODEL, "cuda", "bfloat16", workdir)
    loaded: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)  # its types
    model = loaded.cuda().eval()
    ids = torch.randint(8, 1000, (BATCH, PROMPT), device="cuda")
    kw = dict(do_sample=False, eos_token_id=None, pad_token_id=0)
    model.generate(ids, max_new_tokens=4, **kw)                       # warm-up
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, **kw)
        torch.cuda.synchronize()
    _save(prof, out / "hf-generate-qwen05-b8.json.gz")


def engine(out: Path, graphs: bool) -> None:
    from engine import Engine
    from engine.config import OVERLAP
    from engine.workloads import Workload

    work = Workload(PROMPT, NEW, margin=16, requests=BATCH, ignore_eos=True,
                    prompt_ids=tuple(tuple((i * 31 + j * 7) % 1000 + 8 for j in range(PROMPT))
                                     for i in range(BATCH)))
    config = work.engine_config(model=MODEL, device="cuda", cuda_graph=graphs,
                                max_batch_size=BATCH)
    with Engine(config) as eng:
        prompts, params = work.prompts(eng), work.sampling()
        eng.generate(prompts, params)                                  # warm-up
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            eng.generate(prompts, params, OVERLAP)
            torch.cuda.synchronize()
    _save(prof, out / f"engine-{'graph' if graphs else 'eager'}-qwen05-b8.json.gz")


def main(argv: list[str]) -> int:
    parser = cli.parser("python -m studies profile-traces", __doc__)
    parser.add_argument("--out", default="tests/data/traces")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        hf_generate(out, Path(workdir))
    engine(out, graphs=False)
    engine(out, graphs=True)
    return 0

