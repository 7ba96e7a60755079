"""KV memory under overlap, as properties: the radix prefix cache, pages taken as requests grow,
retraction when the pool runs dry.

- the tree itself: what is matched is what was inserted, page-aligned; locked pages are never
  evicted; its accounting stays whole under random operations;
- the engine: on random workloads with shared prefixes, arrivals, stops, aborts and small pools,
  every loop (normal, overlap, multi-step) gives the tokens of an unpressured engine without a
  cache; after every run nothing is held but the cache's pages (free + cached == total), the
  cache is whole, and no request read a position through two pages; hits and retractions
  happen where the workload makes them.

CPU runs use float64 (no near-tie flips between batch layouts); CUDA runs float32.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace

import pytest
from conftest import VOCAB, requires_cuda
from hypothesis import given, settings
from hypothesis import strategies as st
from loops import loop_of

from engine import Engine, EngineConfig, SamplingParams
from engine.config import NORMAL
from engine.scheduler.kv_cache import CACHE_OWNER, IdPool
from engine.scheduler.radix_cache import RadixCache

PS = 4


# ---- the tree -------------------------------------------------------------------------------

def _insert(cache: RadixCache, pool: IdPool, tokens: list[int], owner: int = 7):
    """A request's way in: match, then insert its own pages for the rest (page-aligned)."""
    n = len(tokens) // PS
    matched, node = cache.match(tokens[:n * PS])
    own = pool.allocate(n - len(matched), owner)
    node, taken = cache.insert(tokens[:n * PS], matched + own, node)
    pool.transfer(own[:taken], owner, CACHE_OWNER)
    pool.free(own[taken:], owner)
    return node


def test_match_finds_page_aligned_prefixes_and_splits_edges():
    cache, pool = RadixCache(PS), IdPool(64, "KV page")
    a = list(range(10, 22))                          # 3 pages
    _insert(cache, pool, a)
    pages, _ = cache.match(a)
    assert len(pages) == 3
    b = a[:8] + [99, 98, 97, 96]                     # shares 2 pages, then differs
    pages_b, node = cache.match(b)
    assert pages_b == pages[:2] and len(cache.nodes()) == 2          # the edge was split
    assert cache.match(a[:7])[0] == pages[:1]        # a partial page is never matched
    _insert(cache, pool, b)
    assert len(cache.match(b)[0]) == 3 and cache.match(b)[0][:2] == pages[:2]
    assert not cache.problems() and pool.held_by(CACHE_OWNER) == {p for n in cache.nodes()
                                                                 for p in n.pages}


def test_insert_never_maps_a_position_to_a_second_page():
    cache, pool = RadixCache(PS), IdPool(64, "KV page")
    tokens = list(range(30, 42))
    mine = pool.allocate(3, 1)
    theirs = pool.allocate(3, 2)
    # Two requests computed the same prompt, each into its own pages; both insert.
    node, taken = cache.insert(tokens, theirs, cache.root)
    assert taken == 3
    node2, taken2 = cache.insert(tokens, mine, cache.root)
    assert taken2 == 0 and node2 is cache.root       # the second keeps its own copies
    assert cache.match(tokens)[0] == theirs


def test_locked_pages_are_never_evicted_and_lru_goes_first():
    cache, pool = RadixCache(PS), IdPool(64, "KV page")
    old = _insert(cache, pool, list(range(100, 108)))
    new = _insert(cache, pool, list(range(200, 208)))
    cache.lock(new)
    assert cache.evictable() == 2
    freed = cache.evict(10)
    assert set(freed) == set(old.pages)              # the locked one stays
    cache.unlock(new)
    assert set(cache.evict_all()) == set(new.pages) and cache.cached_pages == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "lock", "unlock", "evict"]),
                          st.integers(0, 5), st.integers(1, 5)), max_size=40))
