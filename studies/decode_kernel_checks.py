"""The parts of ``studies/decode_kernels.py`` that need no engine: timing, the kernels' correctness
on the GPU, one layer's attention alone, options measured, the final table. Timing replays CUDA
graphs over as many buffers as a step reads (nothing served from cache); correctness uses fresh
inputs, NaN-poisoned outputs and ``||out - ref|| / ||ref||`` against float64."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from typing import Any

import torch

from bench.timing import ms_per_call
from engine.layers.paged_attention import (
    Chunking,
    PagedDecodeContext,
    by_length,
    fixed_chunking,
    paged_attention_reference,
    rope_at,
)
from engine.models.loader import PRESETS
from engine.models.model import rope_inv_freq

DEVICE = "cuda"
ROTATE_BYTES = 200 << 20     # timed inputs rotate over more bytes than an H100's or H200's L2
PAGE = 16
TOLERANCE = {torch.bfloat16: 1e-2, torch.float32: 1e-5}


def graph_us(calls, repeats: int = 15) -> float:
    """Microseconds per call: ``calls`` captured back to back in one CUDA graph (after one eager
    pass, which compiles), median over ``repeats`` replays."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    ms = ms_per_call(graph.replay, 1, repeats)
    return statistics.median(ms) * 1e3 / len(calls)


def kernel_profile(replay, steps: int) -> dict[str, Any]:
    """Every kernel of ``steps`` calls of ``replay`` by name: count and µs a step, costliest
    first; and the step's time, so what lies between kernels shows."""
    from studies.forward_gap import profiled_kernels
    from studies.kernel_account import account
    acc = account(profiled_kernels(replay, steps), steps, 0.0, top=None)
    step_ms = statistics.median(ms_per_call(replay, steps, 5))
    return {"step_us": step_ms * 1e3, "kernels_us": acc.kernel_us,
            "rows": [{"kernel": r.name, "count": r.per_step, "us": r.us_per_step}
                     for r in acc.kernels]}


# ---- c: correctness -----------------------------------------------------------------------------------

def _shape(model: str) -> tuple[int, int, int, int]:
    spec = PRESETS[model]
    return spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.num_layers


