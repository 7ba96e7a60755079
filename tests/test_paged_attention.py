"""Paged decode attention (split-K over our page table) against plain attention.

Every check draws fresh random inputs: random page tables (each row's pages scattered over the
pool), GQA ratios, lengths of 1, at page boundaries and past them, rows of one chunk and of
several (chunked by the row's own length, and the fixed scheme it replaced), rows longer than the
chunks allowed. The cache must also hold this step's k, v afterwards, exactly where the plain
path's ``index_copy_`` puts it; every output element is written (the output is poisoned first);
a row's output is bit for bit the same alone as in any batch.

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
    Chunking,
    PagedDecodeContext,
    by_length,
    chunk_plan,
    fixed_chunking,
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


def _on_pages(kernel, num_splits: int, block_n: int, chunk_keys: int = 0, page_size=None):
    """``kernel`` called with a case's tensors by name (``_case``), its pages and chunks put in
    the ``PagedDecodeContext`` the kernel takes."""
    def call(q, k_new, v_new, k_cache, v_cache, page_table, kv_lens, inv_freq=None, out=None,
             page_size=page_size):
        ctx = PagedDecodeContext(page_table, kv_lens, page_size,
                                 Chunking(num_splits, chunk_keys, block_n), inv_freq=inv_freq)
        return kernel(q, k_new, v_new, k_cache, v_cache, ctx,
                      **({} if out is None else {"out": out}))
    return call


# (grid chunk dimension, keys a chunk (0: fixed), keys a block), as the kernel is launched
PLANS = [(1, 0, 16), (2, 0, 16), (3, 0, 16), (8, 0, 16), (1, 32, 16), (4, 16, 16), (3, 32, 16),
         (8, 32, 32)]


def test_split_bounds_cover_each_key_once():
    for kv_len in (0, 1, 15, 16, 17, 100, 513, 4097):
        for splits in (1, 2, 3, 8, 16):
            for block_n, chunk_keys in ((32, 0), (16, 16), (32, 32), (32, 256), (16, 64)):
                bounds = split_bounds(kv_len, splits, block_n, chunk_keys)
                keys = [p for s, e in bounds for p in range(s, e)]
                assert keys == list(range(kv_len))
                assert 1 <= len(bounds) <= splits
                per, count = chunk_plan(kv_len, splits, block_n, chunk_keys)
                assert per % block_n == 0 and count == len(bounds)
                if chunk_keys:   # by length: every chunk holds keys; one chunk iff short
                    assert all(e > s for s, e in bounds) or kv_len == 0
                    assert (count == 1) == (kv_len <= chunk_keys or splits == 1)
                    assert count == min(max(-(-kv_len // chunk_keys), 1), splits) or \
                        count < splits                                  # long rows: chunks grow
                else:
                    assert count == splits


def test_chunk_counts_come_from_the_config_only():
    splits = [fixed_chunking(n).max_chunks for n in (176, 2048, 4096, 1 << 17)]
    assert splits == [4, 8, 16, 16]
    assert fixed_chunking(176).max_chunks == 4 and fixed_chunking(176).chunk_keys == 0
    assert by_length(176).max_chunks == 1 and by_length(256).max_chunks == 1
    assert by_length(257).max_chunks == 2 and by_length(1040).max_chunks == 5
    assert by_length(1 << 17).max_chunks == 16
    with pytest.raises(ValueError):
        by_length(1024, chunk_keys=100, block_n=32)       # a chunk is whole blocks


def test_chunks_by_length_only_where_a_full_batch_fills_the_gpu():
    """A full batch of short rows runs (largest batch x KV heads) programs a chunk by length: on
    a GPU it must bring two per multiprocessor, else every row takes the fixed chunks."""
    from engine.devices.runner import EARLIER, DecodeKernels
    kernels, sms = DecodeKernels(), 132
    assert kernels.chunking(176, 64 * 8, sms).chunk_keys > 0          # 8 KV heads, B = 64
    assert kernels.chunking(176, 1 * 8, sms).chunk_keys == 0          # the same model, B = 1
    assert kernels.chunking(176, 64 * 2, sms).chunk_keys == 0         # 2 KV heads, B = 64
    assert kernels.chunking(176, 64 * 2, 0).chunk_keys > 0            # no GPU known: by length
    assert EARLIER.chunking(176, 64 * 8, sms).chunk_keys == 0


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
    # a padding row (reads and writes nothing) and a row longer than the chunks allowed
    lens = _lens(gen, page_size, 5) + [0, 150]
    for splits, chunk_keys, block_n in PLANS:
        c = _case(gen, lens, shape, page_size, torch.float64, "cpu")
        if rope:
            c["inv_freq"] = _inv_freq(gen, shape[2])
        run = _on_pages(split_k_attention, splits, block_n, chunk_keys, page_size)
        _check(lambda c, run=run: run(**c), c, page_size, 1e-12)


def _kernel_checks(device, dtypes, seeds, tol):
    from engine.layers.attention_triton import paged_decode_attention

    for seed in seeds:
        gen = torch.Generator().manual_seed(1000 + seed)
        page_size = [16, 4, 1][seed % 3]
        shape = SHAPES[seed % len(SHAPES)]
        for dtype in dtypes:
            for (splits, chunk_keys, block_n), rope in zip(PLANS, (True, False) * 4):
                c = _case(gen, _lens(gen, page_size, 5) + [0, 150], shape, page_size, dtype,
                          device)
                if rope:
                    c["inv_freq"] = _inv_freq(gen, shape[2]).to(device)
                run = partial(_poisoned, _on_pages(paged_decode_attention, splits, block_n,
                                                   chunk_keys, page_size))
                _check(lambda c, run=run: run(**c), c, page_size, tol[dtype])


def _poisoned(kernel, **c):
    """``kernel`` into an output full of NaN: an element it does not write stays NaN (and
    ``_check`` refuses it); a padding row must come out as zeros."""
    out = torch.full_like(c["q"], float("nan"))
    got = kernel(**c, out=out)
    assert got is out and (out[c["kv_lens"] == 0] == 0).all()
    return out


def _batch_independence(run, device, dtype, seed):
    """Each row's output alone (a batch of one) is bit for bit its output in the whole batch."""
    gen = torch.Generator().manual_seed(2000 + seed)
    page_size = [16, 4][seed % 2]
    c = _case(gen, _lens(gen, page_size, 6) + [0, 150, 97], SHAPES[seed % len(SHAPES)],
              page_size, dtype, device)
    c["inv_freq"] = _inv_freq(gen, c["q"].shape[2]).to(device)
    whole = run(**dict(c, k_cache=c["k_cache"].clone(), v_cache=c["v_cache"].clone()),
                page_size=page_size)
    for row in range(len(c["kv_lens"])):
        alone = {k: (v[row:row + 1] if k in ("q", "k_new", "v_new", "page_table", "kv_lens")
                     else v.clone() if k in ("k_cache", "v_cache") else v) for k, v in c.items()}
        assert torch.equal(run(**alone, page_size=page_size)[0], whole[row]), f"row {row}"


