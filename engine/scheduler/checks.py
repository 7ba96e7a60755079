"""Checks that find memory faults by looking at what happened, never at what the code meant: a
position read through two pages (``MappingCheck``), and pools or prefix cache left wrong."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.scheduler.kv_cache import CACHE_OWNER, IdPool, pages_needed
from engine.scheduler.radix_cache import RadixCache
from engine.scheduler.request import NUM_INT_COLS


class MappingCheck:
    """Per request (and admission), the pages its launched batches read for the positions an
    earlier batch wrote; a batch that reads one of them through another page is a fault."""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.read: dict[tuple[int, int], np.ndarray] = {}
        self.faults: list[tuple[int, int, int, int]] = []   # (request, position, page, page)

    def launched(self, batches: Sequence, metas: Sequence) -> None:
        for batch, meta in zip(batches, metas):
            for i, row in enumerate(batch.rows):
                pages = meta.ints[i, NUM_INT_COLS:NUM_INT_COLS
                                  + pages_needed(row.start, self.page_size)]
                key = (row.req.rid, row.epoch)
                seen = self.read.get(key)
                if seen is not None:
                    n = min(len(seen), len(pages))
                    differ = np.flatnonzero(seen[:n] != pages[:n])
                    if differ.size:
                        at = int(differ[0])
                        self.faults.append((row.req.rid, at * self.page_size, int(seen[at]),
                                            int(pages[at])))
                if seen is None or len(pages) > len(seen):
                    self.read[key] = pages.copy()

    def released(self, rid: int) -> None:
        for key in [key for key in self.read if key[0] == rid]:
            del self.read[key]


def memory_problems(slots: IdPool, pages: IdPool, cache: RadixCache | None,
                    idle: bool = True) -> list[str]:
    """What is wrong with the pools and the cache; between runs (``idle``) nothing may be held
    but the cache's pages, and no cache node may stay locked."""
    found = [] if cache is None else cache.problems()
    cached = set() if cache is None else {p for node in cache.nodes() for p in node.pages}
    owned = pages.held_by(CACHE_OWNER)
    if cached != owned:
        found.append(f"the cache's nodes hold {len(cached)} pages, the pool says it owns "
                     f"{len(owned)} ({len(cached ^ owned)} differ)")
    if idle:
        if pages.num_held != len(owned):
            found.append(f"{pages.num_held - len(owned)} KV pages still held by requests")
        if slots.num_held:
            found.append(f"{slots.num_held} request slots still held")
        if cache is not None and cache.locked_pages:
            found.append(f"{cache.locked_pages} cached pages still locked")
    return found
