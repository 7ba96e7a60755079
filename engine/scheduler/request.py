"""Requests, batches, and the metadata one forward needs.

A ``Req`` has two clocks: ``num_scheduled`` counts tokens whose forward was *launched*,
``output_ids`` the tokens the CPU has *read back*. Under overlap the host lags one step: the window
in which a stopped request can sit in the next batch. Token values never travel from the host: a row
reads its input from ``token_pool[slot, position]`` on the device and its sampled token is written
back there; ``StepMeta`` says which (slot, position) each row reads and writes. A retracted request
waits again with the tokens it has read; ``epoch`` counts its admissions, so a token launched before
the retraction is recognised and dropped."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from engine.config import SamplingParams
from record.schema import Phase

# Columns of StepMeta.ints: one row per batch entry, then that row's page table. COL_OUT is the
# row's place in the device's result ring (where its sampled token is kept for the host's copy):
# the scheduler leaves it 0 and a CUDA device with a copy stream fills it as it uploads the step.
COL_SLOT, COL_START, COL_LEN, COL_WRITE, COL_SEED, COL_TOPK, COL_OUT = range(7)
NUM_INT_COLS = 7
DECODE_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


@dataclass(eq=False)   # a request equals only itself: membership tests compare identities
class Req:
    rid: int
    prompt_ids: list[int]
    params: SamplingParams
    seed: int
    stop_ids: frozenset[int]
    arrival_ns: int = field(default_factory=time.perf_counter_ns)
    slot: int = -1
    last_slot: int = -1             # the slot it gave back last (the hazard lab frees it again)
    pages: list[int] = field(default_factory=list)   # the page of each page_size positions
    cached_pages: int = 0           # the first of ``pages`` are the prefix cache's (borrowed)
    cache_node: object = None       # the cache node whose lock keeps those pages (radix_cache)
    fill_ids: list[int] = field(default_factory=list)  # what a prefill puts in the KV cache
    epoch: int = 0                  # admissions so far (a retraction starts a new one)
    num_prefilled: int = 0          # fill tokens whose forward has been launched
    num_scheduled: int = 0          # output tokens whose forward has been launched (device side)
    output_ids: list[int] = field(default_factory=list)   # tokens read back (host side)
    token_ns: list[int] = field(default_factory=list)     # when each was read back (delivered)
    finished: bool = False
    finish_reason: str | None = None
    first_token_ns: int = 0
    finish_ns: int = 0
    wasted_steps: int = 0           # forwards that ran for it after it had stopped (lag one)
    prefix_hit_tokens: int = 0      # fill tokens found in the prefix cache, over its admissions
    admit_hit: int = 0              # of those, at its current admission
    retractions: int = 0

    def __post_init__(self) -> None:
        if not self.fill_ids:
            self.fill_ids = list(self.prompt_ids)

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def prefill_done(self) -> bool:
        return self.num_prefilled == len(self.fill_ids)

    def kv_tokens(self, finished: bool) -> list[int]:
        """The tokens whose K/V a launched forward writes and whose values the host knows: what may
        go into the prefix cache. The last token read back is left out (under overlap a launched
        forward may be writing its K/V), so both loops leave the same cache (SGLang caches it:
        its issue 24590)."""
        if not finished or not self.prefill_done:
            return self.fill_ids[:self.num_prefilled]
        known = self.prompt_ids + self.output_ids
        end = self.prompt_len + max(len(self.output_ids) - 1, 0)     # the serial boundary
        return known[:min(end, self.prompt_len + self.num_scheduled - 1)]

    def can_decode(self) -> bool:
        """Launch one more decode step? Length limits are known ahead; stop tokens only later."""
        return (self.prefill_done and not self.finished
                and self.num_scheduled < self.params.max_new_tokens)


@dataclass
class Row:
    """One batch entry: ``length`` tokens of ``req`` starting at ``start``."""

    req: Req
    start: int
    length: int
    samples: bool                   # does this row produce a token the request keeps?
    epoch: int = -1                 # the request's admission it belongs to (set on creation)
    cached: int = 0                 # a first prefill chunk: the tokens before it, from the cache

    def __post_init__(self) -> None:
        if self.epoch < 0:
            self.epoch = self.req.epoch


@dataclass
class Batch:
    """One forward's rows; request ids and token count are computed once, on first use."""

    step: int
    kind: str                       # Phase.PREFILL | Phase.DECODE: its forward's span phase
    rows: list[Row]
    padded_size: int

    @cached_property
    def rids(self) -> tuple[int, ...]:
        return tuple(r.req.rid for r in self.rows)

    @cached_property
    def rid_set(self) -> frozenset[int]:
        return frozenset(self.rids)

    @cached_property
    def num_tokens(self) -> int:
        return sum(r.length for r in self.rows)