@pytest.mark.parametrize("seed", range(2))
def test_a_rows_result_does_not_depend_on_the_batch_emulated(seed):
    for splits, chunk_keys, block_n in PLANS[3:6]:
        run = _on_pages(split_k_attention, splits, block_n, chunk_keys)
        _batch_independence(run, "cpu", torch.float32, seed)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1"
                    or importlib.util.find_spec("triton") is None,
                    reason="needs Triton and TRITON_INTERPRET=1 (runs the kernel on the CPU)")
def test_triton_kernel_interpreted_on_cpu():
    _kernel_checks("cpu", [torch.float32], range(2), {torch.float32: 1e-5})
    from engine.layers.attention_triton import paged_decode_attention
    for seed in range(1):
        for splits, chunk_keys, block_n in PLANS[3:6]:
            run = _on_pages(paged_decode_attention, splits, block_n, chunk_keys)
            _batch_independence(run, "cpu", torch.float32, seed)


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
    for splits, chunk_keys in ((1, 0), (4, 0), (1, 256), (4, 32)):
        c = _case(gen, [1, 16, 17, 0, 100], (14, 2, 64), 16, torch.bfloat16, "cuda")
        torch.empty(1 << 24, device="cuda").fill_(float("nan"))   # dirty the allocator's blocks
        out = _on_pages(paged_decode_attention, splits, 32, chunk_keys, 16)(**c)
        assert torch.isfinite(out).all() and (out[3] == 0).all()


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_rows_result_does_not_depend_on_the_batch_cuda(dtype):
    from engine.layers.attention_triton import paged_decode_attention
    for seed in range(2):
        for splits, chunk_keys, block_n in PLANS:
            run = _on_pages(paged_decode_attention, splits, block_n, chunk_keys)
            _batch_independence(run, "cuda", dtype, seed)