def test_the_tree_stays_whole_under_random_operations(ops):
    cache, pool = RadixCache(PS), IdPool(200, "KV page")
    families = [[f * 1000 + i for i in range(24)] for f in range(3)]
    locked = []
    for op, which, size in ops:
        if op == "insert" and pool.num_free >= 6:
            tokens = families[which % 3][:size * PS] + [7000 + which] * PS * (which % 2)
            _insert(cache, pool, tokens)
        elif op == "lock":
            _, node = cache.match(families[which % 3][:size * PS])
            if node is not cache.root:
                cache.lock(node)
                locked.append(node)
        elif op == "unlock" and locked:
            cache.unlock(locked.pop())
        elif op == "evict":
            pool.free(cache.evict(size), CACHE_OWNER)
        assert not cache.problems()
        assert pool.held_by(CACHE_OWNER) == {p for n in cache.nodes() for p in n.pages}
    for node in locked:
        cache.unlock(node)
    pool.free(cache.evict_all(), CACHE_OWNER)
    assert pool.num_free == pool.total and cache.cached_pages == 0


# ---- the release path -------------------------------------------------------------------------

def _table(num_pages: int = 16, **hazards):
    """A real RequestTable over real pools (no device: the release path is host bookkeeping)."""
    import numpy as np

    from engine.config import EngineConfig, HazardSwitches
    from engine.scheduler.cache_manager import CacheManager
    from engine.scheduler.table import RequestTable
    from record.recorder import Timeline

    cfg = EngineConfig(model="bundled", page_size=PS, max_batch_size=2, max_seq_len=32,
                       num_pages=num_pages, hazards=HazardSwitches(**hazards))
    slots, pages = IdPool(2, "request slot"), IdPool(num_pages, "KV page")
    table_rows = np.full((3, cfg.pages_per_seq), num_pages, np.int64)
    memory = CacheManager(cfg, slots, pages, RadixCache(PS), table_rows)
    return RequestTable(cfg, memory, Timeline(enabled=False), None), slots, pages


def _running(table, rid: int = 0):
    from engine.scheduler.request import Req

    req = Req(rid, list(range(10, 10 + 2 * PS + 1)), SamplingParams(max_new_tokens=8), seed=0,
              stop_ids=frozenset())
    table.waiting.append(req)
    table.prefill_rows()
    return req


@pytest.mark.parametrize("end", ["finish", "retract"])
def test_pages_go_back_at_once_and_the_slot_after_the_launched_batch(end):
    """A request that ends while a launched batch still carries it: its KV pages and its cache
    lock come back at once (only forwards write pages, in launch order), its slot only after
    that batch (its forward reads the slot's token_pool row, which the next prompt rewrites)."""
    from engine.scheduler.request import Batch, Row

    table, slots, pages = _table()
    req = _running(table)
    slot = req.slot
    in_flight = [Batch(7, "decode", [Row(req, req.prompt_len, 1, True)], 1)]
    if end == "finish":
        table.finish(req, "stop", 0, in_flight)
    else:
        table.retract(req, in_flight, 8)
    cached = table.memory.cache.evictable()
    assert pages.num_free + cached == pages.total, "pages (and the cache lock) back at once"
    assert table.memory.cache.locked_pages == 0
    assert slots.owner(slot) == req.rid and table.held_slots == [(7, req.rid, slot)]
    table.release_deferred(upto_step=6)
    assert slots.owner(slot) == req.rid                  # batch 7 still reads the slot's row
    table.release_deferred(upto_step=7)
    assert slots.num_free == slots.total and not table.held_slots


def test_without_the_slot_hold_the_slot_is_free_under_the_launched_batch():
    """The hazard lab's no_deferred_free: the slot goes back at once, a race window counted."""
    from engine.scheduler.request import Batch, Row

    table, slots, _ = _table(no_deferred_free=True)
    req = _running(table)
    table.finish(req, "stop", 0, [Batch(3, "decode", [Row(req, req.prompt_len, 1, True)], 1)])
    assert slots.num_free == slots.total and table.unsafe_frees == 1


