"""The peer benchmark's numbers: rows, the printed tables, the JSON document and a peer's recorded
runs as one of our records. Torch-free: what ``benchmark.py`` measured goes in as plain numbers.

A row is one engine, configuration, shape, loop, batch size and recording state (``speed_row``
lists its fields). ``recording`` is "on" (ours: the span recorder, as the page runs; a peer: our
recorder hooked into its loop) or "off" (a peer's code as its users run it). ``vs`` maps each
peer to the row's median tokens/s over that peer's **best** median with recording off on the same
GPU, shape, loop and batch size, so no ratio is taken against a configuration that was slower.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from record.schema import Loop, Phase, RecordDict
from studies.peers.config import MINISGL, SGLANG

OURS = "ours"
PEERS = (MINISGL, SGLANG)
PHASES = (Phase.RECEIVE, Phase.SCHEDULE, Phase.LAUNCH, Phase.WAIT, Phase.PROCESS_LAST)
ENGINE_KEYS = {MINISGL: "mini-sglang", SGLANG: "sglang", OURS: "ours"}   # records, file names


class Setting(NamedTuple):
    """What a row timed: an engine in a configuration, on a shape, in a loop, at a batch size,
    with the recorder on or off."""

    engine: str
    config: str
    model: str
    loop: str
    batch: int
    recording: str


def speed_row(setting: Setting, seconds: Sequence[float], tokens: int,
              figures: Mapping[str, Any] | None = None, figures_from: str = "") -> dict[str, Any]:
    """One row from the timed runs' seconds (``tokens`` each) and the step figures, if any."""
    engine, config, model, loop, batch, recording = setting
    if not seconds or tokens <= 0 or min(seconds) <= 0:
        raise ValueError(f"{engine} {loop} B={batch}: no timed runs to report")
    in_order = [tokens / s for s in seconds]
    speeds = sorted(in_order)
    row = {"engine": engine, "config": config, "model": model, "loop": str(loop),
           "batch": int(batch), "recording": recording,
           "tok_s_median": statistics.median(speeds), "tok_s_min": speeds[0],
           "tok_s_max": speeds[-1], "runs": len(speeds), "tok_s_runs": in_order,
           "tokens": int(tokens), "step_ms": None, "forward_ms": None, "cpu_ms": None,
           "cpu_phases_us": {}, "figures_from": None, "vs": {}}
    if figures:
        row.update(step_ms=figures["steady_step_us"] / 1e3, forward_ms=figures["t_fwd_us"] / 1e3,
                   cpu_ms=figures["t_cpu_us"] / 1e3,
                   cpu_phases_us=dict(figures.get("cpu_phases_us") or {}),
                   figures_from=figures_from)
    return row


