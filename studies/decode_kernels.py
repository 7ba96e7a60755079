"""The Llama-3.1-8B shape's decode step against the card's floor, kernel by kernel (one GPU call).

    python -m studies.decode_kernels --out DIR      # DIR/decode_kernels.json; a table last

Checks, then times, every variant of the decode kernels (random weights), in parts a-h under one
deadline (one that fails or no longer fits is named, the rest still run): the card, its copy
bandwidth, correctness, attention alone, the engine's decode step switch by switch from
``EARLIER`` to ``DecodeKernels()``, ``generate`` in both loops, one step's kernels, options not
taken. ``decode_kernel_checks.py`` holds the engine-free parts, ``decode_kernels.md`` the results.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from bench.timing import copy_bandwidth_gbs, ms_per_call, weight_bytes
from studies import decode_kernel_checks as checks

MODEL_8B, MODEL_05B = "llama-3.1-8b-shape", "qwen2.5-0.5b-shape"
PROMPT, NEW = 32, 128
MAX_SEQ = PROMPT + NEW + 16          # the peer benchmark's room per request
BATCHES = (64, 1)
STEP_CONTEXTS = (96, 160)            # the run's mean context, and near its end
BUDGET_S = 225.0


class Parts:
    """Runs parts in order under one deadline; records each one's status and seconds, and
    writes what is known so far after each part (a call cut short still leaves its JSON)."""

    def __init__(self, budget_s: float, results: dict[str, Any], path: Path) -> None:
        self.deadline = time.monotonic() + budget_s
        self.log: dict[str, dict[str, Any]] = {}
        self.results, self.path = results, path
        results["parts"] = self.log

    def save(self) -> None:
        self.path.write_text(json.dumps(self.results, indent=1, default=str) + "\n")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, name: str, need_s: float, fn, *args):
        if self.left() < need_s:
            self.log[name] = {"status": f"skipped ({self.left():.0f} s left, needs ~{need_s:.0f})"}
            print(f"== {name}: {self.log[name]['status']}", flush=True)
            return None
        start, out = time.monotonic(), None
        try:
            out = fn(*args)
            status = "ok"
        except Exception as err:        # one broken part must not cost the call the others
            traceback.print_exc()
            status = f"error: {type(err).__name__}: {str(err)[:300]}"
        self.log[name] = {"status": status, "s": round(time.monotonic() - start, 1)}
        print(f"== {name}: {status} ({self.log[name]['s']} s; {self.left():.0f} s left)", flush=True)
        self.save()
        return out


# ---- a: the card --------------------------------------------------------------------------------

def card() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version
    try:
        triton_version = version("triton")
    except PackageNotFoundError:
        triton_version = "not found"
    props = torch.cuda.get_device_properties(0)
    info = {"name": props.name, "uuid": str(getattr(props, "uuid", "")),
            "multiprocessors": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "torch": torch.__version__, "triton": triton_version}
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.max.mem",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        info["nvidia_smi"] = f"not read: {err}"
    print(f"GPU: {info['name']} ({info['nvidia_smi'] or info['uuid']})", flush=True)
    return info


# ---- e, g: the engine's decode step --------------------------------------------------------------

def switches():
    """(label, kernels) from the earlier choices to the engine's default, one switch at a time."""
    from engine.devices.runner import EARLIER, DecodeKernels
    from engine.layers.paged_attention import BLOCK_N, CHUNK_KEYS
    chunks = replace(EARLIER, chunk_keys=CHUNK_KEYS, block_n=BLOCK_N)
    rope = replace(chunks, rope_in_attention=True)
    now = replace(rope, argmax="triton")
    assert now == DecodeKernels(), "the last switch must land on the engine's default"
    return [("earlier", EARLIER), ("+ chunks by length", chunks), ("+ RoPE in attention", rope),
            ("now (+ two-pass argmax)", now)]


def build_engine():
    from engine import Engine, EngineConfig
    cfg = EngineConfig(model=MODEL_8B, device="cuda", cuda_graph=True,
                       max_batch_size=max(BATCHES), max_seq_len=MAX_SEQ)
    eng = Engine(cfg)
    print(f"8B engine: {eng.device_label()}; start-up {eng.startup_s}", flush=True)
    return eng