def test_without_the_finished_guard_a_second_finish_frees_the_slot_twice():
    """The hazard lab's no_finished_guard removes what the seed's finished_reqs guards: a
    request finished again (by its lag-one token) gives its slot back a second time."""
    from engine.scheduler.kv_cache import DoubleFreeError

    table, _, _ = _table(no_finished_guard=True)
    req = _running(table)
    slot = req.slot
    table.finish(req, "stop", 0, [])
    with pytest.raises(DoubleFreeError) as err:
        table.finish(req, "length", 0, [])
    assert err.value.details() == {"what": "request slot", "item": slot, "request": req.rid,
                                   "held_by_other": False}
    safe, _, _ = _table()
    req = _running(safe)
    safe.finish(req, "stop", 0, [])
    safe.finish(req, "length", 0, [])                    # the guard: ended once, freed once


# ---- the engine -----------------------------------------------------------------------------

def _shared_prefix_workload(rng: random.Random, n: int, max_new: int):
    """Prompts from a few families, each a shared prefix (a system prompt) and a tail of its own;
    now and then one prompt exactly another's, or a whole page-aligned prefix."""
    families = [[rng.randrange(4, VOCAB) for _ in range(rng.randrange(5, 30))] for _ in range(3)]
    prompts = []
    for _ in range(n):
        base = rng.choice(families)
        tail = [rng.randrange(4, VOCAB) for _ in range(rng.randrange(0, 12))]
        prompts.append((base + tail) or [5])
    if n > 2:
        prompts[-1] = list(prompts[0])
    params = [SamplingParams(max_new_tokens=rng.randrange(1, max_new + 1),
                             ignore_eos=rng.random() < 0.5) for _ in range(n)]
    return prompts, params


def _tokens(result):
    return [(o.token_ids, o.finish_reason) for o in result.outputs]


def _assert_memory_whole(eng: Engine, result=None):
    s = eng.stats()
    assert s["kv_pages_free"] + s["kv_pages_cached"] == s["kv_pages_total"]
    assert s["req_slots_free"] == s["req_slots_total"]
    assert not eng.memory_problems()
    if result is not None:
        assert result.mapping_faults == [], "a position was read through two pages"


@pytest.fixture(scope="module")
def reference(make_checkpoint):
    """No prefix cache, a pool that holds everything, the serial loop: what tokens must be."""
    eng = Engine(EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                              max_batch_size=6, max_seq_len=96, page_size=PS,
                              prefix_cache=False))
    yield eng
    eng.close()


@pytest.fixture(scope="module", params=[(True, 40), (True, None), (False, 40)],
                ids=["cache-small-pool", "cache-big-pool", "no-cache-small-pool"])
def pressured(make_checkpoint, request):
    cache, pages = request.param
    eng = Engine(EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                              max_batch_size=6, max_seq_len=96, page_size=PS, num_pages=pages,
                              max_prefill_tokens=24, prefix_cache=cache, debug_checks=True))
    yield eng
    eng.close()


@pytest.mark.parametrize("seed", range(10))
def test_every_loop_gives_the_unpressured_tokens(reference, pressured, seed):
    rng = random.Random(seed)
    prompts, params = _shared_prefix_workload(rng, rng.randrange(2, 14), 30)
    probe = reference.generate(prompts, [SamplingParams(max_new_tokens=p.max_new_tokens,
                                                        ignore_eos=True) for p in params])
    # Stops that fire at varied steps (picked from tokens the model really emits).
    params = [SamplingParams(max_new_tokens=p.max_new_tokens, ignore_eos=p.ignore_eos,
                             stop_token_ids=(rng.choice(o.token_ids),) if rng.random() < 0.6
                             else ()) for p, o in zip(params, probe.outputs)]
    arrivals = ([rng.choice([0.0, rng.uniform(0, 0.15)]) for _ in prompts]
                if seed % 2 else None)
    want = _tokens(reference.generate(prompts, params, NORMAL))
    for overlap, k in ((False, 1), (True, 1), (True, 2 + seed % 3)):
        res = pressured.generate(prompts, params, loop_of(overlap, k),
                                 arrivals=arrivals)
        assert _tokens(res) == want, f"overlap={overlap} k={k}"
        _assert_memory_whole(pressured, res)
    if seed % 3 == 0:
        pressured.clear_prefix_cache()
        assert pressured.stats()["kv_pages_free"] == pressured.stats()["kv_pages_total"]


