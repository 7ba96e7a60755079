"""SGLang's side of the peer benchmark, in a process per loop and configuration
(``disable_overlap_schedule`` is fixed when the engine starts).

    python -m studies.peers.sglang.runner SPEC.json OUT.json   # the benchmark writes SPEC, reads OUT

Its offline engine as a user calls it (``sglang.Engine``, random weights, token-id prompts), its
heap frozen after the warm-up (``Engine.freeze_gc``). The runs themselves are ``runs.py``'s;
``hook.py`` records the hooked ones, switched on and off by ``Engine.collective_rpc``. With
``traces`` in the spec, one ``generate`` each under SGLang's own profiler.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from record.schema import LANES, Loop
from studies.peers.runs import dist_version, hooked_output, record_run, time_batch
from studies.peers.sglang.hook import RID_PREFIX

GPU_LANES = LANES[1:]            # the schedule, forward and copy streams, drawn as ours


def build(spec: dict[str, Any]):
    """SGLang's offline engine in the spec's configuration."""
    from sglang.srt.entrypoints.engine import Engine

    return Engine(model_path=spec["model_dir"], load_format="dummy", skip_tokenizer_init=True,
                  disable_overlap_schedule=spec["loop"] == Loop.NORMAL, random_seed=0,
                  log_level="error", **spec["config"])


def _params(new_tokens: int) -> dict[str, Any]:
    return {"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True}


def plain_run(engine, prompts: list[list[int]], new_tokens: int) -> tuple[float, int]:
    """Seconds of one ``generate`` as a user calls it, and the tokens it produced."""
    start = time.perf_counter()
    outs = engine.generate(input_ids=prompts, sampling_params=_params(new_tokens))
    seconds = time.perf_counter() - start
    return seconds, sum(len(o["output_ids"]) for o in outs)


class Hooked:
    """Runs with the recorder switched on in SGLang's scheduler process, numbered so that each
    run's request ids are its own (``od<run>-<i>``)."""

    def __init__(self, engine) -> None:
        self.engine, self.runs = engine, 0
        self.path = Path(tempfile.mkdtemp(prefix="sglang-spans-")) / "spans.json"
        self.failed = ""                # why the hook stopped working (its rows then have none)

    def try_run(self, prompts: list[list[int]], new_tokens: int):
        """``run``, or None once the hook has failed (said in ``failed``): the timed runs of
        SGLang's own code go on without it."""
        if self.failed:
            return None
        try:
            return self.run(prompts, new_tokens)
        except Exception as error:  # noqa: BLE001 - any failure of the hook is reported
            import traceback
            self.failed = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=6)}"
            print(f"the recorder hook failed: {self.failed}", file=sys.stderr, flush=True)
            try:
                self.engine.collective_rpc("overlapdemo_end", path=str(self.path))
            except Exception:  # noqa: BLE001 - it may be the call that failed
                pass
            return None

    def run(self, prompts: list[list[int]], new_tokens: int):
        """(seconds, tokens, spans, outputs, wall_us) of one recorded ``generate``."""
        self.runs += 1
        rids = [f"{RID_PREFIX}{self.runs}-{i}" for i in range(len(prompts))]
        self.engine.collective_rpc("overlapdemo_begin")
        start_ns = time.perf_counter_ns()
        outs = self.engine.generate(input_ids=prompts, sampling_params=_params(new_tokens),
                                    rid=rids)
        end_ns = time.perf_counter_ns()
        self.engine.collective_rpc("overlapdemo_end", path=str(self.path))
        recorded = json.loads(self.path.read_text())
        t0 = recorded["t0_ns"]
        outputs = [hooked_output(out["output_ids"], len(prompt), (start_ns - t0) / 1e3,
                                 [(ns - t0) / 1e3 for ns in recorded["token_ns"].get(rid, [])])
                   for rid, prompt, out in zip(rids, prompts, outs)]
        tokens = sum(len(o["token_ids"]) for o in outputs)
        return (end_ns - start_ns) / 1e9, tokens, recorded["spans"], outputs, \
            (end_ns - start_ns) / 1e3


