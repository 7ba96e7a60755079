"""The peer benchmark's numbers: rows, the printed tables, the JSON document and Mini-SGLang's
recorded runs as one of our records. Torch-free: what ``bench/peer.py`` measured goes in as
plain numbers and spans.

A row is one engine, loop, batch size and recording state:
``{"engine", "loop", "batch", "recording", "tok_s_median", "tok_s_min", "tok_s_max", "runs",
"tok_s_runs" (in the order they ran), "tokens", "step_ms", "forward_ms", "cpu_ms",
"cpu_phases_us", "figures_from", "vs_minisgl"}``.
``recording`` is "on" (ours: the span recorder, as the page runs; Mini-SGLang: the recorder
hooked into its loop) or "off". ``vs_minisgl`` is the row's median tokens/s over Mini-SGLang's
with recording off (its code as its users run it), same loop and batch size.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from record.schema import Loop, Phase

MINISGL, OURS = "Mini-SGLang", "ours"
PHASES = (Phase.RECEIVE, Phase.SCHEDULE, Phase.LAUNCH, Phase.WAIT, Phase.PROCESS_LAST)
LABEL = "Mini-SGLang (the article's code)"


def speed_row(engine: str, loop: str, batch: int, recording: str, seconds: Sequence[float],
              tokens: int, figures: Mapping[str, Any] | None = None,
              figures_from: str = "") -> dict[str, Any]:
    """One row from the timed runs' seconds (``tokens`` each) and the step figures, if any
    (``figures``: ``steady_step_us``, ``t_fwd_us``, ``t_cpu_us``, ``cpu_phases_us``)."""
    if not seconds or tokens <= 0 or min(seconds) <= 0:
        raise ValueError(f"{engine} {loop} B={batch}: no timed runs to report")
    in_order = [tokens / s for s in seconds]
    speeds = sorted(in_order)
    row = {"engine": engine, "loop": loop, "batch": int(batch), "recording": recording,
           "tok_s_median": statistics.median(speeds), "tok_s_min": speeds[0],
           "tok_s_max": speeds[-1], "runs": len(speeds), "tok_s_runs": in_order,
           "tokens": int(tokens),
           "step_ms": None, "forward_ms": None, "cpu_ms": None, "cpu_phases_us": {},
           "figures_from": None, "vs_minisgl": None}
    if figures:
        row.update(step_ms=figures["steady_step_us"] / 1e3, forward_ms=figures["t_fwd_us"] / 1e3,
                   cpu_ms=figures["t_cpu_us"] / 1e3,
                   cpu_phases_us=dict(figures.get("cpu_phases_us") or {}),
                   figures_from=figures_from)
    return row


def minisgl_rows(out: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Mini-SGLang's rows from one loop's process (``bench/peer_minisgl.py``): its code as is
    (recording off, step figures from the hooked runs beside them) and with the hook (on)."""
    rows = []
    for b in out["batches"]:
        rows.append(speed_row(MINISGL, out["loop"], b["batch"], "off", b["plain_s"], b["tokens"],
                              b["figures"], "hooked runs (separate from the timed ones)"))
        rows.append(speed_row(MINISGL, out["loop"], b["batch"], "on", b["hooked_s"], b["tokens"],
                              b["figures"], "these runs"))
    return rows


def add_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's median tokens/s over Mini-SGLang's (recording off) on the same loop and B."""
    base = {(r["loop"], r["batch"]): r["tok_s_median"] for r in rows
            if r["engine"] == MINISGL and r["recording"] == "off"}
    for r in rows:
        ref = base.get((r["loop"], r["batch"]))
        r["vs_minisgl"] = r["tok_s_median"] / ref if ref else None
    return rows


def ordered(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """B, then loop, then Mini-SGLang before ours, recording on before off."""
    return sorted(rows, key=lambda r: (r["batch"], r["loop"] != Loop.NORMAL, r["engine"] != MINISGL,
                                       r["recording"] != "on"))


def _ms(value: float | None, mark: str = "") -> str:
    return "–" if value is None else f"{value:.3f}{mark}"


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The main table, as markdown."""
    lines = ["| engine | loop | B | recording | tok/s median [min-max] | decode step ms | "
             "forward ms | ours / Mini-SGLang |", "|---|---|---|---|---|---|---|---|"]
    for r in ordered(rows):
        mark = "*" if r["figures_from"] and r["recording"] == "off" else ""
        ratio = "–" if r["vs_minisgl"] is None else f"{r['vs_minisgl']:.2f}x"
        lines.append(f"| {r['engine']} | {r['loop']} | {r['batch']} | {r['recording']} | "
                     f"{r['tok_s_median']:,.0f} [{r['tok_s_min']:,.0f}-{r['tok_s_max']:,.0f}] | "
                     f"{_ms(r['step_ms'], mark)} | {_ms(r['forward_ms'], mark)} | {ratio} |")
    return "\n".join(lines)


def format_phases(rows: Sequence[dict[str, Any]]) -> str:
    """Where each loop's decode step goes, from the recorded spans (recording on): T_fwd, the
    scheduler thread's phases (µs per steady decode step) and T_cpu, their sum less ``wait``."""
    lines = ["| engine | loop | B | step us | T_fwd us | " + " | ".join(PHASES)
             + " | T_cpu us |", "|---|---|---|---|---|" + "---|" * len(PHASES) + "---|"]
    for r in ordered(rows):
        if r["recording"] != "on" or r["step_ms"] is None:
            continue
        phases = " | ".join(f"{r['cpu_phases_us'].get(p, 0.0):.0f}" for p in PHASES)
        lines.append(f"| {r['engine']} | {r['loop']} | {r['batch']} | {r['step_ms'] * 1e3:.0f} | "
                     f"{r['forward_ms'] * 1e3:.0f} | {phases} | {r['cpu_ms'] * 1e3:.0f} |")
    return "\n".join(lines)


