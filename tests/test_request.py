"""The metadata a forward reads: a multi-step group's later steps, derived from its first step
without looking at the requests again, must equal what ``build_meta`` lays out for them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine.config import SamplingParams
from engine.scheduler.request import Batch, Req, Row, advance_meta, build_meta, decode_bucket


def _requests(rng: random.Random, n: int, page_table: np.ndarray, page_size: int) -> list[Req]:
    reqs = []
    for rid in range(n):
        params = SamplingParams(max_new_tokens=rng.randrange(1, 12),
                                temperature=rng.choice([0.0, 0.7]), top_k=rng.choice([0, 5]),
                                top_p=rng.choice([1.0, 0.9]))
        req = Req(rid, [rng.randrange(4, 50) for _ in range(rng.randrange(1, 20))], params,
                  seed=rng.randrange(1 << 30), stop_ids=frozenset())
        req.slot = rid
        need = -(-(req.prompt_len + params.max_new_tokens) // page_size)
        req.pages = rng.sample(range(1000), need)
        page_table[req.slot, :need] = req.pages
        req.num_prefilled = req.prompt_len
        req.num_scheduled = rng.randrange(1, params.max_new_tokens + 1)
        reqs.append(req)
    return reqs


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("full_kv", [False, True])
def test_advance_meta_equals_build_meta(seed, full_kv):
    rng = random.Random(seed)
    page_size, pages_per_seq, max_slots, cap = 4, 10, 16, 16
    page_table = np.full((max_slots + 1, pages_per_seq), 1000, np.int64)   # scratch page = 1000
    reqs = _requests(rng, rng.randrange(1, max_slots + 1), page_table, page_size)
    reqs = [r for r in reqs if r.num_scheduled < r.params.max_new_tokens] or reqs[:1]
    for r in reqs:
        r.num_scheduled = min(r.num_scheduled, r.params.max_new_tokens - 1)
    start = {r.rid: r.prompt_len + r.num_scheduled - 1 for r in reqs}
    left = np.array([r.params.max_new_tokens - r.num_scheduled for r in reqs])

    def batch(step, rows):
        padded = decode_bucket(len(rows), cap) if full_kv else len(rows)
        return Batch(step, "decode", rows, padded)

    first_batch = batch(1, [Row(r, start[r.rid], 1, True) for r in reqs])
    first = build_meta(first_batch, page_table, page_size, dummy_slot=max_slots, full_kv=full_kv)
    for j in range(1, int(left.max())):
        keep = left > j
        rows = [Row(r, start[r.rid] + j, 1, True) for r, kept in zip(reqs, keep) if kept]
        b = batch(1 + j, rows)
        derived = advance_meta(first, b, keep, j, page_table, page_size, max_slots, full_kv)
        built = build_meta(b, page_table, page_size, dummy_slot=max_slots, full_kv=full_kv)
        for field in ("step", "kind", "num_rows", "seq_len", "kv_pages", "all_greedy"):
            assert getattr(derived, field) == getattr(built, field), field
        np.testing.assert_array_equal(derived.ints, built.ints)
        np.testing.assert_array_equal(derived.floats, built.floats)
        assert derived.prompt_writes.shape == (3, 0)