def _case(gen, model: str, lens: list[int], dtype, table=None) -> dict[str, Any]:
    """Random q, this step's k, v, caches; each row's pages scattered over the pool (or
    ``table``'s)."""
    nh, nkv, d, _ = _shape(model)
    b, per_row = len(lens), -(-max(max(lens), 1) // PAGE)
    if table is None:
        table = torch.randperm(b * per_row, generator=gen, device=DEVICE).view(b, per_row)
    slots = (b * per_row + 1) * PAGE

    def rand(*s):
        return torch.randn(*s, generator=gen, device=DEVICE).to(dtype)

    return dict(q=rand(b, nh, d), k_new=rand(b, nkv, d), v_new=rand(b, nkv, d),
                k_cache=rand(slots, nkv, d), v_cache=rand(slots, nkv, d), page_table=table,
                kv_lens=torch.tensor(lens, device=DEVICE))


def _run(c, chunking: Chunking, inv_freq, rope_in_kernel: bool):
    """The kernel on copies of the caches, into a NaN-poisoned output. Without RoPE in the
    kernel, q and k are rotated first (as the earlier compiled step did, in a kernel of its own)."""
    from engine.layers.attention_triton import paged_decode_attention
    q, k_new = c["q"], c["k_new"]
    if not rope_in_kernel:
        last = (c["kv_lens"] - 1).clamp_min(0)
        q, k_new = rope_at(q, last, inv_freq), rope_at(k_new, last, inv_freq)
    out = torch.full_like(q, float("nan"))
    caches = c["k_cache"].clone(), c["v_cache"].clone()
    ctx = PagedDecodeContext(c["page_table"], c["kv_lens"], PAGE, chunking,
                             inv_freq=inv_freq if rope_in_kernel else None)
    paged_decode_attention(q, k_new, c["v_new"], *caches, ctx, out=out)
    torch.cuda.synchronize()                   # surfaces a launch's error here, not later
    return out, caches


def _reference(c, inv_freq):
    """float64: rotate q and k at the row's position, store k, v, attend over the row's keys."""
    lens = c["kv_lens"]
    last = (lens - 1).clamp_min(0)
    q, k_new = rope_at(c["q"].double(), last, inv_freq), rope_at(c["k_new"].double(), last, inv_freq)
    k, v = c["k_cache"].double(), c["v_cache"].double()
    rows = (lens > 0).nonzero()[:, 0]
    slot = c["page_table"][rows, last[rows] // PAGE] * PAGE + last[rows] % PAGE
    k[slot], v[slot] = k_new[rows], c["v_new"][rows].double()
    out = paged_attention_reference(q, k, v, c["page_table"], lens, PAGE)
    return out, slot, k_new[rows]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def _check_case(gen, model, lens, dtype, max_seq) -> list[dict[str, Any]]:
    c = _case(gen, model, lens, dtype)
    inv_freq = rope_inv_freq(PRESETS[model], DEVICE)
    ref, slot, k_ref = _reference(c, inv_freq)
    pad = c["kv_lens"] == 0
    rows, outs = [], {}
    for label, chunking, in_kernel in (("now", by_length(max_seq), True),
                                       ("earlier", fixed_chunking(max_seq), False)):
        out, (k_cache, v_cache) = _run(c, chunking, inv_freq, in_kernel)
        outs[label] = out
        err = _rel(out[~pad], ref[~pad])
        ok = bool(torch.isfinite(out).all()) and bool((out[pad] == 0).all()) and \
            err < TOLERANCE[dtype] and torch.equal(v_cache[slot], c["v_new"][c["kv_lens"] > 0])
        k_err = _rel(k_cache[slot], k_ref)
        rows.append({"model": model, "dtype": str(dtype), "batch": len(lens), "max_seq": max_seq,
                     "longest": max(lens), "kernels": label, "chunking": chunking.label,
                     "rel_err": err, "stored_k_rel_err": k_err,
                     "ok": ok and k_err < TOLERANCE[dtype]})
    rows[0]["rel_diff_now_vs_earlier"] = _rel(outs["now"][~pad], outs["earlier"][~pad])
    return rows


def _batch_independent(gen, model, lens, dtype, max_seq) -> bool:
    """Each row alone gives bit for bit what it gives inside the batch (now's chunking)."""
    c = _case(gen, model, lens, dtype)
    inv_freq = rope_inv_freq(PRESETS[model], DEVICE)
    whole, _ = _run(c, by_length(max_seq), inv_freq, True)
    for row in range(len(lens)):
        alone = {k: (v[row:row + 1] if k in ("q", "k_new", "v_new", "page_table", "kv_lens") else v)
                 for k, v in c.items()}
        if not torch.equal(_run(alone, by_length(max_seq), inv_freq, True)[0][0], whole[row]):
            return False
    return True


def _argmax_checks(gen) -> list[dict[str, Any]]:
    """The two-pass argmax against torch.argmax: random logits with the maximum planted again
    further on, rows all equal, all -inf, NaN, +inf; every vocabulary of the two shapes."""
    from engine.layers.argmax_triton import argmax
    rows = []
    for vocab in (PRESETS["llama-3.1-8b-shape"].vocab_size, PRESETS["qwen2.5-0.5b-shape"].vocab_size):
        for dtype in (torch.bfloat16, torch.float32):
            x = torch.randn(64, vocab, generator=gen, device=DEVICE).to(dtype)
            spots = torch.randint(0, vocab, (64, 3), generator=gen, device=DEVICE)
            r = torch.arange(64, device=DEVICE)
            top = x.max(dim=1).values
            x[r[1::6, None], spots[1::6]] = top[1::6, None]          # ties, further on
            x[2::6] = 1.5                                            # all equal
            x[3::6] = float("-inf")
            x[r[4::6, None], spots[4::6, :2]] = float("nan")         # NaN beats everything
            x[r[5::6, None], spots[5::6, :2]] = float("inf")
            torch.full((1 << 22,), -7, dtype=torch.int64, device=DEVICE)   # poison the blocks
            out = argmax(x)                                                  # ... it reuses
            rows.append({"vocab": vocab, "dtype": str(dtype),
                         "equal": bool(torch.equal(out, x.argmax(dim=-1)))})
    return rows


def correctness(model_8b: str, model_05b: str) -> dict[str, Any]:
    gen = torch.Generator(DEVICE).manual_seed(1234)

    def lens(n, hi, extra=()):
        return list(extra) + torch.randint(1, hi + 1, (n,), generator=gen,
                                           device=DEVICE).tolist()

    bf16, fp32 = torch.bfloat16, torch.float32
    cases = [(model_8b, lens(62, 176, (0, 176)), bf16, 176),             # one chunk a row
             (model_8b, [96], bf16, 176), (model_8b, [160], bf16, 176),
             (model_8b, lens(62, 1040, (0, 1040)), bf16, 1040),         # up to 5 chunks
             (model_8b, [1, 255, 256, 257, 1024, 4000, 4096], bf16, 4096),  # up to 16
             (model_8b, lens(14, 1040, (0, 300)), fp32, 1040),
             (model_05b, lens(62, 176, (0, 176)), bf16, 176)]
    attention = [row for case in cases for row in _check_case(gen, *case)]
    independent = [_batch_independent(gen, model_8b, [0, 1, 97, 176, 160, 33], bf16, 176),
                   _batch_independent(gen, model_8b, [1, 300, 1040, 257, 96, 0], bf16, 1040)]
    argmax_rows = _argmax_checks(gen)
    out: dict[str, Any] = {"attention": attention, "batch_independent": all(independent),
                           "argmax": argmax_rows}
    out["all_ok"] = (all(r["ok"] for r in attention) and all(independent)
                     and all(r["equal"] for r in argmax_rows))
    print(f"correctness: {'all ok' if out['all_ok'] else 'FAILED'}", flush=True)
    return out


# ---- d: one layer's attention -------------------------------------------------------------------------

def _layers(model: str, batch: int, context: int):
    """One decode step's attention inputs per layer, each layer its own random cache; rows at
    ``context`` keys, each on pages of its own."""
    per_row = -(-context // PAGE)
    table = torch.arange(batch * per_row, device=DEVICE).view(batch, per_row)
    return [_case(None, model, [context] * batch, torch.bfloat16, table)
            for _ in range(_shape(model)[3])]


def attention_variants(max_seq: int) -> list[tuple[str, Chunking, bool]]:
    """(label, chunking, RoPE in the kernel): earlier, now, then options not taken."""
    return [("earlier", fixed_chunking(max_seq), False), ("now", by_length(max_seq), True),
            ("now, blocks of 64", by_length(max_seq, block_n=64), True),
            ("now, 128 keys a chunk", by_length(max_seq, chunk_keys=128), True)]


def attention_times(models, limit_s: float) -> list[dict[str, Any]]:
    """µs per layer of decode attention: a graph of one call per layer, as a step runs them.
    Earlier and now in every cell first; the options not taken after, while time allows."""
    from engine.layers.attention_triton import paged_decode_attention
    end = time.monotonic() + limit_s
    rows: list[dict[str, Any]] = []
    for variants in ((0, 1), (2, 3)):
        for model in models:
            inv_freq = rope_inv_freq(PRESETS[model], DEVICE)
            for batch in (1, 64):
                for context in (96, 160, 1024):
                    if time.monotonic() > end:
                        return rows
                    max_seq = 176 if context <= 160 else context + 16
                    inputs = _layers(model, batch, context)
                    for index in variants:
                        label, chunking, rope = attention_variants(max_seq)[index]
                        calls = [lambda c=c, ctx=PagedDecodeContext(
                                     c["page_table"], c["kv_lens"], PAGE, chunking,
                                     inv_freq=inv_freq if rope else None):
                                 paged_decode_attention(c["q"], c["k_new"], c["v_new"],
                                                        c["k_cache"], c["v_cache"], ctx)
                                 for c in inputs]
                        rows.append({"model": model, "batch": batch, "context": context,
                                     "kernels": label, "chunking": chunking.label,
                                     "us_per_layer": graph_us(calls)})
                    del inputs
                    torch.cuda.empty_cache()
    return rows


# ---- h: options measured, not taken -------------------------------------------------------------------

def _projection_times(model: str, batch: int) -> list[dict[str, Any]]:
    from studies.gemv_triton import gemv_partials
    spec = PRESETS[model]
    h, d, i = spec.hidden_size, spec.head_dim, spec.intermediate_size
    shapes = {"qkv_proj": ((spec.num_heads + 2 * spec.num_kv_heads) * d, h),
              "o_proj": (h, spec.num_heads * d), "gate_up_proj": (2 * i, h), "down_proj": (h, i)}
    rows = []
    for name, (n, k) in shapes.items():
        copies = min(64, max(2, -(-ROTATE_BYTES // (n * k * 2))))
        ws = [torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16) for _ in range(copies)]
        x = torch.randn(batch, k, device=DEVICE, dtype=torch.bfloat16)
        err = ((gemv_partials(x, ws[0]).sum(0) - (x.float() @ ws[0].float().T)).norm()
               / (x.float() @ ws[0].float().T).norm()).item()
        row = {"proj": name, "batch": batch, "n": n, "k": k, "weight_bytes": n * k * 2,
               "gemv_rel_err": err}
        for label, fn in (("cublas", torch.nn.functional.linear),
                          ("gemv_partials", gemv_partials),
                          ("gemv_and_sum", lambda x, w: gemv_partials(x, w).sum(0).to(x.dtype))):
            us = graph_us([lambda x=x, w=w, fn=fn: fn(x, w) for w in ws])
            row[f"{label}_us"], row[f"{label}_tbs"] = us, n * k * 2 / us / 1e6
        rows.append(row)
        del ws
    return rows


def _argmax_times(vocab: int) -> list[dict[str, Any]]:
    from engine.layers.argmax_triton import argmax
    rows = []
    for batch in (1, 64):
        count = min(256, max(2, -(-ROTATE_BYTES // (batch * vocab * 2))))
        logits = [torch.randn(batch, vocab, device=DEVICE, dtype=torch.bfloat16)
                  for _ in range(count)]
        row: dict[str, Any] = {"batch": batch, "vocab": vocab,
                               "torch_us": graph_us([lambda x=x: x.argmax(dim=-1) for x in logits])}
        for block in (1024, 2048, 4096):
            warps = 8 if block >= 4096 else 4
            row[f"two_pass_{block}_us"] = graph_us(
                [lambda x=x, b=block, w=warps: argmax(x, block=b, num_warps=w) for x in logits])
        rows.append(row)
    return rows


def options(model: str, limit_s: float) -> dict[str, Any]:
    end = time.monotonic() + limit_s
    out: dict[str, Any] = {"argmax": _argmax_times(PRESETS[model].vocab_size), "projections": []}
    for batch in (64, 1):
        if time.monotonic() < end:
            out["projections"] += _projection_times(model, batch)
    return out


# ---- the table ----------------------------------------------------------------------------------------

def profile_text(profile: dict[str, Any] | None, top: int = 40) -> str:
    """(g) one decode step's kernels by name, costliest first."""
    if not profile:
        return "\nno kernel profile"
    lines = [f"\nkernels of one 8B B=64 decode step (now, context 96): step "
             f"{profile['step_us']:.0f} µs, kernels {profile['kernels_us']:.0f} µs, between "
             f"{profile['step_us'] - profile['kernels_us']:.0f} µs",
             "| kernel | count | µs |"]
    for x in profile["rows"][:top]:
        lines.append(f"| {x['kernel'][:90]} | {x['count']:g} | {x['us']:.1f} |")
    rest = profile["rows"][top:]
    if rest:
        lines.append(f"| ({len(rest)} more) | {sum(x['count'] for x in rest):g} | "
                     f"{sum(x['us'] for x in rest):.1f} |")
    return "\n".join(lines)


def report(r: dict[str, Any]) -> str:
    """The compact table printed last (the JSON holds everything)."""
    lines = []
    c = r.get("card") or {}
    lines.append(f"\n## {c.get('name')} {c.get('nvidia_smi') or c.get('uuid')}; copy "
                 + ", ".join(f"{g:.0f}" for g in r.get("copy_gbs") or []) + " GB/s (read+write)")
    ok = r.get("correctness") or {}
    bad = [x for x in ok.get("attention", []) if not x["ok"]]
    worst = {d: max((x["rel_err"] for x in ok.get("attention", []) if x["dtype"] == d), default=0)
             for d in ("torch.bfloat16", "torch.float32")}
    lines.append(f"correctness: {'ALL OK' if ok.get('all_ok') else 'FAILED'}; attention cases "
                 f"{len(ok.get('attention', [])) - len(bad)}/{len(ok.get('attention', []))} ok, "
                 f"worst rel err bf16 {worst['torch.bfloat16']:.1e}, fp32 "
                 f"{worst['torch.float32']:.1e}; batch-independent {ok.get('batch_independent')}; "
                 f"argmax exact {all(x['equal'] for x in ok.get('argmax', []))}")
    for x in bad:
        lines.append(f"  FAILED: {x}")
    att = r.get("attention_us") or []
    if att:
        labels = list(dict.fromkeys(x["kernels"] for x in att))
        lines.append("\nattention µs per layer | model | B | ctx | " + " | ".join(labels))
        cells: dict[tuple, dict[str, float]] = defaultdict(dict)
        for x in att:
            cells[(x["model"], x["batch"], x["context"])][x["kernels"]] = x["us_per_layer"]
        for (model, b, ctx), v in cells.items():
            lines.append(f"| {model} | {b} | {ctx} | "
                         + " | ".join(f"{v[k]:.1f}" if k in v else "-" for k in labels))
    lines.append("\ndecode step, 8B | kernels | B | ctx | step ms | floor ms | step/floor")
    for x in r.get("decode_step") or []:
        if "step_ms" in x:
            lines.append(f"| {x['kernels']} | {x['batch']} | {x['context']} | {x['step_ms']:.3f} | "
                         f"{x['floor_ms']:.3f} | {x['step_over_floor']:.3f}")
        else:
            lines.append(f"| {x['kernels']} | {x.get('status')}")
    lines.append("\ngenerate, 8B tok/s | kernels | loop | B | median [min-max] | step µs | fwd µs "
                 "| loops agree")
    for x in r.get("generate") or []:
        lines.append(f"| {x['kernels']} | {x['loop']} | {x['batch']} | {x['tok_s']:.0f} "
                     f"[{min(x['tok_s_all']):.0f}-{max(x['tok_s_all']):.0f}] | "
                     f"{x['steady_step_us']:.0f} | {x['t_fwd_us']:.0f} | {x.get('loops_agree')}")
    opt = r.get("options") or {}
    for x in opt.get("argmax", []):
        lines.append(f"argmax µs B={x['batch']}: torch {x['torch_us']:.1f}; two-pass " + ", ".join(
            f"{k.split('_')[2]}: {v:.1f}" for k, v in x.items() if k.startswith("two_pass")))
    for x in opt.get("projections", []):
        lines.append(f"proj {x['proj']} B={x['batch']}: cuBLAS {x['cublas_us']:.1f} µs "
                     f"({x['cublas_tbs']:.2f} TB/s), GEMV {x['gemv_partials_us']:.1f} "
                     f"({x['gemv_partials_tbs']:.2f}), GEMV+sum {x['gemv_and_sum_us']:.1f}")
    lines.append("\nparts: " + "; ".join(f"{k} {v['status']} {v.get('s', '')}"
                                         for k, v in r["parts"].items()))
    return "\n".join(lines)