def overlap_gains(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per engine, recording state and B: overlap's end-to-end gain (tokens/s, overlap over
    normal) and, where both loops were recorded, its gain per decode step."""
    by_key = {(r["engine"], r["recording"], r["batch"], r["loop"]): r for r in rows}
    gains = []
    for (engine, recording, batch, loop), normal in sorted(by_key.items()):
        overlap = by_key.get((engine, recording, batch, Loop.OVERLAP))
        if loop != Loop.NORMAL or overlap is None:
            continue
        step = (normal["step_ms"] / overlap["step_ms"]
                if normal["step_ms"] and overlap["step_ms"] else None)
        gains.append({"engine": engine, "recording": recording, "batch": batch,
                      "end_to_end": overlap["tok_s_median"] / normal["tok_s_median"],
                      "per_step": step})
    return gains


def format_gains(gains: Sequence[dict[str, Any]]) -> str:
    lines = ["| engine | recording | B | overlap / normal, end to end | per decode step |",
             "|---|---|---|---|---|"]
    for g in gains:
        step = "–" if g["per_step"] is None else f"{g['per_step']:.2f}x"
        lines.append(f"| {g['engine']} | {g['recording']} | {g['batch']} | "
                     f"{g['end_to_end']:.2f}x | {step} |")
    return "\n".join(lines)


def document(header: Mapping[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON written to ``bench/results/peer-*.json``."""
    rows = ordered(rows)
    return {"header": dict(header), "rows": rows, "overlap_gains": overlap_gains(rows)}


# ---- Mini-SGLang's recorded runs as one of our records ---------------------------------------

def hook_cost_note(loop: str, cost: Mapping[str, Any]) -> dict[str, Any]:
    """What the hook costs one loop end to end (median plain vs hooked runs), in both
    languages."""
    plain, hooked = statistics.median(cost["plain_s"]), statistics.median(cost["hooked_s"])
    pct = 100 * (hooked - plain) / plain
    per_step_us = (hooked - plain) / max(cost["steps"], 1) * 1e6
    n = len(cost["plain_s"])
    name = {Loop.NORMAL: ("serial", "串行"), Loop.OVERLAP: ("overlap", "重叠")}[loop]
    return {"key": "hook_cost", "loop": loop, "runs": n, "plain_s": plain, "hooked_s": hooked,
            "cost_pct": pct, "per_step_us": per_step_us,
            "en": f"The recorder hooked into Mini-SGLang's {name[0]} loop made generate() "
                  f"{pct:+.1f}% longer ({per_step_us:+.0f} µs a step; median of {n} runs with "
                  "the hook and without, interleaved).",
            "zh": f"挂进 Mini-SGLang {name[1]}循环的记录器让 generate() 的耗时变化 {pct:+.1f}%"
                  f"（每步 {per_step_us:+.0f} µs；有钩子与无钩子各 {n} 次交替运行，取中位数）。"}


SERIAL_METADATA_NOTE = {
    "key": "serial_metadata_spans",
    "en": "Mini-SGLang's serial loop enqueues its batch metadata on its engine stream, at the "
          "CPU's pace, between forwards; those spans are not drawn (they would count the GPU busy "
          "while it waits for the CPU): the CPU lane's schedule spans show that time.",
    "zh": "Mini-SGLang 的串行循环在两次前向之间，按 CPU 的节奏把批次元数据排入引擎流；这些区间不画出"
          "（否则会把 GPU 等待 CPU 的时间算作忙碌）：这段时间见 CPU 轨道上的 schedule 区间。"}


def record_parts(outs: Sequence[Mapping[str, Any]], model: str, prompt_len: int, commit: str,
                 max_seq_len: int) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]],
                                            list[dict[str, Any]]]:
    """(env, config, runs, notes) of the record of Mini-SGLang's runs, from its processes'
    outputs (each with ``record`` and ``hook_cost``), serial first."""
    outs = sorted(outs, key=lambda o: o["loop"] != Loop.NORMAL)
    first = outs[0]
    runs = [o["record"] for o in outs]
    batch = len(runs[0]["outputs"])
    env = {**first["env"], "engine": "mini-sglang", "engine_commit": commit, "model": model,
           "random_weights": True, "dtype": "bfloat16"}
    config = {"engine": "mini-sglang", "commit": commit, "model": model, "device": "cuda",
              "cuda_graph": True, "max_batch_size": batch, "requests": batch,
              "prompt_len": prompt_len, "max_new_tokens": len(runs[0]["outputs"][0]["token_ids"]),
              "ignore_eos": True, "extra_cpu_us": 0, "max_seq_len": max_seq_len,
              "attention_backend": "fi", "cache_type": "naive", "use_dummy_weight": True}
    notes = [hook_cost_note(o["loop"], o["hook_cost"]) for o in outs] + [SERIAL_METADATA_NOTE]
    return env, config, runs, notes


def gpu_tag(device_name: str) -> str:
    """"h200" for "NVIDIA H200": the GPU in file names."""
    words = device_name.split()
    return "".join(c for c in (words[-1] if words else "").lower() if c.isalnum()) or "gpu"


def record_name(device_name: str, model: str, batch: int) -> str:
    """``h200-minisglang-qwen05-b16.json``: the GPU, the engine, the model, the batch size."""
    gpu = gpu_tag(device_name)
    short = {"qwen2.5-0.5b-shape": "qwen05", "qwen2.5-1.5b-shape": "qwen15",
             "smollm2-135m-shape": "smollm"}.get(model, model)
    return f"{gpu}-minisglang-{short}-b{batch}.json"