def peer_rows(engine: str, config: str, model: str, out: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A peer's rows from one loop's process: its code as is (recording off) and with our
    recorder hooked in (on); both take their step figures from the hooked runs."""
    rows = []
    for b in out["batches"]:
        rows.append(speed_row(Setting(engine, config, model, out["loop"], b["batch"], "off"),
                              b["plain_s"], b["tokens"], b["figures"],
                              "hooked runs (interleaved with the timed ones)"))
        if b["hooked_s"]:                   # none where the hook failed (the output says why)
            rows.append(speed_row(Setting(engine, config, model, out["loop"], b["batch"], "on"),
                                  b["hooked_s"], b["tokens"], b["figures"], "these runs"))
    return rows


def host_of(row: Mapping[str, Any]) -> str:
    """The GPU a row ran on, by its UUID (``where``: the call's provenance); "" if not said."""
    return str((row.get("where") or {}).get("gpu_uuid") or "")


def best(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str, str, int], dict[str, Any]]:
    """Each peer's fastest row with recording off, by (host, engine, model, loop, B)."""
    found: dict[tuple[str, str, str, str, int], dict[str, Any]] = {}
    for r in rows:
        if r["engine"] in PEERS and r["recording"] == "off":
            key = (host_of(r), r["engine"], r["model"], r["loop"], r["batch"])
            if key not in found or r["tok_s_median"] > found[key]["tok_s_median"]:
                found[key] = r
    return found


def add_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's ``vs``; rows of another host, or of none said, are never divided."""
    fastest = best(rows)
    for r in rows:
        host = host_of(r)
        r["vs"] = {peer: r["tok_s_median"] / fastest[key]["tok_s_median"]
                   for peer in PEERS
                   if host and (key := (host, peer, r["model"], r["loop"], r["batch"])) in fastest}
    return rows


def hosts(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The GPUs the rows ran on, in the order first seen."""
    return list(dict.fromkeys(host_of(r) for r in rows))


def ordered(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Shape, B, loop, then the peers before ours, recording on before off."""
    engines = {engine: i for i, engine in enumerate(PEERS + (OURS,))}
    return sorted(rows, key=lambda r: (r["model"], r["batch"], r["loop"] != Loop.NORMAL,
                                       engines.get(r["engine"], 9), r["config"],
                                       r["recording"] != "on"))


def _ms(value: float | None, mark: str = "") -> str:
    return "–" if value is None else f"{value:.3f}{mark}"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def format_table(rows: Sequence[dict[str, Any]], model: str, host: str | None = None) -> str:
    """One shape's table on one GPU (``host``: its UUID; None: every row), every engine,
    configuration and call, and our rows over each peer's best."""
    lines = ["| engine | configuration | call | loop | B | recording | tok/s median [min-max] | "
             "decode step ms | forward ms | ours / Mini-SGLang | ours / SGLang |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    fastest = {id(r) for r in best(rows).values()}
    for r in ordered(row for row in rows if row["model"] == model
                     and (host is None or host_of(row) == host)):
        mark = "*" if r["figures_from"] and r["recording"] == "off" else ""
        star = " (best)" if id(r) in fastest else ""
        ratios = [_ratio(r["vs"].get(peer)) if r["engine"] == OURS else "–" for peer in PEERS]
        call = _call(r) or "–"
        lines.append(f"| {r['engine']} | {r['config']}{star} | {call} | {r['loop']} | "
                     f"{r['batch']} | {r['recording']} | {_speeds(r)} | "
                     f"{_ms(r['step_ms'], mark)} | {_ms(r['forward_ms'], mark)} | "
                     f"{' | '.join(ratios)} |")
    return "\n".join(lines)


def pooled(rows: Sequence[dict[str, Any]], engine: str, model: str, host: str, loop: str,
           batch: int, recording: str) -> dict[str, Any] | None:
    """Every timed run of one setting on one GPU over all its calls (a peer: its best
    configuration's): median, range, count, and each timing's median in call order."""
    found = [r for r in rows if (r["engine"], r["model"], host_of(r), r["loop"], r["batch"],
                                 r["recording"]) == (engine, model, host, loop, batch, recording)]
    if engine in PEERS:
        top = best(found).get((host, engine, model, loop, batch))
        found = [r for r in found if top is not None and r["config"] == top["config"]]
    runs = [x for r in found for x in r["tok_s_runs"]]
    if not runs:
        return None
    timings = [v for r in found for v in (r.get("tok_s_by_timing") or {}).values()]
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs),
            "runs": len(runs), "calls": len(found), "config": found[0]["config"],
            "timings": timings}


def summary_table(rows: Sequence[dict[str, Any]], model: str, host: str) -> str:
    """The README's table for one shape on one GPU: ours recording on, each peer's best
    configuration recording off, and the ratios of the medians."""
    cells = [(loop, b) for b in sorted({r["batch"] for r in rows if r["model"] == model})
             for loop in (Loop.NORMAL, Loop.OVERLAP)]
    head = " | ".join(f"{'serial' if loop == Loop.NORMAL else 'overlap'} B={b}" for loop, b in cells)
    lines = [f"| tok/s, median [min-max] (runs) | {head} |", "|---" * (len(cells) + 1) + "|"]
    ours = [pooled(rows, OURS, model, host, loop, b, "on") for loop, b in cells]
    lines.append("| this project (recording on) | " + " | ".join(_cell(c) for c in ours) + " |")
    for peer in PEERS:
        theirs = [pooled(rows, peer, model, host, loop, b, "off") for loop, b in cells]
        if not any(theirs):
            continue
        names = sorted({t["config"] for t in theirs if t})
        if len(names) == 1:          # one configuration was its best everywhere: named once
            label, tag = f"{peer} ({names[0]})", {names[0]: ""}
        else:                        # a letter in each cell says which configuration it is
            tag = {name: f" {chr(ord('a') + i)}" for i, name in enumerate(names)}
            label = f"{peer} ({'; '.join(f'{tag[n].strip()}: {n}' for n in names)})"
        lines.append(f"| {label} | " + " | ".join(
            _cell(t) + (tag[t["config"]] if t else "") for t in theirs) + " |")
        lines.append(f"| this project / {peer} | " + " | ".join(
            f"{o['median'] / t['median']:.2f}x" if o and t else "–"
            for o, t in zip(ours, theirs)) + " |")
    return "\n".join(lines)


def recording_cost(rows: Sequence[dict[str, Any]], model: str, host: str) -> str:
    """What our recorder costs ``generate()`` on one GPU, call by call: tokens/s with recording
    on and off (timed alternately) and the cost in % of the off median."""
    lines = ["| call | loop | B | recording on, tok/s | off | cost | start → end, on |",
             "|---|---|---|---|---|---|---|"]
    ours = [r for r in rows if r["engine"] == OURS and r["model"] == model and host_of(r) == host]
    for on in (r for r in ours if r["recording"] == "on"):
        off = next((r for r in ours if r["recording"] == "off" and _call(r) == _call(on)
                    and (r["loop"], r["batch"]) == (on["loop"], on["batch"])), None)
        if off is None:
            continue
        drift = " → ".join(f"{v:,.0f}" for v in (on.get("tok_s_by_timing") or {}).values())
        cost = 100 * (1 - on["tok_s_median"] / off["tok_s_median"])
        lines.append(f"| {_call(on)} | {on['loop']} | {on['batch']} | {_speeds(on)} | "
                     f"{_speeds(off)} | {cost:.1f}% | {drift or '–'} |")
    return "\n".join(lines)


def _call(row: Mapping[str, Any]) -> str:
    """The call a row was measured in ("" where it names none)."""
    return str((row.get("where") or {}).get("call") or "")


def _speeds(row: Mapping[str, Any]) -> str:
    return f"{row['tok_s_median']:,.0f} [{row['tok_s_min']:,.0f}-{row['tok_s_max']:,.0f}]"


def _cell(p: Mapping[str, Any] | None) -> str:
    return "–" if p is None else f"{p['median']:,.0f} [{p['min']:,.0f}-{p['max']:,.0f}] ({p['runs']})"


def format_phases(rows: Sequence[dict[str, Any]], model: str) -> str:
    """Where each loop's decode step goes (recording on): T_fwd, the scheduler thread's phases
    (µs per steady decode step) and T_cpu."""
    lines = ["| engine | configuration | loop | B | step us | T_fwd us | " + " | ".join(PHASES)
             + " | T_cpu us |", "|---|---|---|---|---|---|" + "---|" * len(PHASES) + "---|"]
    for r in ordered(row for row in rows if row["model"] == model):
        if r["recording"] != "on" or r["step_ms"] is None:
            continue
        phases = " | ".join(f"{r['cpu_phases_us'].get(p, 0.0):.0f}" for p in PHASES)
        lines.append(f"| {r['engine']} | {r['config']} | {r['loop']} | {r['batch']} | "
                     f"{r['step_ms'] * 1e3:.0f} | {r['forward_ms'] * 1e3:.0f} | {phases} | "
                     f"{r['cpu_ms'] * 1e3:.0f} |")
    return "\n".join(lines)


def overlap_gains(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per engine, configuration, shape, recording state and B: overlap's gain over normal,
    end to end (tokens/s) and, where both loops were recorded, per step."""
    by_key = {(r["engine"], r["config"], r["model"], r["recording"], r["batch"], r["loop"]): r
              for r in rows}
    gains = []
    for (engine, config, model, recording, batch, loop), normal in sorted(by_key.items()):
        overlap = by_key.get((engine, config, model, recording, batch, Loop.OVERLAP))
        if loop != Loop.NORMAL or overlap is None:
            continue
        step = (normal["step_ms"] / overlap["step_ms"]
                if normal["step_ms"] and overlap["step_ms"] else None)
        gains.append({"engine": engine, "config": config, "model": model, "recording": recording,
                      "batch": batch, "end_to_end": overlap["tok_s_median"] / normal["tok_s_median"],
                      "per_step": step})
    return gains


def format_gains(gains: Sequence[dict[str, Any]], model: str) -> str:
    lines = ["| engine | configuration | recording | B | overlap / normal, end to end | "
             "per decode step |", "|---|---|---|---|---|---|"]
    for g in gains:
        if g["model"] == model:
            lines.append(f"| {g['engine']} | {g['config']} | {g['recording']} | {g['batch']} | "
                         f"{g['end_to_end']:.2f}x | {_ratio(g['per_step'])} |")
    return "\n".join(lines)


def merge(old_rows: Sequence[dict[str, Any]], new_rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """An earlier document's rows, then this call's (every row names its call and host). Rows
    that name no call (an older layout) are dropped."""
    calls = {_call(r) for r in new_rows}
    kept = [r for r in old_rows if _call(r) and _call(r) not in calls]
    return kept + list(new_rows)


UNITED = ("commits", "versions", "configurations")    # a merged header's: every kept call's


def _measured(header: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(engine, shape) pairs a call's header says it timed."""
    engines = {name.split(":")[0] for name in header.get("configurations", {})}
    if header.get("ours"):
        engines.add(OURS)
    return {(e, m) for e in engines for m in header.get("workload", {}).get("models", [])}


def merge_header(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """This call's header, with the commits, versions and configurations of every call whose
    rows ``merge`` kept (this call's own under ``own``, those calls' headers under ``earlier``,
    oldest first); a call whose every (engine, shape) a later call timed again is dropped."""
    earlier = old.get("earlier", [])
    own = {k: v for k, v in old.items() if k not in ("earlier", "own")} | old.get("own", {})
    calls = [*(earlier if isinstance(earlier, list) else [earlier] if earlier else []), own]
    taken = set(_measured(new))
    kept: list[dict[str, Any]] = []
    for call in reversed(calls):                     # the newest call owns a pair it timed
        pairs = _measured(call) - taken
        taken |= pairs
        if pairs:
            kept.insert(0, dict(call))
    merged = dict(new)
    merged["own"] = {key: new.get(key, {}) for key in UNITED}   # this call's, as it said them
    for key in UNITED:
        merged[key] = {k: v for call in kept for k, v in call.get(key, {}).items()
                       if v and v != "unknown"} | {k: v for k, v in new.get(key, {}).items()
                                                   if v and v != "unknown"}
    merged["earlier"] = kept
    return merged


def document(header: Mapping[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON written to ``studies/results/peer-*.json``."""
    rows = ordered(add_ratios(list(rows)))
    return {"header": dict(header), "rows": rows, "overlap_gains": overlap_gains(rows)}


def report(doc: Mapping[str, Any]) -> str:
    """The document as the tables a reader sees, a shape at a time."""
    h = doc["header"]
    models = sorted({r["model"] for r in doc["rows"]})
    parts = [f"{h.get('gpu')}, torch {h.get('torch_version')}; commits {h.get('commits')}",
             "* measured in the hooked runs beside the timed ones; (best): the peer's fastest "
             "configuration with recording off on that GPU, which the ratios take"]
    for model in models:
        for host in hosts(r for r in doc["rows"] if r["model"] == model):
            gpu = next(((r.get("where") or {}).get("gpu", "") for r in doc["rows"]
                        if host_of(r) == host), "")
            parts += [f"## {model} on {gpu} {host or '(GPU not said)'}",
                      summary_table(doc["rows"], model, host) if host else
                      "(rows that name no GPU: no ratios)",
                      format_table(doc["rows"], model, host)]
            if host:
                parts += ["What the recorder costs us (ours, recording on against off):",
                          recording_cost(doc["rows"], model, host)]
        parts += ["Where a decode step goes (recording on; µs per steady decode step):",
                  format_phases(doc["rows"], model), "Overlap's gain:",
                  format_gains(doc["overlap_gains"], model)]
    return "\n\n".join(parts)


# ---- a peer's recorded runs as one of our records ----------------------------------------------

def hook_cost_note(engine: str, loop: str, cost: Mapping[str, Any]) -> dict[str, Any]:
    """What the hook costs one loop end to end (median plain vs hooked runs), en and zh."""
    plain, hooked = statistics.median(cost["plain_s"]), statistics.median(cost["hooked_s"])
    pct = 100 * (hooked - plain) / plain
    per_step_us = (hooked - plain) / max(cost["steps"], 1) * 1e6
    n = len(cost["plain_s"])
    name = {Loop.NORMAL: ("serial", "串行"), Loop.OVERLAP: ("overlap", "重叠")}[Loop(loop)]
    return {"key": "hook_cost", "loop": loop, "runs": n, "plain_s": plain, "hooked_s": hooked,
            "cost_pct": pct, "per_step_us": per_step_us,
            "en": f"The recorder hooked into {engine}'s {name[0]} loop made generate() "
                  f"{pct:+.1f}% longer ({per_step_us:+.0f} µs a step; median of {n} runs with "
                  "the hook and without, interleaved).",
            "zh": f"挂进 {engine} {name[1]}循环的记录器让 generate() 的耗时变化 {pct:+.1f}%"
                  f"（每步 {per_step_us:+.0f} µs；有钩子与无钩子各 {n} 次交替运行，取中位数）。"}


SERIAL_UPLOAD_NOTES = {
    MINISGL: {
        "key": "serial_metadata_spans",
        "en": "Mini-SGLang's serial loop enqueues its batch metadata on its engine stream, at the "
              "CPU's pace, between forwards; those spans are not drawn (they would count the GPU "
              "busy while it waits for the CPU): the CPU lane's schedule spans show that time.",
        "zh": "Mini-SGLang 的串行循环在两次前向之间，按 CPU 的节奏把批次元数据排入引擎流；这些区间"
              "不画出（否则会把 GPU 等待 CPU 的时间算作忙碌）：这段时间见 CPU 轨道上的 schedule "
              "区间。"},
    SGLANG: {
        "key": "serial_metadata_spans",
        "en": "SGLang's serial loop runs everything on its schedule stream, the forward too (drawn "
              "on the engine lane); the batch metadata it copies there at the CPU's pace between "
              "forwards is not drawn (it would count the GPU busy while it waits for the CPU): "
              "the CPU lane's schedule spans show that time. Its overlap loop moves the forward to "
              "a forward stream and the result copy to a copy stream.",
        "zh": "SGLang 的串行循环把一切都放在调度流上，前向也是（画在引擎轨道上）；两次前向之间按 "
              "CPU 的节奏拷贝到那里的批次元数据不画出（否则会把 GPU 等待 CPU 的时间算作忙碌）："
              "这段时间见 CPU 轨道上的 schedule 区间。它的重叠循环把前向移到前向流，把结果拷贝移"
              "到拷贝流。"},
}


def steps_from_one(run: dict[str, Any]) -> dict[str, Any]:
    """The run with its steps numbered from 1, as ours are (SGLang's ``forward_ct`` runs on
    from the warm-up), so a step window picks the same steps in every run side by side."""
    steps = [s["step"] for s in run["spans"] if s.get("step") is not None]
    shift = min(steps, default=1) - 1
    if shift:
        run["spans"] = [dict(s, step=s["step"] - shift) if s.get("step") is not None else s
                        for s in run["spans"]]
    return run


def peer_record(engine: str, outs: Sequence[Mapping[str, Any]], model: str, prompt_len: int,
                commit: str, max_seq_len: int) -> RecordDict:
    """A peer's record (both loops, serial first) from its processes' outputs."""
    from record.run_record import make_record

    outs = sorted(outs, key=lambda o: o["loop"] != Loop.NORMAL)
    first = outs[0]
    runs = [steps_from_one(o["record"]) for o in outs]
    batch = len(runs[0]["outputs"])
    key = ENGINE_KEYS[engine]
    env = {**first["env"], "engine": key, "engine_commit": commit, "model": model,
           "random_weights": True, "dtype": "bfloat16"}
    config = {"engine": key, "commit": commit, "configuration": first.get("config_name", ""),
              "engine_args": first.get("config", {}), "model": model, "device": "cuda",
              "cuda_graph": True, "max_batch_size": batch, "requests": batch,
              "prompt_tokens": prompt_len,
              "max_new_tokens": len(runs[0]["outputs"][0]["token_ids"]),
              "ignore_eos": True, "max_seq_len": max_seq_len}
    record = make_record(env, config, runs)
    record["notes"] = [hook_cost_note(engine, o["loop"], o["hook_cost"]) for o in outs]
    record["notes"].append(SERIAL_UPLOAD_NOTES[engine])
    return record


def gpu_tag(device_name: str) -> str:
    """"h100" for "NVIDIA H100 80GB HBM3": the GPU's model in file names."""
    for word in device_name.split():
        if re.fullmatch(r"[A-Za-z]+[0-9]+[A-Za-z0-9]*", word) and word.upper() != "NVIDIA":
            return word.lower()
    return "gpu"


def record_name(device_name: str, engine: str, model: str, batch: int) -> str:
    """``h200-minisglang-qwen05-b16.json``: the GPU, the engine, the model, the batch size."""
    short = {"qwen2.5-0.5b-shape": "qwen05", "qwen2.5-1.5b-shape": "qwen15",
             "smollm2-135m-shape": "smollm", "llama-3.1-8b-shape": "llama8b"}.get(model, model)
    name = ENGINE_KEYS.get(engine, engine).replace("-", "")
    return f"{gpu_tag(device_name)}-{name}-{short}-b{batch}.json"


if __name__ == "__main__":     # python -m studies.peers.table studies/results/peer-h100.json
    import json
    import sys

    print(report(json.loads(open(sys.argv[1], encoding="utf-8").read())))