@dataclass(frozen=True)
class StepMeta:
    """Everything the device needs for one forward, as host arrays (one upload)."""

    step: int
    kind: str
    num_rows: int                   # real rows; ints has padded_size rows
    seq_len: int                    # S: tokens per row in this forward (1 for decode)
    kv_pages: int                   # page-table columns the attention must read
    all_greedy: bool
    ints: np.ndarray                # [Bp, NUM_INT_COLS + pages_per_seq] int64
    floats: np.ndarray              # [Bp, 2] float32: temperature, top_p
    prompt_writes: np.ndarray       # [3, T] int64: (slot, position, token) into token_pool
    rids: tuple[int, ...] = ()      # the requests its real rows serve (labels the device's spans)
    cached_tokens: int = 0          # prefill: its rows' prompt tokens found in the prefix cache


def decode_bucket(n: int, cap: int) -> int:
    """Pad batches to a few sizes (the CUDA-graph buckets), never above ``cap``."""
    for b in DECODE_BUCKETS:
        if b >= n:
            return min(b, cap)
    return cap


def prefill_bucket(n: int) -> int:
    """Tokens per row of a padded prefill: the next power of two, at least 16 (few shapes to warm)."""
    return max(16, 1 << (n - 1).bit_length())


def prefill_shapes(cfg) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Every (batch size, tokens per row) a padded prefill of ``cfg`` can have: what CUDA warms."""
    sizes = tuple(sorted({decode_bucket(n, cfg.max_batch_size) for n in DECODE_BUCKETS}))
    longest = prefill_bucket(min(cfg.max_prefill_tokens, cfg.max_seq_len))
    seq_lens = tuple(16 << i for i in range(longest.bit_length()) if 16 << i <= longest)
    return sizes, seq_lens


def build_meta(batch: Batch, page_table: np.ndarray, page_size: int, dummy_slot: int,
               full_kv: bool) -> StepMeta:
    """Lay the batch out as arrays; padding rows read the dummy slot and write the scratch page."""
    rows, n = batch.rows, len(batch.rows)
    ints, floats = _padded_arrays(batch.padded_size, n, page_table, dummy_slot)
    ints[:n, :NUM_INT_COLS] = [(r.req.slot, r.start, r.length, r.samples, r.req.seed,
                                r.req.params.top_k, 0) for r in rows]       # COL_SLOT..COL_OUT
    ints[:n, NUM_INT_COLS:] = page_table[ints[:n, COL_SLOT]]
    floats[:n] = [(r.req.params.temperature, r.req.params.top_p) for r in rows]
    writes = np.zeros((3, 0), dtype=np.int64)
    if batch.kind == Phase.PREFILL:
        chunks = [(r.req.slot, r.start, r.req.fill_ids[r.start:r.start + r.length]) for r in rows]
        writes = np.array([(slot, start + j, t) for slot, start, chunk in chunks
                           for j, t in enumerate(chunk)], dtype=np.int64).T
    return _meta(batch, ints, floats, n, page_size, full_kv, np.ascontiguousarray(writes))


def advance_meta(first: StepMeta, batch: Batch, keep: np.ndarray, offset: int,
                 page_table: np.ndarray, page_size: int, dummy_slot: int,
                 full_kv: bool) -> StepMeta:
    """Step ``offset`` of a multi-step decode group: the ``keep`` rows, ``offset`` positions on."""
    n = int(keep.sum())
    assert n == len(batch.rows), "advance_meta: batch rows and keep mask disagree"
    ints, floats = _padded_arrays(batch.padded_size, n, page_table, dummy_slot)
    ints[:n] = first.ints[:first.num_rows][keep]
    ints[:n, COL_START] += offset
    floats[:n] = first.floats[:first.num_rows][keep]
    return _meta(batch, ints, floats, n, page_size, full_kv, np.zeros((3, 0), dtype=np.int64))


def _padded_arrays(padded: int, n: int, page_table: np.ndarray, dummy_slot: int):
    """``ints``/``floats`` for ``padded`` rows, rows ``n..padded`` set as padding."""
    ints = np.empty((padded, NUM_INT_COLS + page_table.shape[1]), dtype=np.int64)
    floats = np.empty((padded, 2), dtype=np.float32)
    if padded > n:
        ints[n:, :NUM_INT_COLS] = 0
        ints[n:, COL_SLOT] = dummy_slot
        ints[n:, NUM_INT_COLS:] = page_table[dummy_slot]
        floats[n:] = (0.0, 1.0)
    return ints, floats


def _meta(batch: Batch, ints: np.ndarray, floats: np.ndarray, n: int, page_size: int,
          full_kv: bool, writes: np.ndarray) -> StepMeta:
    rows = batch.rows
    kv_tokens = max(r.start + r.length for r in rows)
    pages_per_seq = ints.shape[1] - NUM_INT_COLS
    kv_pages = pages_per_seq if full_kv else -(-kv_tokens // page_size)
    seq_len = max(r.length for r in rows)
    if full_kv and batch.kind == Phase.PREFILL:
        seq_len = prefill_bucket(seq_len)        # CUDA: one of a few shapes, each warmed at start
    return StepMeta(
        step=batch.step, kind=batch.kind, num_rows=n, seq_len=seq_len, kv_pages=kv_pages,
        # Greedy as the device will see it: a temperature that is 0 once in float32.
        all_greedy=not floats[:n, 0].any(), ints=ints, floats=floats,
        prompt_writes=writes, rids=batch.rids, cached_tokens=sum(r.cached for r in rows))
