"""A skinny matrix product for decode (few rows, big weight), in Triton (CUDA only).

At decode a linear layer's time should be its weight's bytes over the memory bandwidth, but a small
matrix gets too few of cuBLAS's thread blocks to keep enough loads in flight. Here the weight is cut
into tiles of ``BLOCK_N`` output rows and, where that gives too few, the reduction into ``split_k``
slices: each program streams its slab of W once against all rows of x and writes float32 partial
sums ``[split_k, M, N]``, which the caller adds. A custom op, so ``torch.compile`` treats it as
one call (``python -m studies decode-kernels`` times it against cuBLAS)."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

BLOCK_N, BLOCK_K = 32, 128
TARGET_PROGRAMS = 264      # ~2 per multiprocessor of an H100/H200


@triton.jit
def _gemv_kernel(X, W, Out, M, N, K, K_SPLIT, stride_xm, stride_wn, stride_os, stride_om,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 PRECISION: tl.constexpr):
    tile = tl.program_id(0)
    split = tl.program_id(1)
    n = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    m = tl.arange(0, BLOCK_M)
    m_ok = m < M
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    k_start = split * K_SPLIT
    for k0 in range(k_start, k_start + K_SPLIT, BLOCK_K):   # this slice of the reduction
        k = k0 + tl.arange(0, BLOCK_K)
        k_ok = k < K
        x = tl.load(X + m[:, None] * stride_xm + k[None, :], mask=m_ok[:, None] & k_ok[None, :],
                    other=0.0)                              # [BLOCK_M, BLOCK_K]
        w = tl.load(W + n[:, None] * stride_wn + k[None, :], mask=n_ok[:, None] & k_ok[None, :],
                    other=0.0)                              # [BLOCK_N, BLOCK_K], K contiguous
        acc += tl.dot(x, tl.trans(w), input_precision=PRECISION)
    tl.store(Out + split * stride_os + m[:, None] * stride_om + n[None, :], acc,
             mask=m_ok[:, None] & n_ok[None, :])


@functools.cache
def plan(n: int, k: int) -> tuple[int, int]:
    """(split_k, K per slice) for a weight ``[n, k]``: enough programs, slices of whole blocks."""
    tiles = triton.cdiv(n, BLOCK_N)
    split = max(1, min(TARGET_PROGRAMS // tiles, k // (2 * BLOCK_K)))
    k_split = triton.cdiv(triton.cdiv(k, split), BLOCK_K) * BLOCK_K
    return triton.cdiv(k, k_split), k_split


@torch.library.custom_op("overlap_demo::gemv_partials", mutates_args=())
def gemv_partials(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x [M, K] @ weight[N, K].T`` as float32 partial sums ``[split_k, M, N]``."""
    m, k = x.shape
    n = weight.shape[0]
    split, k_split = plan(n, k)
    out = torch.empty(split, m, n, dtype=torch.float32, device=x.device)
    block_m = max(16, triton.next_power_of_2(m))
    _gemv_kernel[(triton.cdiv(n, BLOCK_N), split)](
        x, weight, out, m, n, k, k_split, x.stride(0), weight.stride(0), out.stride(0),
        out.stride(1), BLOCK_M=block_m, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        PRECISION="ieee" if x.dtype == torch.float32 else "tf32", num_warps=4, num_stages=3)
    return out


@gemv_partials.register_fake
def _(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    split, _ = plan(weight.shape[0], weight.shape[1])
    return x.new_empty(split, x.shape[0], weight.shape[0], dtype=torch.float32)