def test_hits_and_retractions_happen_where_the_workload_makes_them(reference, make_checkpoint):
    """Eight rows on a pool that holds every prompt but not every full length: requests retract
    and resume, the shared system prompt is computed once, and the tokens are the reference's."""
    rng = random.Random(42)
    system = [rng.randrange(4, VOCAB) for _ in range(24)]
    prompts = [system + [rng.randrange(4, VOCAB) for _ in range(rng.randrange(1, 8))]
               for _ in range(16)]
    params = SamplingParams(max_new_tokens=40, ignore_eos=True)
    want = _tokens(reference.generate(prompts, params, NORMAL))
    full = -(-(32 + 40) // PS)                         # pages of the longest request
    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                       max_batch_size=8, max_seq_len=96, page_size=PS, num_pages=3 * full,
                       debug_checks=True)
    with Engine(cfg) as eng:
        for overlap, k in ((False, 1), (True, 1), (True, 3)):
            eng.clear_prefix_cache()
            res = eng.generate(prompts, params, loop_of(overlap, k))
            assert _tokens(res) == want
            assert res.metrics["retractions"] > 0, (overlap, k)
            assert res.metrics["prefix_hit_tokens"] >= 24 * 8, "the system prompt was found again"
            assert 0 < res.metrics["prefix_hit_rate"] <= 1
            memory = res.to_run_dict()["memory"]
            assert memory["retractions"] and memory["total_pages"] == 3 * full
            assert all(used + cached + free == 3 * full for _, _, used, cached, free
                       in memory["steps"])
            _assert_memory_whole(eng, res)
        s = eng.stats()
        assert s["retractions"] >= 3 and s["prefix_hit_tokens"] > 0


def _cached_prefixes(cache: RadixCache) -> set[tuple[int, ...]]:
    """Every page-aligned token prefix the tree holds, whatever the shape of its edges."""
    held = set()
    for node in cache.nodes():
        path, at = [], node
        while at is not cache.root:
            path[:0] = at.key
            at = at.parent
        above = len(path) - len(node.key)
        held |= {tuple(path[:above + n]) for n in range(PS, len(node.key) + 1, PS)}
    return held


@pytest.mark.parametrize("seed", range(4))
def test_both_loops_leave_the_same_prefix_cache(reference, make_checkpoint, seed):
    """A request that stops is seen one step late under overlap, when the lag-one forward has
    already written its stop token's K/V; that token is not cached (the serial loop never
    computes it), so on the same work both loops leave the same pages in the cache."""
    rng = random.Random(100 + seed)
    prompts, params = _shared_prefix_workload(rng, rng.randrange(4, 12), 20)
    probe = reference.generate(prompts, [SamplingParams(max_new_tokens=p.max_new_tokens,
                                                        ignore_eos=True) for p in params])
    params = [SamplingParams(max_new_tokens=p.max_new_tokens, ignore_eos=True,
                             stop_token_ids=(rng.choice(o.token_ids),))
              for p, o in zip(params, probe.outputs)]
    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                       max_batch_size=6, max_seq_len=96, page_size=PS)   # room for everything
    held = {}
    with Engine(cfg) as eng:
        for overlap in (False, True):
            eng.clear_prefix_cache()
            res = eng.generate(prompts, params, loop_of(overlap))
            assert res.metrics["retractions"] == 0
            held[overlap] = _cached_prefixes(eng.pools.cache)
            _assert_memory_whole(eng, res)
    assert held[True] == held[False] and held[False]


