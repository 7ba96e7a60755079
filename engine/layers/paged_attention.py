"""Decode attention that reads the KV pages in place: FlashDecoding's split-K, over our page table.

A decode step has one query per row: walk the row's page table and read only its ``kv_len`` keys
where they lie, with no mask (the plain path copies each row's padded context and runs SDPA).

A row's keys are cut into chunks, one program each, one chunk per ``chunk_keys`` keys (at most
``max_chunks``). A chunk keeps an online softmax over blocks of ``block_n`` keys (running max, sum
and unnormalised output); a row of one chunk writes its answer directly, a row of several writes
each chunk's output and log-sum-exp for a second pass to merge. One program of a KV head serves all
the query heads that share it. Only the chunk holding position ``kv_len - 1`` stores this step's
``k, v``, taking them from the new tensors, so no program reads a slot another writes.

The grid is ``(B, KV, max_chunks)`` whatever the lengths; each program works out its row's chunks
from the row's own length and exits past them. So one CUDA graph serves every step, and a row's
rounding never depends on its batch: normal and overlap stay token for token identical.
``chunk_keys=0`` is the fixed scheme this replaced. ``split_k_attention`` is the kernel's arithmetic
in PyTorch (the CPU test); ``PagedDecodeContext`` picks it or the Triton kernel."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

BLOCK_N = 32               # keys per block of the online softmax
CHUNK_KEYS = 256           # a row runs one chunk per this many of its keys
MAX_CHUNKS = 16            # chunks a row may have at most (longer rows: longer chunks)
FIXED_BLOCK_N, FIXED_MIN_SPLITS = 64, 4   # the fixed scheme's block and least chunk count


@dataclass(frozen=True)
class Chunking:
    """How decode attention cuts a row's keys into chunks: ``ceil(kv_len / chunk_keys)`` of at most
    ``max_chunks`` (from ``max_seq_len``, never the batch); ``chunk_keys=0``: all ``max_chunks``."""

    max_chunks: int
    chunk_keys: int = CHUNK_KEYS
    block_n: int = BLOCK_N

    def __post_init__(self) -> None:
        if self.block_n < 16 or self.block_n & (self.block_n - 1):
            raise ValueError(f"block_n must be a power of two of at least 16, got {self.block_n}")
        if self.max_chunks < 1 or self.chunk_keys < 0 or self.chunk_keys % self.block_n:
            raise ValueError(f"need max_chunks >= 1 and chunk_keys a multiple of block_n "
                             f"({self.block_n}), got {self.max_chunks}, {self.chunk_keys}")

    @property
    def label(self) -> str:
        scheme = f"{self.chunk_keys} keys a chunk" if self.chunk_keys else "fixed"
        return f"{scheme}, up to {self.max_chunks}, blocks of {self.block_n}"


def by_length(max_seq_len: int, chunk_keys: int = CHUNK_KEYS, block_n: int = BLOCK_N) -> Chunking:
    """The engine's chunking: as many chunks as the longest row allowed can need."""
    return Chunking(max(1, min(MAX_CHUNKS, _cdiv(max_seq_len, chunk_keys))), chunk_keys, block_n)


def fixed_chunking(max_seq_len: int) -> Chunking:
    """The scheme the length-based one replaced: every row in equal chunks of blocks of 64 keys,
    always merged; one chunk per ``CHUNK_KEYS`` keys of ``max_seq_len``, 4 to ``MAX_CHUNKS``."""
    splits = max(FIXED_MIN_SPLITS, min(MAX_CHUNKS, _cdiv(max_seq_len, CHUNK_KEYS)))
    return Chunking(splits, 0, FIXED_BLOCK_N)


def chunk_plan(kv_len: int, num_splits: int, block_n: int, chunk_keys: int = 0) -> tuple[int, int]:
    """(keys per chunk, chunks the row runs) for a row of ``kv_len`` keys: what each program of
    the kernel computes from the row's length (``_chunk_plan`` in ``attention_triton.py``)."""
    if chunk_keys:
        wanted = min(max(_cdiv(kv_len, chunk_keys), 1), num_splits)
    else:
        wanted = num_splits
    per = max(_cdiv(_cdiv(kv_len, wanted), block_n), 1) * block_n     # whole blocks
    return per, (max(_cdiv(kv_len, per), 1) if chunk_keys else num_splits)


def split_bounds(kv_len: int, num_splits: int, block_n: int,
                 chunk_keys: int = 0) -> list[tuple[int, int]]:
    """``[start, end)`` of each chunk the row runs. By length (``chunk_keys > 0``) every chunk
    holds keys, except the one chunk of an empty (padding) row; fixed, the last chunks may be
    empty."""
    per, count = chunk_plan(kv_len, num_splits, block_n, chunk_keys)
    return [(min(s * per, kv_len), min((s + 1) * per, kv_len)) for s in range(count)]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class PagedDecodeContext:
    """The attention context of a decode forward (one query per row) that reads pages in place."""

    page_table: torch.Tensor      # [B, P] page ids of each row (int64, a view of the step's ints)
    kv_lens: torch.Tensor         # [B] keys each row sees, this step's included; 0 for padding
    page_size: int
    chunking: Chunking
    kernel: str = "triton"        # or "emulated": the same arithmetic in PyTorch (CPU tests)
    inv_freq: torch.Tensor | None = None   # [D/2] float32: RoPE is applied here, not before

    @property
    def applies_rope(self) -> bool:
        """The model hands over q and k *unrotated*: the kernel rotates them at each row's
        position as it loads them (one launch instead of a RoPE pass and an attention)."""
        return self.inv_freq is not None

    def attend(self, q, k, v, k_cache, v_cache) -> torch.Tensor:
        """``q [B, 1, H, D]``, this step's ``k, v [B, 1, KV, D]`` -> ``[B, 1, H*D]`` (stores k, v)."""
        b, _, nh, d = q.shape
        if self.kernel == "triton":
            from engine.layers.attention_triton import paged_decode_attention as run
        else:
            run = split_k_attention
        out = run(q[:, 0], k[:, 0], v[:, 0], k_cache, v_cache, self)
        return out.reshape(b, 1, nh * d)                                    # out: [B, H, D]


