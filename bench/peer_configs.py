"""Each peer in the configurations its own users would choose for this work, named and sourced.

The work is offline throughput on random token-id prompts: every prompt is new (a prefix cache
finds nothing), the batch is admitted at once, greedy decoding to a fixed length. A peer's rows in
the tables come from every configuration tried here; the ratios take each peer's fastest one
(``bench/peer_table.py``), so a configuration that made a peer slower is reported, never used.

- **Mini-SGLang** (github.com/sgl-project/mini-sglang): its default ``page_size`` is 1, with a
  page pool sized by ``memory_ratio`` alone; each decode step then rewrites the page table
  request by request and concatenates a free list of millions of entries. Its own offline
  benchmark (``benchmark/offline/bench.py``) uses pages of 256. Tried: pages of 16 (ours) and of
  256, the pool sized to the work (``num_page_override``), and the heap frozen after loading, as
  our engine does for itself. Its attention is FlashInfer (``attention_backend="fi"``) for
  prefill and decode: on an H200 it would pick FlashAttention 3 for prefill (``"fa,fi"``,
  ``_adjust_config`` in ``python/minisgl/engine/engine.py``), from ``sgl_kernel``, which the
  offline GPU machine lacks. Its FlashInfer metadata takes pages of 1 token only
  (``python/minisgl/attention/fi.py``: ``assert self.page_size == 1``; a page of the pool is
  addressed token by token), and with pages of 256 its first prefill ends in a device-side
  index assert (exit -6), so pages of 256 give no row.
- **SGLang** (github.com/sgl-project/sglang, 0.5.17): its docs' hyperparameter tuning page
  (docs.sglang.ai, "Hyperparameter Tuning") points throughput work at the page size, the radix
  cache (off when prompts never repeat), the chunked prefill size and the CUDA-graph batch
  sizes; ``--enable-torch-compile`` for small batches. Tried: pages of 16, radix cache off,
  decode CUDA graphs up to the largest batch (the default list, cut at it), chunked prefill at its
  H200 default (8192 tokens: more than one batch of prompts here), the heap frozen after warm-up
  (``Engine.freeze_gc``); and that with torch.compile over the same graph sizes.
  FlashInfer attention: its H200 default (FlashAttention 3) ships as a 1.1 GB library that the
  offline GPU machine cannot be given (``scripts/sglang_payload.sh`` leaves it out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MINISGL, SGLANG = "Mini-SGLang", "SGLang"


@dataclass(frozen=True)
class PeerConfig:
    """One configuration of a peer: its name in the tables, its engine arguments (without the
    work's own: model, batch sizes, lengths), and why a user would pick it."""

    engine: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    models: tuple[str, ...] = ()         # only these shapes (empty: every shape of the work)


def minisgl_pages(page_size: int, max_batch: int, max_seq_len: int) -> int:
    """Mini-SGLang's pool sized to the work: every request at full length, twice over (the
    record's batch and the timed one never hold pages at once, but warm-up runs may overlap
    with a page or two in flight)."""
    return 2 * max_batch * -(-max_seq_len // page_size) + 16


def minisgl_configs(max_batch: int, max_seq_len: int, pages_256: bool = False) -> list[PeerConfig]:
    def pages(size: int) -> PeerConfig:
        return PeerConfig(MINISGL, f"pages of {size}, pool sized to the work, heap frozen",
                          {"page_size": size,
                           "num_page_override": minisgl_pages(size, max_batch, max_seq_len)},
                          "its offline benchmark's page size" if size == 256
                          else "our page size", models=() if size == 16
                          else ("qwen2.5-0.5b-shape",))
    return [pages(16)] + ([pages(256)] if pages_256 else [])


SGLANG_TUNED = {"attention_backend": "flashinfer", "page_size": 16, "disable_radix_cache": True,
                "mem_fraction_static": 0.5}


def sglang_configs(batches: tuple[int, ...], compile_too: bool) -> list[PeerConfig]:
    graphs = {"cuda_graph_max_bs_decode": max(batches)}
    tuned = PeerConfig(SGLANG, "pages of 16, radix cache off, graphs to max B, heap frozen",
                       {**SGLANG_TUNED, **graphs},
                       "its tuning docs for throughput on prompts that never repeat")
    configs = [tuned]
    if compile_too:
        configs.append(PeerConfig(
            SGLANG, "the same with torch.compile",
            {**SGLANG_TUNED, **graphs, "enable_torch_compile": True,
             "torch_compile_max_bs": max(batches)},
            "what its users turn on for small batches", models=("qwen2.5-0.5b-shape",)))
    return configs