def test_a_cached_prompt_is_prefilled_from_its_last_token(make_checkpoint):
    """The same prompt twice: the second run computes only what the cache cannot give (at
    least the last token, whose logits choose the first output)."""
    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                       max_batch_size=2, max_seq_len=64, page_size=PS)
    prompt = list(range(10, 10 + 4 * PS))               # exactly 4 pages
    with Engine(cfg) as eng:
        first = eng.generate([prompt], SamplingParams(max_new_tokens=5, ignore_eos=True))
        second = eng.generate([prompt], SamplingParams(max_new_tokens=5, ignore_eos=True))
        assert _tokens(first) == _tokens(second)
        assert first.metrics["prefix_hit_tokens"] == 0
        assert second.metrics["prefix_hit_tokens"] == 3 * PS          # not the last page
        prefill = [s for s in second.timeline if s.lane == "engine_stream"
                   and s.phase == "prefill"]
        assert prefill and prefill[0].num_tokens == PS and prefill[0].cached_tokens == 3 * PS
        assert prefill[0].to_dict()["cached_tokens"] == 3 * PS
    # Without a prefix cache there is nothing to find: "not measured", not "found none".
    with Engine(replace(cfg, prefix_cache=False)) as eng:
        eng.generate([prompt], SamplingParams(max_new_tokens=5, ignore_eos=True))
        again = eng.generate([prompt], SamplingParams(max_new_tokens=5, ignore_eos=True))
        assert again.metrics["prefix_hit_tokens"] is None
        assert again.metrics["prefix_hit_rate"] is None
        assert again.metrics["retractions"] == 0


def test_aborts_and_retractions_release_once(make_checkpoint):
    """Requests served from a source that aborts some of them while others retract: every
    request ends once, nothing leaks, nothing is freed twice (IdPool would raise)."""
    from test_engine import _collect_finished, _ScriptedSource

    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                       max_batch_size=6, max_seq_len=96, page_size=PS, num_pages=36,
                       debug_checks=True)
    rng = random.Random(5)
    with Engine(cfg) as eng:
        intake = eng.intake()
        for overlap, k in ((False, 1), (True, 1), (True, 3)):
            prompts, _ = _shared_prefix_workload(rng, 10, 1)
            reqs = [intake.request(i, p, SamplingParams(max_new_tokens=50, ignore_eos=True))
                    for i, p in enumerate(prompts)]
            t0 = time.perf_counter_ns()
            for req in reqs:
                req.arrival_ns = t0
            aborts = [(t0 + int(rng.uniform(0.0, 0.3) * 1e9), rid)
                      for rid in rng.sample(range(10), 4)]
            ended: list = []
            eng.serve(_ScriptedSource(reqs, aborts), _collect_finished(ended), loop_of(overlap, k))
            assert sorted(r.rid for r in ended) == list(range(10))
            _assert_memory_whole(eng)


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_cuda_every_loop_gives_the_unpressured_tokens(make_checkpoint, cuda_graph):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    path = str(make_checkpoint("llama"))
    ref = Engine(EngineConfig(model=path, device="cuda", dtype="float32", max_batch_size=6,
                              max_seq_len=96, page_size=PS, prefix_cache=False))
    eng = Engine(EngineConfig(model=path, device="cuda", dtype="float32", max_batch_size=6,
                              max_seq_len=96, page_size=PS, num_pages=40, cuda_graph=cuda_graph,
                              max_prefill_tokens=24, debug_checks=True))
    try:
        retractions = hits = 0
        for seed in range(6):
            rng = random.Random(seed)
            prompts, params = _shared_prefix_workload(rng, rng.randrange(4, 14), 30)
            want = _tokens(ref.generate(prompts, params, NORMAL))
            for overlap, k in ((False, 1), (True, 1), (True, 3)):
                res = eng.generate(prompts, params, loop_of(overlap, k))
                assert _tokens(res) == want, (seed, overlap, k)
                _assert_memory_whole(eng, res)
                retractions += res.metrics["retractions"]
                hits += res.metrics["prefix_hit_tokens"]
        assert retractions > 0 and hits > 0
    finally:
        ref.close()
        eng.close()