def rope_at(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """``x [B, N, D]`` rotated by RoPE at ``positions [B]``, as the kernel does it: in float32
    (float64 for float64 inputs), rounded to ``x``'s dtype once at the end."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    freqs = positions.to(compute)[:, None] * inv_freq.to(compute)[None, :]   # [B, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)[:, None, :]                     # [B, 1, D]
    half = x.shape[-1] // 2
    xc = x.to(compute)
    rotated = torch.cat((-xc[..., half:], xc[..., :half]), dim=-1)
    return (xc * emb.cos() + rotated * emb.sin()).to(x.dtype)


def split_k_attention(q, k_new, v_new, k_cache, v_cache,
                      ctx: PagedDecodeContext) -> torch.Tensor:
    """The Triton kernel's arithmetic in PyTorch, one (row, KV head group, chunk, block) at a time:
    q ``[B, H, D]``, k_new, v_new ``[B, KV, D]``, caches ``[slots, KV, D]`` -> ``[B, H, D]``.
    Slow and exact to the algorithm: the CPU test of it."""
    page_table, kv_lens, page_size, inv_freq = ctx.page_table, ctx.kv_lens, ctx.page_size, ctx.inv_freq
    block_n = ctx.chunking.block_n
    b, nh, d = q.shape
    nkv = k_cache.shape[1]
    group = nh // nkv
    if inv_freq is not None:
        last = (kv_lens - 1).clamp_min(0)
        q, k_new = rope_at(q, last, inv_freq), rope_at(k_new, last, inv_freq)
    acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(d)
    out = torch.zeros(b, nh, d, dtype=q.dtype, device=q.device)
    for row in range(b):
        kv_len = int(kv_lens[row])
        last = kv_len - 1
        bounds = split_bounds(kv_len, ctx.chunking.max_chunks, block_n, ctx.chunking.chunk_keys)
        for g in range(nkv):
            heads = slice(g * group, (g + 1) * group)
            qg = q[row, heads].to(acc_dtype)                                # [G, D]
            partial = []                                                    # (o [G, D], lse [G])
            for start, end in bounds:
                m = torch.full((group,), -math.inf, dtype=acc_dtype, device=q.device)
                denom = torch.zeros(group, dtype=acc_dtype, device=q.device)
                acc = torch.zeros(group, d, dtype=acc_dtype, device=q.device)
                for n0 in range(start, end, block_n):
                    pos = torch.arange(n0, min(n0 + block_n, end), device=q.device)
                    slot = page_table[row, pos // page_size] * page_size + pos % page_size
                    keys, values = k_cache[slot, g].clone(), v_cache[slot, g].clone()  # [n, D]
                    keys[pos == last], values[pos == last] = k_new[row, g], v_new[row, g]
                    scores = (qg @ keys.to(acc_dtype).T) * scale                 # [G, n]
                    m_new = torch.maximum(m, scores.max(dim=1).values)
                    alpha = torch.exp(m - m_new)                            # rescale what we had
                    p = torch.exp(scores - m_new[:, None])
                    denom = denom * alpha + p.sum(dim=1)
                    acc = acc * alpha[:, None] + p @ values.to(acc_dtype)
                    m = m_new
                if start <= last < end:  # the chunk holding this step's position stores its k, v
                    slot = page_table[row, last // page_size] * page_size + last % page_size
                    k_cache[slot, g], v_cache[slot, g] = k_new[row, g], v_new[row, g]
                safe = torch.where(denom > 0, denom, torch.ones_like(denom))
                lse = torch.where(denom > 0, m + torch.log(safe), torch.full_like(denom, -math.inf))
                partial.append((acc / safe[:, None], lse))
            out[row, heads] = _merge(partial).to(q.dtype)
    return out


def _merge(partial: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """The second pass: chunk outputs weighted by ``exp(lse_s - max)`` (empty chunks weigh 0);
    a row of one chunk has nothing to merge."""
    if len(partial) == 1:
        return partial[0][0]
    o = torch.stack([p[0] for p in partial])                                # [S, G, D]
    lse = torch.stack([p[1] for p in partial])                              # [S, G]
    top = lse.max(dim=0).values
    w = torch.where(lse > -math.inf, torch.exp(lse - top), torch.zeros_like(lse))
    total = w.sum(dim=0)
    return (w[:, :, None] * o).sum(dim=0) / torch.where(total > 0, total, 1.0)[:, None]


def paged_attention_reference(q, k_cache, v_cache, page_table, kv_lens, page_size: int):
    """Plain attention of each row over its first ``kv_len`` cached keys (the test oracle):
    ``q [B, H, D]`` -> ``[B, H, D]``, computed in float64."""
    b, nh, d = q.shape
    group = nh // k_cache.shape[1]
    out = torch.zeros(b, nh, d, dtype=torch.float64, device=q.device)
    for row in range(b):
        pos = torch.arange(int(kv_lens[row]), device=q.device)
        if not len(pos):
            continue
        slot = page_table[row, pos // page_size] * page_size + pos % page_size
        keys = k_cache[slot].double().repeat_interleave(group, dim=1)       # [L, H, D]
        values = v_cache[slot].double().repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,lhd->hl", q[row].double(), keys) / math.sqrt(d)
        out[row] = torch.einsum("hl,lhd->hd", scores.softmax(dim=-1), values)
    return out
