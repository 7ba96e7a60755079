"""KV memory for the scheduler, in the order a request meets it (as Mini-SGLang's ``cache_manager``):

1. ``admit``      match its prompt in the prefix cache and lock it, take a slot and pages for the rest
2. ``grow``       one more page whenever its next token starts one (evicting unread cached pages)
3. ``cache_req``  hand its computed pages to the cache: after each prefill chunk and at the end
4. ``detach``     one release path for finished, aborted and retracted requests: pages and lock
                  back at once, the slot when no launched batch carries it (``table.py``)"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.config import EngineConfig
from engine.scheduler.kv_cache import CACHE_OWNER, IdPool, pages_needed
from engine.scheduler.radix_cache import Node, RadixCache
from engine.scheduler.request import Req

# Admission reserves this share of the running requests' remaining output: high at first,
# decaying while decoding goes well, high again after a retraction (SGLang's ratio works alike;
# Mini-SGLang reserves the whole output and never retracts).
NEW_TOKEN_RATIO_START = 0.5
NEW_TOKEN_RATIO_MIN = 0.1
NEW_TOKEN_RATIO_DECAY = 0.005     # per decode step


@dataclass(frozen=True)
class Pools:
    """What persists across an engine's runs: request slots, KV pages, the prefix cache over
    them (None: no prefix cache)."""

    slots: IdPool
    pages: IdPool
    cache: RadixCache | None


@dataclass
class Release:
    """What a request gives back: its slot, the pages it owns, its lock on the cache."""

    rid: int
    slot: int
    pages: list[int]
    node: Node | None               # the cache node it locked (None: nothing locked)


class CacheManager:
    def __init__(self, cfg: EngineConfig, slots: IdPool, pages: IdPool,
                 cache: RadixCache | None, page_table: np.ndarray) -> None:
        self.cfg, self.slots, self.pages, self.cache = cfg, slots, pages, cache
        self.page_table = page_table            # [slots + 1, pages_per_seq], the host copy
        self.ps = cfg.page_size
        self.lock_pages = not cfg.hazards.no_cache_lock
        self.new_token_ratio = NEW_TOKEN_RATIO_START
        self.prefix_hit_tokens = 0                # fill tokens found in the cache, this run
        self.fill_tokens = 0                      # fill tokens admitted, this run

    # ---- 1. admission -------------------------------------------------------------------------
    def reserve_tokens(self, running: list[Req]) -> float:
        """Output tokens the running requests are still expected to need, at the current ratio."""
        return self.new_token_ratio * sum(r.params.max_new_tokens - r.num_scheduled
                                          for r in running)

    def admit(self, req: Req, reserved_tokens: float) -> bool:
        """Give ``req`` a slot and the pages for its tokens (``req.fill_ids``), the cached prefix
        borrowed; False, with nothing taken, when the memory is not there."""
        if not self.slots.can_allocate(1):
            return False
        fill = req.fill_ids
        matched, node = self._match(fill)
        self._lock(node)
        need = pages_needed(len(fill), self.ps) - len(matched)
        expected = reserved_tokens + self.new_token_ratio * (req.params.max_new_tokens
                                                             - len(req.output_ids))
        if need + math.ceil(expected / self.ps) > self.available():
            self._unlock(node)
            return False                          # admission waits for memory
        own = self._take(need, req.rid)
        if own is None:                            # only with no_cache_lock: evicted under us
            self._unlock(node)
            return False
        req.slot = self.slots.allocate(1, req.rid)[0]
        req.pages, req.cached_pages, req.cache_node = matched + own, len(matched), node
        req.num_prefilled = len(matched) * self.ps
        req.num_scheduled = len(req.output_ids)
        req.admit_hit = req.num_prefilled
        req.prefix_hit_tokens += req.num_prefilled
        self.prefix_hit_tokens += req.num_prefilled
        self.fill_tokens += len(fill)
        self.page_table[req.slot, :len(req.pages)] = req.pages
        return True

    def available(self) -> int:
        """Pages a request could get now: the free ones and those only the cache holds."""
        return self.pages.num_free + (self.cache.evictable() if self.cache else 0)

    # ---- 2. growth ----------------------------------------------------------------------------
    def grow(self, req: Req, tokens: int) -> bool:
        """Make ``req``'s pages cover its first ``tokens`` positions; False if the pool can't."""
        need = pages_needed(tokens, self.ps) - len(req.pages)
        if need <= 0:
            return True
        own = self._take(need, req.rid)
        if own is None:
            return False
        self.page_table[req.slot, len(req.pages):len(req.pages) + need] = own
        req.pages.extend(own)
        return True

    def decoded(self) -> None:
        """One decode step went by without a retraction: reserve a little less."""
        self.new_token_ratio = max(NEW_TOKEN_RATIO_MIN,
                                   self.new_token_ratio - NEW_TOKEN_RATIO_DECAY)

    def retracted(self) -> None:
        self.new_token_ratio = NEW_TOKEN_RATIO_START

    # ---- 3. the prefix cache ------------------------------------------------------------------
    def cache_req(self, req: Req, finished: bool, remap: bool = False) -> None:
        """Insert ``req``'s pages whose K/V a launched forward writes and whose tokens are known.
        ``remap`` (hazard lab only): point the request at the cache's pages, as SGLang PR 38140."""
        if self.cache is None or req.slot < 0:
            return
        tokens = req.kv_tokens(finished)
        n = len(tokens) // self.ps
        if n <= req.cached_pages:
            return
        if remap:
            self._remap_to_cache(req, tokens[:n * self.ps])
            if n <= req.cached_pages:
                return
        old = req.cache_node if req.cache_node is not None else self.cache.root
        node, taken = self.cache.insert(tokens[:n * self.ps], req.pages[:n], old)
        if taken:
            self.pages.transfer(req.pages[req.cached_pages:req.cached_pages + taken], req.rid,
                                CACHE_OWNER)
            self._lock(node)
            self._unlock(old)
            req.cache_node, req.cached_pages = node, req.cached_pages + taken

    def _remap_to_cache(self, req: Req, tokens: list[int]) -> None:
        matched, node = self.cache.match(tokens)
        if len(matched) <= req.cached_pages:
            return
        dup = req.pages[req.cached_pages:len(matched)]
        self.pages.free(dup, req.rid)            # at once: a launched batch may still read them
        req.pages[:len(matched)] = matched
        self.page_table[req.slot, :len(matched)] = matched
        self._lock(node)
        self._unlock(req.cache_node if req.cache_node is not None else self.cache.root)
        req.cache_node, req.cached_pages = node, len(matched)

    # ---- 4. release ---------------------------------------------------------------------------
    def detach(self, req: Req) -> Release:
        """Take ``req``'s slot, own pages and lock into a Release (``req`` holds none after)."""
        release = Release(req.rid, req.slot, req.pages[req.cached_pages:],
                          req.cache_node if self.lock_pages else None)
        req.last_slot = req.slot
        req.slot, req.pages, req.cached_pages, req.cache_node = -1, [], 0, None
        return release

    def free_pages(self, release: Release) -> None:
        """Give back a Release's pages and cache lock at once, even under a launched batch: only
        forwards write KV pages, in launch order, so a page's next owner writes it after them."""
        self.pages.free(release.pages, release.rid)
        if release.node is not None and self.cache is not None:
            self.cache.unlock(release.node)

    def free_slot(self, rid: int, slot: int) -> None:
        """Give a slot back and clear its page-table row (``DoubleFreeError`` if already free)."""
        self.slots.free([slot], rid)
        self.page_table[slot] = self.pages.total

    def usage(self) -> tuple[int, int, int]:
        """(pages in use by requests, pages held only by the cache, free pages)."""
        cached = self.cache.evictable() if self.cache else 0
        free = self.pages.num_free
        return self.pages.total - free - cached, cached, free

    def _match(self, fill: list[int]) -> tuple[list[int], Any]:
        if self.cache is None:
            return [], None
        # At least the last token is computed: its logits give the next token.
        return self.cache.match(fill[:(len(fill) - 1) // self.ps * self.ps])

    def _take(self, n: int, owner: int) -> list[int] | None:
        """``n`` pages for ``owner``, evicting least recently used cached pages if need be."""
        if n > self.pages.num_free and self.cache is not None:
            self.pages.free(self.cache.evict(n - self.pages.num_free), CACHE_OWNER)
        if n > self.pages.num_free:
            return None
        return self.pages.allocate(n, owner)

    def _lock(self, node: Node | None) -> None:
        if node is not None and self.lock_pages:
            self.cache.lock(node)

    def _unlock(self, node: Node | None) -> None:
        if node is not None and self.lock_pages:
            self.cache.unlock(node)
