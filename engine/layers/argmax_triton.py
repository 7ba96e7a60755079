"""Greedy decoding's argmax over the vocabulary, in two passes (Triton; CUDA).

``_block_argmax`` (grid ``(B, ceil(V / BLOCK))``) finds each slice's largest value and
``_row_argmax`` each row's winner among them; ties and NaN as ``torch.argmax``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 2048               # logits a program of the first pass reads
NO_INDEX = 2**31 - 1       # larger than any vocabulary index
_NO_INDEX = tl.constexpr(NO_INDEX)


@triton.jit
def _winner(values, index, ok):
    """(value, index) of the largest of ``values`` where ``ok``, the lowest index among equals;
    a NaN beats every number and the first NaN wins."""
    is_nan = (values != values) & ok
    any_nan = tl.max(is_nan.to(tl.int32), 0) > 0
    top = tl.max(tl.where(ok & ~is_nan, values, float("-inf")), 0)
    hit = tl.where(any_nan, is_nan, ok & (values == top))
    first = tl.min(tl.where(hit, index, _NO_INDEX), 0)
    return tl.where(any_nan, float("nan"), top), first


@triton.jit
def _block_argmax(X, Vals, Idx, V, stride_x, stride_p, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    i = blk * BLOCK + tl.arange(0, BLOCK)
    ok = i < V
    x = tl.load(X + row.to(tl.int64) * stride_x + i, mask=ok, other=float("-inf")).to(tl.float32)
    top, first = _winner(x, i, ok)
    tl.store(Vals + row * stride_p + blk, top)
    tl.store(Idx + row * stride_p + blk, first)


@triton.jit
def _row_argmax(Vals, Idx, Out, NB, stride_p, BLOCK_B: tl.constexpr):
    row = tl.program_id(0)
    b = tl.arange(0, BLOCK_B)
    ok = b < NB
    vals = tl.load(Vals + row * stride_p + b, mask=ok, other=float("-inf"))
    idx = tl.load(Idx + row * stride_p + b, mask=ok, other=_NO_INDEX)
    _, first = _winner(vals, idx, ok)            # slices in order: the lowest index among equals
    tl.store(Out + row, first.to(tl.int64))


def argmax(logits: torch.Tensor, block: int = BLOCK, num_warps: int = 4) -> torch.Tensor:
    """``logits [B, V]`` (last dimension contiguous) -> ``[B]`` int64, as ``logits.argmax(-1)``."""
    b, v = logits.shape
    assert logits.stride(1) == 1 and v < NO_INDEX
    nb = triton.cdiv(v, block)
    vals = torch.empty(b, nb, dtype=torch.float32, device=logits.device)
    idx = torch.empty(b, nb, dtype=torch.int32, device=logits.device)
    out = torch.empty(b, dtype=torch.int64, device=logits.device)
    _block_argmax[(b, nb)](logits, vals, idx, v, logits.stride(0), nb, BLOCK=block,
                           num_warps=num_warps)
    _row_argmax[(b,)](vals, idx, out, nb, nb, BLOCK_B=max(16, triton.next_power_of_2(nb)),
                      num_warps=1)
    return out
