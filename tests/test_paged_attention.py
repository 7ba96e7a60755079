"""Paged decode attention (split-K over our page table) against plain attention.

Every check draws fresh random inputs: random page tables (each row's pages scattered over the
pool), GQA ratios, lengths of 1, at page boundaries and past them, several chunk counts. The cache
must also hold this step's k, v afterwards, exactly where the plain path's ``index_copy_`` puts it.

- CPU, always: ``split_k_attention`` (the kernel's arithmetic in PyTorch) in float64.
- ``TRITON_INTERPRET=1`` with Triton installed: the Triton kernel itself, interpreted on the CPU.
- CUDA: the Triton kernel in float32 and bfloat16, poisoned outputs, fresh inputs per check.
"""

from __future__ import annotations

import importlib.util
import os
from functools import partial

import pytest
import torch
from conftest import requires_cuda

from engine.layers.paged_attention import (
    num_kv_splits,
    paged_attention_reference,
    split_bounds,
    split_k_attention,
)
from engine.models.model import apply_rope, rope_cos_sin

# (heads, kv heads, head dim): MHA, GQA 2, 3, 7 (Qwen2.5-0.5B), 6 with D=128 (Qwen2.5-1.5B)
SHAPES = [(4, 4, 16), (4, 2, 32), (9, 3, 64), (14, 2, 64), (12, 2, 128)]


