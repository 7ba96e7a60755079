"""The paged decode-attention kernel in Triton (CUDA only; ``paged_attention.py`` explains it).

Two launches, as in FlashDecoding: ``_split_kernel``, grid ``(B, KV, max_chunks)``, one program per
row, KV head and chunk; ``_merge_kernel``, grid ``(B, H)``, merges a row's chunks by their
log-sum-exp. Nothing depends on the batch's lengths at launch, so CUDA graphs capture it as is."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _rope(X, x, offs, mask, d, pos, InvFreq, HALF: tl.constexpr):
    """``x`` (loaded from ``X + offs``) rotated by RoPE at ``pos`` in float32, as ``apply_rope``."""
    other = tl.where(d < HALF, d + HALF, d - HALF)
    x_other = tl.load(X + offs - d + other, mask=mask, other=0.0).to(tl.float32)
    theta = pos.to(tl.float32) * tl.load(InvFreq + d % HALF, mask=d < 2 * HALF, other=0.0)
    rotated = tl.where(d < HALF, -x_other, x_other)
    return x.to(tl.float32) * tl.cos(theta) + rotated * tl.sin(theta)


@triton.jit
def _chunk_plan(kv_len, NUM_SPLITS: tl.constexpr, CHUNK_KEYS: tl.constexpr, BLOCK_N: tl.constexpr):
    """(keys per chunk, chunks the row runs) from the row's length, as ``chunk_plan`` in
    ``paged_attention.py``: by length (``CHUNK_KEYS > 0``) or the fixed scheme (0)."""
    if CHUNK_KEYS > 0:
        wanted = tl.minimum(tl.maximum(tl.cdiv(kv_len, CHUNK_KEYS), 1), NUM_SPLITS)
    else:
        wanted = kv_len * 0 + NUM_SPLITS
    per = tl.maximum(tl.cdiv(tl.cdiv(kv_len, wanted), BLOCK_N), 1) * BLOCK_N
    if CHUNK_KEYS > 0:
        count = tl.maximum(tl.cdiv(kv_len, per), 1)
    else:
        count = wanted
    return per, count


@triton.jit
def _split_kernel(Q, K_new, V_new, K_cache, V_cache, Table, Lens, InvFreq, Out, Mid, Lse,
                  stride_qb, stride_qh, stride_kb, stride_kh, stride_vb, stride_vh,
                  stride_cache_slot, stride_cache_head, stride_table, stride_ob, stride_oh,
                  stride_mb, stride_mh, stride_ms, stride_lb, stride_lh, scale,
                  PAGE_SIZE: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                  BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                  NUM_SPLITS: tl.constexpr, CHUNK_KEYS: tl.constexpr, PRECISION: tl.constexpr,
                  ROPE: tl.constexpr):
    row = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    kv_len = tl.load(Lens + row).to(tl.int32)          # real keys of this row (0: padding)
    per, count = _chunk_plan(kv_len, NUM_SPLITS, CHUNK_KEYS, BLOCK_N)
    if split >= count:                                 # past this row's chunks: nothing to do
        return
    last = kv_len - 1                                  # this step's position
    start = tl.minimum(split * per, kv_len)
    end = tl.minimum(start + per, kv_len)

    h = tl.arange(0, BLOCK_H)
    heads = kv_head * GROUP + h                        # the query heads that share this KV head
    h_ok = h < GROUP
    d = tl.arange(0, BLOCK_D)
    d_ok = d < HEAD_DIM
    hd_ok = h_ok[:, None] & d_ok[None, :]
    q_offs = row * stride_qb + heads[:, None] * stride_qh + d[None, :]
    q = tl.load(Q + q_offs, mask=hd_ok, other=0.0)                      # [BLOCK_H, BLOCK_D]
    k_offs = row * stride_kb + kv_head * stride_kh + d
    k_new = tl.load(K_new + k_offs, mask=d_ok, other=0.0)
    v_new = tl.load(V_new + row * stride_vb + kv_head * stride_vh + d, mask=d_ok, other=0.0)
    if ROPE:                                           # this step's q and k, at position `last`
        q = _rope(Q, q, q_offs, hd_ok, d[None, :], last, InvFreq, HEAD_DIM // 2).to(q.dtype)
        k_new = _rope(K_new, k_new, k_offs, d_ok, d, last, InvFreq, HEAD_DIM // 2).to(k_new.dtype)

    m = tl.full([BLOCK_H], float("-inf"), tl.float32)  # running max of the scores
    denom = tl.zeros([BLOCK_H], tl.float32)            # running sum of exp(score - m)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)     # running sum of exp(score - m) * v
    for n0 in range(start, end, BLOCK_N):
        pos = n0 + tl.arange(0, BLOCK_N)
        in_chunk = pos < end
        page = tl.load(Table + row * stride_table + pos // PAGE_SIZE, mask=in_chunk, other=0)
        slot = page * PAGE_SIZE + pos % PAGE_SIZE      # int64: where key `pos` lies in the cache
        offs = slot[:, None] * stride_cache_slot + kv_head * stride_cache_head + d[None, :]
        cached = (in_chunk & (pos != last))[:, None] & d_ok[None, :]
        is_new = (pos == last)[:, None]                # this step's key: from k_new, not the cache
        k = tl.where(is_new, k_new[None, :], tl.load(K_cache + offs, mask=cached, other=0.0))
        v = tl.where(is_new, v_new[None, :], tl.load(V_cache + offs, mask=cached, other=0.0))
        scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # [BLOCK_H, BLOCK_N]
        scores = tl.where(in_chunk[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, 1))
        alpha = tl.exp(m - m_new)                      # rescale what was summed under the old max
        p = tl.exp(scores - m_new[:, None])
        denom = denom * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m = m_new

    if (last >= start) & (last < end):                 # only the chunk holding `last` stores it
        page = tl.load(Table + row * stride_table + last // PAGE_SIZE)
        at = (page * PAGE_SIZE + last % PAGE_SIZE) * stride_cache_slot + kv_head * stride_cache_head
        tl.store(K_cache + at + d, k_new, mask=d_ok)
        tl.store(V_cache + at + d, v_new, mask=d_ok)

    found = denom > 0                                  # a padding row (no keys) writes 0
    safe = tl.where(found, denom, 1.0)
    out = acc / safe[:, None]
    if NUM_SPLITS == 1:                                # no row has two chunks: the answer
        tl.store(Out + row * stride_ob + heads[:, None] * stride_oh + d[None, :],
                 out.to(Out.dtype.element_ty), mask=hd_ok)
    elif count == 1:                                   # this row's only chunk: the answer
        tl.store(Out + row * stride_ob + heads[:, None] * stride_oh + d[None, :],
                 out.to(Out.dtype.element_ty), mask=hd_ok)
    else:                                              # one of several: for the merge
        tl.store(Mid + row * stride_mb + heads[:, None] * stride_mh + split * stride_ms
                 + d[None, :], out, mask=hd_ok)
        lse = tl.where(found, m + tl.log(safe), float("-inf"))
        tl.store(Lse + row * stride_lb + heads * stride_lh + split, lse, mask=h_ok)


@triton.jit
def _merge_kernel(Mid, Lse, Out, Lens, stride_mb, stride_mh, stride_ms, stride_lb, stride_lh,
                  stride_ob, stride_oh, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                  NUM_SPLITS: tl.constexpr, CHUNK_KEYS: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_S: tl.constexpr):
    row = tl.program_id(0)
    head = tl.program_id(1)
    kv_len = tl.load(Lens + row).to(tl.int32)
    per, count = _chunk_plan(kv_len, NUM_SPLITS, CHUNK_KEYS, BLOCK_N)
    if count == 1:                                     # the split kernel wrote this row's answer
        return
    s = tl.arange(0, BLOCK_S)
    s_ok = s < count
    d = tl.arange(0, BLOCK_D)
    d_ok = d < HEAD_DIM
    lse = tl.load(Lse + row * stride_lb + head * stride_lh + s, mask=s_ok, other=float("-inf"))
    top = tl.max(lse, 0)
    w = tl.where(lse > float("-inf"), tl.exp(lse - top), 0.0)           # empty chunks weigh 0
    total = tl.sum(w, 0)
    o = tl.load(Mid + row * stride_mb + head * stride_mh + s[:, None] * stride_ms + d[None, :],
                mask=s_ok[:, None] & d_ok[None, :], other=0.0)          # [BLOCK_S, BLOCK_D]
    out = tl.sum(o * w[:, None], 0) / tl.where(total > 0, total, 1.0)
    tl.store(Out + row * stride_ob + head * stride_oh + d, out.to(Out.dtype.element_ty), mask=d_ok)


def paged_decode_attention(q, k_new, v_new, k_cache, v_cache, ctx,
                           out: torch.Tensor | None = None, num_warps: int = 4) -> torch.Tensor:
    """``q [B, H, D]``, this step's ``k_new, v_new [B, KV, D]`` (stored into the caches
    ``[slots, KV, D]`` at ``kv_lens - 1``), pages and chunks in ``ctx`` -> ``[B, H, D]``. With
    ``ctx.inv_freq [D/2]``, q and k are rotated by RoPE first. Last dimensions contiguous."""
    page_table, kv_lens, inv_freq, chunks = ctx.page_table, ctx.kv_lens, ctx.inv_freq, ctx.chunking
    num_splits = chunks.max_chunks
    b, nh, d = q.shape
    nkv = k_cache.shape[1]
    assert nh % nkv == 0 and k_cache.stride() == v_cache.stride() and k_cache.stride(2) == 1
    assert q.stride(2) == k_new.stride(2) == v_new.stride(2) == page_table.stride(1) == 1
    assert kv_lens.is_contiguous() and q.dtype == k_cache.dtype
    assert chunks.chunk_keys % chunks.block_n == 0, "a chunk is whole blocks"
    group = nh // nkv
    if out is None:
        out = torch.empty(b, nh, d, dtype=q.dtype, device=q.device)
    assert out.shape == q.shape and out.stride(2) == 1
    if num_splits == 1:       # no row has two chunks: no partials, no merge
        mid, lse = out, out
        mid_strides, lse_strides = (0, 0, 0), (0, 0)
    else:
        mid = torch.empty(b, nh, num_splits, d, dtype=torch.float32, device=q.device)
        lse = torch.empty(b, nh, num_splits, dtype=torch.float32, device=q.device)
        mid_strides, lse_strides = mid.stride()[:3], lse.stride()[:2]
    block_d = max(16, triton.next_power_of_2(d))
    plan = dict(NUM_SPLITS=num_splits, CHUNK_KEYS=chunks.chunk_keys, BLOCK_N=chunks.block_n)
    _split_kernel[(b, nkv, num_splits)](
        q, k_new, v_new, k_cache, v_cache, page_table, kv_lens,
        inv_freq if inv_freq is not None else kv_lens, out, mid, lse,
        q.stride(0), q.stride(1), k_new.stride(0), k_new.stride(1), v_new.stride(0),
        v_new.stride(1), k_cache.stride(0), k_cache.stride(1), page_table.stride(0),
        out.stride(0), out.stride(1), *mid_strides, *lse_strides, 1.0 / math.sqrt(d),
        PAGE_SIZE=ctx.page_size, GROUP=group, HEAD_DIM=d, BLOCK_H=max(16, triton.next_power_of_2(group)),
        BLOCK_D=block_d, **plan,
        # float32 scores in true float32 (the test oracle's precision); tf32 is the default
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32", ROPE=inv_freq is not None,
        num_warps=num_warps)
    if num_splits > 1:
        _merge_kernel[(b, nh)](mid, lse, out, kv_lens, *mid_strides, *lse_strides, out.stride(0),
                               out.stride(1), HEAD_DIM=d, BLOCK_D=block_d, **plan,
                               BLOCK_S=triton.next_power_of_2(num_splits), num_warps=num_warps)
    return out