def profile(engine, traces: list[dict[str, Any]], trace_dir: str, loop: str) -> list[str]:
    """One ``generate`` per entry under SGLang's own profiler; the files it wrote."""
    os.makedirs(trace_dir, exist_ok=True)
    before = set(os.listdir(trace_dir))
    for trace in traces:
        engine.start_profile(output_dir=trace_dir, activities=["CPU", "GPU"], with_stack=False,
                             record_shapes=False,
                             profile_id=f"sglang-{loop}-b{len(trace['prompts'])}")
        engine.generate(input_ids=trace["prompts"], sampling_params=_params(trace["new_tokens"]))
        engine.stop_profile()
    return sorted(set(os.listdir(trace_dir)) - before)


def main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    loop, new_tokens = spec["loop"], spec["new_tokens"]
    started = time.perf_counter()
    engine = build(spec)
    start_s = time.perf_counter() - started
    import sglang
    import torch

    if spec.get("warm_only"):                  # compile and cache the kernels, nothing timed
        for prompts in spec["prompts"]:
            plain_run(engine, prompts, new_tokens)
        _shut_down(engine)
        return 0
    hooked = Hooked(engine)
    out: dict[str, Any] = {
        "loop": loop, "config": spec["config"], "config_name": spec["config_name"],
        "start_s": start_s, "batches": [], "record": None, "traces": [],
        "env": {"device_name": torch.cuda.get_device_name(), "torch_version": torch.__version__,
                "sglang_version": sglang.__version__,
                "flashinfer_version": dist_version("flashinfer-python")}}
    for prompts in spec["prompts"]:                       # warm-up, both ways
        plain_run(engine, prompts, new_tokens)
        hooked.try_run(prompts, new_tokens)
    engine.freeze_gc()
    for prompts in spec["prompts"]:
        row = time_batch(partial(plain_run, engine, prompts, new_tokens),
                         partial(hooked.try_run, prompts, new_tokens),
                         len(prompts), spec["repeats"], GPU_LANES)
        print(f"SGLang {spec['config_name']} {loop} B={row['batch']}: "
              f"{row['tokens'] / statistics.median(row['plain_s']):.0f} tok/s", flush=True)
        out["batches"].append(row)
        Path(out_path).write_text(json.dumps(out, allow_nan=False))   # what is done so far
    if spec.get("record") and not hooked.failed:
        rec = spec["record"]
        label = (f"{loop} (SGLang {sglang.__version__}, {out['env']['device_name']}, "
                 f"CUDA graphs, FlashInfer attention)")
        try:
            out["record"], out["hook_cost"] = record_run(
                partial(plain_run, engine, rec["prompts"], rec["new_tokens"]),
                partial(hooked.run, rec["prompts"], rec["new_tokens"]),
                rec["repeats"], loop, label, LANES, GPU_LANES)
        except Exception as error:  # noqa: BLE001 - the timed rows stand without it
            out["record_error"] = f"{type(error).__name__}: {error}"
        Path(out_path).write_text(json.dumps(out, allow_nan=False))
    if spec.get("traces") and spec.get("trace_dir"):
        try:
            out["traces"] = profile(engine, spec["traces"], spec["trace_dir"], loop)
        except Exception as error:  # noqa: BLE001 - the timed rows are what matter most
            out["trace_error"] = f"{type(error).__name__}: {error}"
    out["hook_error"] = hooked.failed
    Path(out_path).write_text(json.dumps(out, allow_nan=False))
    _shut_down(engine)
    return 0


def _shut_down(engine, limit_s: float = 30.0) -> None:
    """SGLang's own teardown (its scheduler and detokenizer processes hold the GPU), given
    ``limit_s``: the orchestrator ends this process group in any case."""
    import threading

    done = threading.Thread(target=engine.shutdown, daemon=True)
    done.start()
    done.join(limit_s)


if __name__ == "__main__":
    code = main(*sys.argv[1:3])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)                 # a thread of SGLang's left running must not hold the exit
