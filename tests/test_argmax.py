"""Greedy decoding's two-pass argmax (``engine/layers/argmax_triton.py``) is ``torch.argmax``.

Random logits with planted ties (the row's maximum again at a later index, in another slice and in
the same one), rows all ``-inf``, NaN (``torch.argmax`` takes the first NaN), ``+inf``, a
vocabulary that is not a whole number of slices, one logit; float32, bfloat16 and float16; the
answer must be exactly ``torch.argmax``'s, index for index.

- ``TRITON_INTERPRET=1`` with Triton installed: the kernels interpreted on the CPU.
- CUDA: the kernels on the GPU, at the slice size the engine uses and the vocabulary of a real
  model, and the sampler's greedy choice through them.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from conftest import requires_cuda

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _logits(gen: torch.Generator, rows: int, vocab: int, dtype, device) -> torch.Tensor:
    x = torch.randn(rows, vocab, generator=gen, dtype=torch.float64).to(dtype)
    for row in range(rows):
        kind = row % 6
        top = x[row].max()
        spots = torch.randint(0, vocab, (3,), generator=gen)
        if kind == 1:                                   # the maximum again, further on
            x[row, spots] = top
        elif kind == 2:                                 # the whole row equal
            x[row] = 1.5
        elif kind == 3:                                 # nothing but -inf
            x[row] = float("-inf")
        elif kind == 4:                                 # NaNs, and +inf before them
            x[row, spots[:2]] = float("nan")
            x[row, spots[2]] = float("inf")
        elif kind == 5:                                 # two +inf
            x[row, spots[:2]] = float("inf")
    return x.to(device)


def _check(device, vocabs, blocks, rows=12, seed=0):
    from engine.layers.argmax_triton import argmax

    gen = torch.Generator().manual_seed(seed)
    for dtype in DTYPES:
        for vocab in vocabs:
            x = _logits(gen, rows, vocab, dtype, device)
            want = x.argmax(dim=-1)
            for block in blocks:
                got = argmax(x, block=block)
                assert got.dtype == torch.int64
                assert torch.equal(got, want), f"{dtype} V={vocab} block={block}: {got} {want}"
            # a strided view (every other row), as a slice of a larger buffer
            assert torch.equal(argmax(x[::2], block=blocks[0]), want[::2])


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1"
                    or importlib.util.find_spec("triton") is None,
                    reason="needs Triton and TRITON_INTERPRET=1 (runs the kernel on the CPU)")
def test_argmax_interpreted_on_cpu():
    _check("cpu", (1, 31, 1000), (128, 16, 2048))


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("seed", range(3))
def test_argmax_matches_torch_cuda(seed):
    from engine.layers.argmax_triton import BLOCK
    _check("cuda", (1, 320, 151936, 128256), (BLOCK, 1024, 4096), rows=64, seed=seed)


@requires_cuda
@pytest.mark.cuda
def test_greedy_sampler_takes_the_same_tokens_cuda():
    from engine.layers.sampler import greedy
    gen = torch.Generator().manual_seed(9)
    x = _logits(gen, 64, 128256, torch.bfloat16, "cuda")
    assert torch.equal(greedy(x, "triton"), greedy(x, "torch"))
