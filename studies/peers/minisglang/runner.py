"""Mini-SGLang's side of the peer benchmark, in a process per loop (it reads its overlap switch,
``MINISGL_DISABLE_OVERLAP_SCHEDULING``, once, at import).

    python -m studies.peers.minisglang.runner SPEC.json OUT.json   # the benchmark writes SPEC, reads OUT

Its offline API as a user calls it (``minisgl.llm.LLM``: random weights, FlashInfer attention, no
prefix cache between runs, the spec's configuration), its heap frozen after the warm-up. The runs
themselves are ``runs.py``'s; ``hook.py`` records the hooked ones.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from record.recorder import Timeline
from record.schema import BASE_LANES, Lane, Loop
from studies.peers.runs import dist_version, hooked_output, record_run, time_batch

GPU_LANES = (Lane.SCHEDULER_STREAM, Lane.ENGINE_STREAM)      # Mini-SGLang has no copy stream


def build(spec: dict[str, Any]):
    """Mini-SGLang's offline engine (it must be the first to touch CUDA in this process)."""
    from minisgl.llm import LLM
    return LLM(spec["model_dir"], use_dummy_weight=True, attention_backend="fi",
               cache_type="naive", cuda_graph_bs=spec["graph_bs"],
               max_seq_len_override=spec["max_seq_len"], memory_ratio=0.5, **spec["config"])


def generate(llm, prompts, params):
    """``LLM.generate`` with the collector kept out (the heap is frozen after the warm-up)."""
    gc.disable()
    try:
        return llm.generate(prompts, params)
    finally:
        gc.enable()


def plain_run(llm, prompts: list[list[int]], params) -> tuple[float, int]:
    """Seconds of one ``generate`` as a user calls it, and the tokens it produced."""
    start = time.perf_counter()
    results = generate(llm, prompts, params)
    seconds = time.perf_counter() - start
    return seconds, sum(len(r["token_ids"]) for r in results)


def hooked_run(llm, recorder, prompts: list[list[int]], params):
    """One ``generate`` with the recorder hooked in: (seconds, tokens, spans, outputs)."""
    timeline = Timeline()
    recorder.install()
    recorder.begin(timeline)
    start_ns = time.perf_counter_ns()
    results = generate(llm, prompts, params)
    end_ns = time.perf_counter_ns()
    token_ns = recorder.end()
    recorder.remove()
    spans = timeline.snapshot()
    outputs = [hooked_output(result["token_ids"], len(prompts[uid]), timeline.to_us(start_ns),
                             [timeline.to_us(ns) for ns in token_ns.get(uid, [])])
               for uid, result in enumerate(results)]   # LLM.generate numbers requests 0..
    wall_us = (end_ns - start_ns) / 1e3
    return (end_ns - start_ns) / 1e9, sum(len(o["token_ids"]) for o in outputs), spans, \
        outputs, wall_us


def main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    started = time.perf_counter()
    llm = build(spec)
    start_s = time.perf_counter() - started

    import torch
    from minisgl.core import SamplingParams

    from studies.peers.minisglang.hook import MiniSglangRecorder
    loop = spec["loop"]
    recorder = MiniSglangRecorder(llm, serial=loop == Loop.NORMAL)
    params = SamplingParams(temperature=0.0, ignore_eos=True, max_tokens=spec["new_tokens"])
    for prompts in spec["prompts"]:                        # warm-up, both ways
        plain_run(llm, prompts, params)
        if not spec.get("warm_only"):
            hooked_run(llm, recorder, prompts, params)
    if spec.get("warm_only"):                              # kernels compiled and cached
        return 0
    gc.collect()
    gc.freeze()
    out: dict[str, Any] = {
        "loop": loop, "config": spec["config"], "config_name": spec["config_name"],
        "start_s": start_s, "batches": [], "record": None,
        "env": {"device_name": torch.cuda.get_device_name(), "torch_version": torch.__version__,
                "flashinfer_version": dist_version("flashinfer-python")}}
    for prompts in spec["prompts"]:
        row = time_batch(partial(plain_run, llm, prompts, params),
                         partial(hooked_run, llm, recorder, prompts, params),
                         len(prompts), spec["repeats"], GPU_LANES)
        print(f"Mini-SGLang {loop} B={row['batch']}: "
              f"{row['tokens'] / statistics.median(row['plain_s']):.0f} tok/s", flush=True)
        out["batches"].append(row)
        Path(out_path).write_text(json.dumps(out, allow_nan=False))   # what is done so far
    if spec.get("record"):
        rec = spec["record"]
        rec_params = SamplingParams(temperature=0.0, ignore_eos=True,
                                    max_tokens=rec["new_tokens"])
        label = (f"{loop} (Mini-SGLang {spec['commit'][:7]}, {out['env']['device_name']}, "
                 "CUDA graphs, FlashInfer attention)")
        out["record"], out["hook_cost"] = record_run(
            partial(plain_run, llm, rec["prompts"], rec_params),
            partial(hooked_run, llm, recorder, rec["prompts"], rec_params),
            rec["repeats"], loop, label, BASE_LANES, GPU_LANES)
    Path(out_path).write_text(json.dumps(out, allow_nan=False))
    return 0


if __name__ == "__main__":
    code = main(*sys.argv[1:3])
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without Mini-SGLang's teardown (its process group, graphs, pynccl): the results are
    # written, and a teardown that hung would hold the benchmark.
    os._exit(code)