def _case(gen: torch.Generator, lens: list[int], shape, page_size: int, dtype, device):
    """Random q / new k, v / caches and a page table that scatters each row's pages."""
    nh, nkv, d = shape
    b = len(lens)
    pages_per_row = max(1, -(-max(lens) // page_size)) + 1
    num_pages = b * pages_per_row + 3
    slots = (num_pages + 1) * page_size                     # + the scratch page, as in kv_cache.py

    def rand(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float64).to(dtype).to(device)

    perm = torch.randperm(num_pages, generator=gen)[: b * pages_per_row]
    table = perm.view(b, pages_per_row).to(torch.int64)
    table[:, -1] = num_pages                                # unused columns: the scratch page
    return dict(q=rand(b, nh, d), k_new=rand(b, nkv, d), v_new=rand(b, nkv, d),
                k_cache=rand(slots, nkv, d), v_cache=rand(slots, nkv, d),
                page_table=table.to(device), kv_lens=torch.tensor(lens, dtype=torch.int64,
                                                                  device=device))


def _rotated(x, kv_lens, inv_freq):
    """The model's own RoPE (``apply_rope`` over ``rope_cos_sin``) at position len-1, in float64,
    rounded to ``x``'s dtype: what the kernel must compute when it is given ``inv_freq``."""
    positions = (kv_lens - 1).clamp_min(0)[:, None].cpu()                 # [B, 1]
    cos, sin = rope_cos_sin(inv_freq.cpu(), positions, torch.float64)
    return apply_rope(x.cpu().double()[:, None], cos, sin)[:, 0].to(x.dtype).to(x.device)


def _expected(c, page_size):
    """Plain path: store this step's k, v at position len-1, then attend over len keys."""
    k_cache, v_cache = c["k_cache"].clone(), c["v_cache"].clone()
    q, k_new = c["q"], c["k_new"]
    if c.get("inv_freq") is not None:
        q, k_new = _rotated(q, c["kv_lens"], c["inv_freq"]), _rotated(k_new, c["kv_lens"],
                                                                       c["inv_freq"])
    for row, n in enumerate(c["kv_lens"].tolist()):
        if n:
            slot = c["page_table"][row, (n - 1) // page_size] * page_size + (n - 1) % page_size
            k_cache[slot], v_cache[slot] = k_new[row], c["v_new"][row]
    out = paged_attention_reference(q, k_cache, v_cache, c["page_table"], c["kv_lens"],
                                    page_size)
    return out, k_cache, v_cache


def _check(run, c, page_size, tol):
    """``run(c)`` on copies of the caches: output and caches against the plain path."""
    want, k_want, v_want = _expected(c, page_size)
    got_c = dict(c, k_cache=c["k_cache"].clone(), v_cache=c["v_cache"].clone())
    got = run(got_c)
    assert torch.isfinite(got).all()
    err = (got.double() - want).norm() / want.norm().clamp_min(1e-30)
    assert err < tol, f"relative error {err:.2e}"
    if c.get("inv_freq") is None or c["k_new"].dtype == torch.float64:
        assert torch.equal(got_c["k_cache"], k_want)
    else:   # a rotated key may round differently (float32 cos/sin in the kernel, float64 here)
        k_err = (got_c["k_cache"].double() - k_want.double()).norm() / k_want.double().norm()
        assert k_err < tol, f"stored keys: relative error {k_err:.2e}"
    assert torch.equal(got_c["v_cache"], v_want)


def _lens(gen: torch.Generator, page_size: int, batch: int) -> list[int]:
    edges = [1, 2, page_size - 1, page_size, page_size + 1, 2 * page_size, 3 * page_size + 1, 70]
    return [edges[int(i)] if int(i) < len(edges) else int(torch.randint(1, 90, (1,), generator=gen))
            for i in torch.randint(0, len(edges) + 4, (batch,), generator=gen)]


def test_split_bounds_cover_each_key_once():
    for kv_len in (0, 1, 15, 16, 17, 100, 513):
        for splits in (1, 2, 3, 8):
            bounds = split_bounds(kv_len, splits, 32)
            keys = [p for s, e in bounds for p in range(s, e)]
            assert keys == list(range(kv_len))
    assert num_kv_splits(176) == 4 and num_kv_splits(2048) == 8 and num_kv_splits(4096) == 16
    assert num_kv_splits(1 << 17) == 16


def _inv_freq(gen, d, theta=None):
    """RoPE frequencies of a head size, with a random base (10^4 to 10^6, as real configs)."""
    base = theta or float(10 ** (4 + 2 * torch.rand(1, generator=gen).item()))
    return 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_split_k_emulation_matches_plain_attention(seed, rope):
    gen = torch.Generator().manual_seed(seed)
    page_size = [4, 16, 1][seed % 3]
    shape = SHAPES[seed % len(SHAPES)]
    lens = _lens(gen, page_size, 5) + [0]                   # a padding row: reads and writes nothing
    for splits in (1, 2, 3, 8):
        c = _case(gen, lens, shape, page_size, torch.float64, "cpu")
        if rope:
            c["inv_freq"] = _inv_freq(gen, shape[2])
        run = partial(split_k_attention, page_size=page_size, num_splits=splits, block_n=16)
        _check(lambda c, run=run: run(**c), c, page_size, 1e-12)


def _kernel_checks(device, dtypes, seeds, tol):
    from engine.layers.attention_triton import paged_decode_attention


    for seed in seeds:
        gen = torch.Generator().manual_seed(1000 + seed)
        page_size = [16, 4, 1][seed % 3]
        shape = SHAPES[seed % len(SHAPES)]
        for dtype in dtypes:
            for splits, block_n, rope in ((1, 32, True), (2, 16, False), (4, 32, True),
                                          (3, 64, False), (1, 64, False)):
                c = _case(gen, _lens(gen, page_size, 6) + [0], shape, page_size, dtype, device)
                if rope:
                    c["inv_freq"] = _inv_freq(gen, shape[2]).to(device)
                run = partial(paged_decode_attention, page_size=page_size, num_splits=splits,
                              block_n=block_n)
                _check(lambda c, run=run: run(**c), c, page_size, tol[dtype])


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1"
                    or importlib.util.find_spec("triton") is None,
                    reason="needs Triton and TRITON_INTERPRET=1 (runs the kernel on the CPU)")
def test_triton_kernel_interpreted_on_cpu():
    _kernel_checks("cpu", [torch.float32], range(3), {torch.float32: 1e-5})


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("seed", range(5))
def test_triton_kernel_matches_plain_attention_cuda(seed):
    _kernel_checks("cuda", [torch.float32, torch.bfloat16], [seed],
                   {torch.float32: 1e-5, torch.bfloat16: 2e-2})


@requires_cuda
@pytest.mark.cuda
def test_triton_kernel_writes_every_output():
    """Poison the output buffer's memory first: every element must be written (padding rows 0)."""
    from engine.layers.attention_triton import paged_decode_attention

    gen = torch.Generator().manual_seed(7)
    for splits in (1, 4):
        c = _case(gen, [1, 16, 17, 0], (14, 2, 64), 16, torch.bfloat16, "cuda")
        torch.empty(1 << 24, device="cuda").fill_(float("nan"))   # dirty the allocator's blocks
        out = paged_decode_attention(**c, page_size=16, num_splits=splits)
        assert torch.isfinite(out).all() and (out[3] == 0).all()