def _step_meta(runner, batch: int, context: int, pages_per_seq: int):
    """Decode metadata of ``batch`` rows, each at ``context`` keys (this step's included), each
    on pages of its own: what the scheduler uploads for such a batch."""
    from engine.scheduler.request import COL_LEN, COL_SLOT, COL_START, NUM_INT_COLS
    ints, floats = runner.padding_meta(batch, NUM_INT_COLS + pages_per_seq)
    rows = torch.arange(batch, device=ints.device)
    ints[:, COL_SLOT], ints[:, COL_START], ints[:, COL_LEN] = rows, context - 1, 1
    ints[:, NUM_INT_COLS:] = rows[:, None] * pages_per_seq + torch.arange(
        pages_per_seq, device=ints.device)[None, :]
    return ints, floats


def _randomise(runner) -> None:
    """KV caches and token_pool filled with random values (never time zeros)."""
    gen = torch.Generator(runner.device).manual_seed(5)
    for k_cache, v_cache in runner.kv_caches:
        k_cache.normal_(generator=gen)
        v_cache.normal_(generator=gen)
    runner.token_pool.random_(1, runner.vocab_size, generator=gen)


def streamed_bytes(model, spec, batch: int, context: int) -> tuple[int, int]:
    """(weight bytes a step reads: every distinct parameter but the embedding table, which is
    only gathered for B rows unless tied to the LM head; KV bytes at ``context``)."""
    weights = weight_bytes(model)
    if not spec.tie_word_embeddings:
        emb = model.model.embed_tokens.weight
        weights -= emb.numel() * emb.element_size()
    kv = batch * context * spec.num_layers * 2 * spec.num_kv_heads * spec.head_dim * 2
    return weights, kv


def _time_step(eng, graph, label: str, batch: int, context: int,
               bandwidth_gbs: float) -> dict[str, Any]:
    """One decode graph replayed back to back at ``context`` keys a row, beside the floor."""
    runner = eng.device.runner
    ints, floats = _step_meta(runner, batch, context, eng.config.pages_per_seq)
    graph.replay(ints, floats, keep=False)                    # the step's inputs, once
    ms = ms_per_call(graph.graph.replay, 20, 5)
    weights, kv = streamed_bytes(runner.model, eng.spec, batch, context)
    floor = (weights + kv) / (bandwidth_gbs * 1e9) * 1e3
    return {"kernels": label, "batch": batch, "context": context,
            "step_ms": statistics.median(ms), "step_ms_all": ms, "weight_bytes": weights,
            "kv_bytes": kv, "floor_ms": floor, "step_over_floor": statistics.median(ms) / floor}


def decode_steps(parts: Parts, eng, bandwidth_gbs: float) -> dict[str, Any]:
    """Every switch's decode graphs replayed at B = 64 and 1, contexts 96 and 160: the default
    first, one switch back at a time, then the default again (the spread of one version)."""
    from engine.devices.cuda_graph import StepGraphs
    dev, cfg = eng.device, eng.config
    runner = dev.runner
    torch.cuda.set_stream(torch.cuda.default_stream())         # a run may have left another
    _randomise(runner)
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    order = list(reversed(switches()))          # now (the graphs the engine made), then back
    for i, (label, kernels) in enumerate(order):
        if i and parts.left() < 45:
            rows.append({"kernels": label, "status": "skipped (time)"})
            continue
        graphs = dev.graphs
        if i:
            runner.use_kernels(kernels)
            runner.warm_up((1, 2), cfg.pages_per_seq)          # compiles what changed
            graphs = StepGraphs(runner, cfg, prefill=False)
        for batch in BATCHES:
            for context in STEP_CONTEXTS:
                graph = graphs.graphs[(batch, 1, True)]
                rows.append(_time_step(eng, graph, label, batch, context, bandwidth_gbs))
                if i == 0 and batch == 64 and context == STEP_CONTEXTS[0]:
                    out["profile"] = checks.kernel_profile(graph.graph.replay, steps=10)
        if label == "earlier":
            out["earlier_graphs"] = graphs
    now = order[0][0]
    rows.append(_time_step(eng, dev.graphs.graphs[(64, 1, True)], f"{now}, again", 64,
                           STEP_CONTEXTS[0], bandwidth_gbs))
    out["rows"] = rows
    return out


# ---- f: Engine.generate end to end ---------------------------------------------------------------

