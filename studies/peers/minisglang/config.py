"""Mini-SGLang in the configurations its users would choose for the peer benchmark's work.

Mini-SGLang (github.com/sgl-project/mini-sglang): its default ``page_size`` is 1, with a
page pool sized by ``memory_ratio`` alone; each decode step then rewrites the page table
request by request and concatenates a free list of millions of entries. Its own offline
benchmark (``benchmark/offline/bench.py``) uses pages of 256. Tried: pages of 16 (ours) with the
pool sized to the work (``num_page_override``), its defaults, and pages of 256; the heap frozen
after loading in each, as our engine does for itself. Its attention is FlashInfer
(``attention_backend="fi"``) for prefill and decode: on an H200 it would pick FlashAttention 3
for prefill (``"fa,fi"``, ``_adjust_config`` in ``python/minisgl/engine/engine.py``), from
``sgl_kernel``, which the offline GPU machine lacks. Its FlashInfer metadata takes pages of 1 token only
(``python/minisgl/attention/fi.py``: ``assert self.page_size == 1``; a page of the pool is
addressed token by token), and with pages of 256 its first prefill ends in a device-side
index assert (exit -6), so pages of 256 give no row.
"""

from __future__ import annotations

from studies.peers.config import MINISGL, PeerConfig


def minisgl_pages(page_size: int, max_batch: int, max_seq_len: int) -> int:
    """Mini-SGLang's pool sized to the work: every request at full length, twice over (warm-up
    runs may overlap with a page or two in flight)."""
    return 2 * max_batch * -(-max_seq_len // page_size) + 16


def configs(max_batch: int, max_seq_len: int, pages_256: bool = False) -> list[PeerConfig]:
    """Pages of 16 with the pool sized to the work, and its defaults (pages of 1, the pool by
    ``memory_ratio``): which is faster depends on the host, so both run and the best is taken."""
    def pages(size: int) -> PeerConfig:
        return PeerConfig(MINISGL, f"pages of {size}, pool sized to the work, heap frozen",
                          {"page_size": size,
                           "num_page_override": minisgl_pages(size, max_batch, max_seq_len)},
                          "its offline benchmark's page size" if size == 256
                          else "our page size", models=() if size == 16
                          else ("qwen2.5-0.5b-shape",))
    default = PeerConfig(MINISGL, "pages of 1, pool by memory ratio (its defaults), heap frozen",
                         {"page_size": 1}, "its defaults")
    return [pages(16), default] + ([pages(256)] if pages_256 else [])
