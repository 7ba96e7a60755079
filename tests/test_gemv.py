"""The study's decode matrix product (``studies/gemv_triton.py``) against a float64 matmul.

Shapes of the presets' layers (q/k/v, o, gate/up, down of Qwen2.5-0.5B and -1.5B, SmolLM2) and odd
ones; 1 to 64 rows; fresh random inputs each check. The partial sums over split-K slices must add
up to ``x @ W.T``. Runs on CUDA, or on the CPU through Triton's interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from conftest import requires_cuda

SHAPES = [(1152, 896), (896, 896), (9728, 896), (896, 4864), (2048, 1536), (1536, 8960),
          (576, 576), (100, 200), (3, 64)]


def _checks(device, dtype, rows, shapes, tol):
    from studies.gemv_triton import gemv_partials, plan

    gen = torch.Generator().manual_seed(len(rows) * 7 + len(shapes))
    for n, k in shapes:
        for m in rows:
            x = torch.randn(m, k, generator=gen).to(dtype).to(device)
            w = (torch.randn(n, k, generator=gen) / k ** 0.5).to(dtype).to(device)
            parts = gemv_partials(x, w)
            assert parts.shape == (plan(n, k)[0], m, n) and parts.dtype == torch.float32
            got = parts.sum(0).double().cpu()
            want = x.double().cpu() @ w.double().cpu().T
            err = (got - want).norm() / want.norm()
            assert err < tol, f"{(m, n, k)}: relative error {err:.2e}"


def test_split_plan_covers_k():
    pytest.importorskip("triton")
    from studies.gemv_triton import BLOCK_K, plan
    for n, k in SHAPES:
        split, k_split = plan(n, k)
        assert k_split % BLOCK_K == 0 and (split - 1) * k_split < k <= split * k_split


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1"
                    or importlib.util.find_spec("triton") is None,
                    reason="needs Triton and TRITON_INTERPRET=1 (runs the kernel on the CPU)")
def test_gemv_interpreted_on_cpu():
    _checks("cpu", torch.float32, [1, 5, 17], [(896, 896), (100, 200), (3, 64), (64, 1100)], 1e-5)


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_gemv_matches_matmul_cuda(dtype, tol):
    _checks("cuda", dtype, [1, 2, 7, 16, 17, 33, 64], SHAPES, tol)
