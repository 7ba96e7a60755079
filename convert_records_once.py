"""One-off: rewrite the bundled records (assets/recorded/*.json) into today's shape.

Run once, then deleted (kept in git history only): the code reads no older shape.

- every run: no ``mode``; ``extra_cpu_us`` per run, moved out of its metrics (our runs carried
  the value each ran with there) or, for another engine's run, the record config's (0);
- our records: ``env["engine"] = "ours"``; ``config`` a ``RunConfig`` (the same engine settings
  under the same names, the workload's under one name each: ``prompt_len_words`` ->
  ``prompt_words``, ``prompt_len`` -> ``prompt_tokens``, ``shared_prefix_tokens`` /
  ``shared_prefix`` -> ``shared_prefix``, ``kv_pages`` (``num_pages`` again) and ``loops``
  dropped, ``hazards`` as the names of the switches on); what an old CLI record did not write is
  taken from the command line that made it (scripts/h200.sh: ``--prompt-len``, ``--ignore-eos``,
  the CLI's default temperature 0.0) and checked against the max_seq_len it sized;
  ``made_by`` goes to ``env``;
- another engine's record (Mini-SGLang, SGLang): its own config, ``prompt_len`` named
  ``prompt_tokens`` as ours is.

Spans, outputs, metrics (``extra_cpu_us`` moved, nothing else touched), memory, host, notes:
unchanged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from record.run_record import validate_record
from record.schema import ENGINE_LOOPS, OURS, RunConfig

ROOT = Path(__file__).resolve().parent
ENGINE_KEYS = ("model", "device", "dtype", "seed", "max_batch_size", "max_seq_len", "page_size",
               "num_pages", "prefix_cache", "max_prefill_tokens", "cuda_graph", "compile",
               "attention", "result_copy_stream", "cpu_device_process", "cpu_threads",
               "device_cpus", "record_timeline", "debug_checks")
# What scripts/h200.sh's command lines gave the CLI records that their config did not write:
# (--prompt-len, --ignore-eos). $SMALL is --prompt-len 24 without --ignore-eos.
CLI_RECORDS = {
    "h200-bundled-eager.json": (24, False),
    "h200-bundled-graph-cpu200.json": (24, False),
    "h200-bundled-graph-cpu200-multistep4.json": (24, False),
    "h200-bundled-graph-shared-prefix-kv160.json": (24, False),
    "h200-qwen05-graph-b64.json": (32, True),
    "h200-smollm-eager-kernels.json": (32, True),
    "h200-smollm-graph-kernels.json": (32, True),
    "h200-smollm-graph-cpu4000-all.json": (32, True),
}


def run_now(run: dict, config_extra: int | None) -> dict:
    metrics = dict(run["metrics"])
    extra = metrics.pop("extra_cpu_us", config_extra)
    assert isinstance(extra, int), (run["label"], extra)
    rest = {k: v for k, v in run.items() if k not in ("mode", "loop", "decode_steps", "metrics")}
    return {"loop": run["loop"], "decode_steps": run["decode_steps"], "extra_cpu_us": extra,
            "metrics": metrics, **rest}


def our_config(name: str, old: dict) -> RunConfig:
    words = old.get("prompt_len_words")
    shared = old.get("shared_prefix", old.get("shared_prefix_tokens", 0))
    if "shared_prefix_tokens" in old:
        assert old["shared_prefix_tokens"] == shared, name
    prompt, ignore_eos = CLI_RECORDS.get(name, (old.get("prompt_len"), old.get("ignore_eos")))
    if name in CLI_RECORDS:         # the CLI sized max_seq_len for exactly this workload
        assert max(64, prompt + old["max_new_tokens"] + shared) == old["max_seq_len"], name
    hazards = tuple(k for k, v in (old.get("hazards") or {}).items() if v)
    return RunConfig(
        **{key: tuple(old[key]) if key == "device_cpus" else old[key] for key in ENGINE_KEYS},
        hazards=hazards, requests=old["requests"],
        prompt_tokens=None if words else prompt, prompt_words=words or None,
        max_new_tokens=old["max_new_tokens"], temperature=float(old.get("temperature", 0.0)),
        ignore_eos=bool(ignore_eos), stop_tokens_from_probe=bool(old.get(
            "stop_tokens_from_probe", False)), chat=bool(old.get("chat", False)),
        shared_prefix=shared, request_rate=old.get("request_rate"), arrivals_file=None,
        served=False)


def convert(path: Path) -> None:
    doc = json.loads(path.read_text())
    env, old = dict(doc["env"]), dict(doc["config"])
    ours = env.get("engine", OURS) == OURS and all(r["loop"] in ENGINE_LOOPS for r in doc["runs"])
    if ours:
        env["engine"] = OURS
        if "made_by" in old:
            env["made_by"] = old.pop("made_by")
        config = our_config(path.name, old).to_dict()
        extra = None                # ours: each run's metrics say what it ran with
    else:
        config = {("prompt_tokens" if k == "prompt_len" else k): v for k, v in old.items()}
        extra = old.get("extra_cpu_us", 0)
    runs = [run_now(run, extra) for run in doc["runs"]]
    if ours and "extra_cpu_us" in old:
        assert runs[0]["extra_cpu_us"] == old["extra_cpu_us"], path.name
    new = {**doc, "env": env, "config": config, "runs": runs}
    validate_record(json.loads(json.dumps(new)))
    path.write_text(json.dumps(new, separators=(",", ":")))
    print(f"{path.name}: {'ours' if ours else env['engine']}, "
          f"extra CPU us per run {[r['extra_cpu_us'] for r in runs]}")


if __name__ == "__main__":
    for path in sorted((ROOT / "assets" / "recorded").glob("*.json")) or sys.exit("no records"):
        convert(path)
