"""Mini-SGLang in the configurations its users would choose for the peer benchmark's work.

Its default ``page_size`` is 1, the pool sized by ``memory_ratio``. Tried: pages of 16 (ours) with
the pool sized to the work, its defaults, and (asked for) its offline benchmark's pages of 256,
which its FlashInfer metadata cannot take (the first prefill ends in a device-side assert). Its
attention is FlashInfer: on an H200 it would pick FlashAttention 3 for prefill, from
``sgl_kernel``, which the offline GPU machine lacks.
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