def generate_rows(parts: Parts, eng, label: str, repeats: int) -> list[dict[str, Any]]:
    """tok/s of ``generate`` as a user times it (output tokens over the call's seconds), both
    loops, B = 64 and 1, after a warm-up run; and whether the loops give the same tokens."""
    from engine import LoopSpec, SamplingParams
    from engine.workloads import make_prompts
    from record.schema import Loop
    params = SamplingParams(max_new_tokens=NEW, temperature=0.0, ignore_eos=True)
    rows = []
    for batch in BATCHES:
        prompts = make_prompts(None, batch, PROMPT, 0, eng.spec.vocab_size)
        tokens = {}
        for loop in (Loop.NORMAL, Loop.OVERLAP):
            spec, runs = LoopSpec(loop), []
            for i in range(repeats + 1):                      # the first is a warm-up
                if i > 1 and parts.left() < 20:
                    break
                eng.clear_prefix_cache()                      # every run prefills all of it
                start = time.perf_counter()
                result = eng.generate(prompts, params, spec)
                runs.append((time.perf_counter() - start, result))
            timed = runs[1:] or runs
            count = sum(len(o.token_ids) for o in timed[0][1].outputs)
            tok_s = [count / wall for wall, _ in timed]
            tokens[loop] = [o.token_ids for o in timed[0][1].outputs]
            rows.append({"kernels": label, "batch": batch, "loop": str(loop),
                         "tok_s": statistics.median(tok_s), "tok_s_all": tok_s,
                         "steady_step_us": _median(r.metrics["steady_step_us"] for _, r in timed),
                         "t_fwd_us": _median(r.metrics["t_fwd_us"] for _, r in timed)})
        rows[-1]["loops_agree"] = rows[-2]["loops_agree"] = tokens[Loop.NORMAL] == tokens[Loop.OVERLAP]
    return rows


def _median(values) -> float:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else float("nan")


def earlier_runs(parts: Parts, eng, graphs) -> list[dict[str, Any]]:
    """``generate`` with the earlier choices' decode graphs (``graphs``, or captured now); the
    prefill graphs stay (they differ only in a prefill's argmax, a few launches a run)."""
    from engine.devices.cuda_graph import StepGraphs
    from engine.devices.runner import EARLIER
    runner = eng.device.runner
    runner.use_kernels(EARLIER)
    if graphs is None:
        runner.warm_up((1, 2), eng.config.pages_per_seq)
        graphs = StepGraphs(runner, eng.config, prefill=False)
    eng.device.graphs.graphs.update(graphs.graphs)
    torch.cuda.set_stream(torch.cuda.default_stream())
    return generate_rows(parts, eng, "earlier", 3)


def eight_b(parts: Parts, bandwidth_gbs: float, results: dict[str, Any]) -> None:
    """e, g and f on one 8B engine: the default's runs and steps, then the switches' steps,
    then the earlier choices' runs."""
    eng = parts.run("8B engine (load, compile, capture)", 70, build_engine)
    if eng is None:
        return
    try:
        results["startup_s"] = eng.startup_s
        results["generate"] = parts.run("f. generate, now", 25, generate_rows, parts, eng,
                                        "now", 3) or []
        steps = parts.run("e, g. decode step by switch", 40, decode_steps, parts, eng,
                          bandwidth_gbs) or {}
        results["decode_step"], results["profile"] = steps.get("rows"), steps.get("profile")
        results["generate"] += parts.run("f. generate, earlier", 25, earlier_runs, parts, eng,
                                         steps.get("earlier_graphs")) or []
    finally:
        eng.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies decode-kernels",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for decode_kernels.json")
    ap.add_argument("--budget-s", type=float, default=BUDGET_S)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("python -m studies.decode_kernels needs a CUDA GPU")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    parts = Parts(args.budget_s, results, args.out / "decode_kernels.json")
    results["card"] = parts.run("a. card", 1, card)
    # Two timings of the copy: their spread says how steady the card is.
    results["copy_gbs"] = parts.run("b. copy bandwidth", 3, lambda: [
        copy_bandwidth_gbs(mib=2048) for _ in range(2)]) or [float("nan")]
    bandwidth = max(results["copy_gbs"])
    results["correctness"] = parts.run("c. correctness", 10, checks.correctness, MODEL_8B,
                                       MODEL_05B)
    results["attention_us"] = parts.run("d. attention per layer", 15, checks.attention_times,
                                        (MODEL_8B, MODEL_05B), 30.0)
    eight_b(parts, bandwidth, results)
    gc.collect()
    torch.cuda.empty_cache()                    # the 8B engine's memory, for the options
    results["options"] = parts.run("h. options", 10, checks.options, MODEL_8B,
                                   min(20.0, parts.left() - 5))
    parts.save()
    print(checks.profile_text(results.get("profile")))
    print(checks.report(results))
    print(f"\nwrote {parts.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
