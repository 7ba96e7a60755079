"""SGLang in the configurations its users would choose for the peer benchmark's work.

SGLang (github.com/sgl-project/sglang, 0.5.17): its docs' hyperparameter tuning page
(docs.sglang.ai, "Hyperparameter Tuning") points throughput work at the page size, the radix
cache (off when prompts never repeat), the chunked prefill size and the CUDA-graph batch
sizes; ``--enable-torch-compile`` for small batches. Tried: pages of 16, radix cache off,
decode CUDA graphs up to the largest batch (the default list, cut at it), chunked prefill at its
H200 default (8192 tokens: more than one batch of prompts here), the heap frozen after warm-up
(``Engine.freeze_gc``); and that with torch.compile over the same graph sizes.
FlashInfer attention: its H200 default (FlashAttention 3) ships as a 1.1 GB library that the
offline GPU machine cannot be given (``studies/peers/sglang/payload.sh`` leaves it out).
"""

from __future__ import annotations

from studies.peers.config import SGLANG, PeerConfig

SGLANG_TUNED = {"attention_backend": "flashinfer", "page_size": 16, "disable_radix_cache": True,
                "mem_fraction_static": 0.5}


def configs(batches: tuple[int, ...], compile_too: bool) -> list[PeerConfig]:
    graphs = {"cuda_graph_max_bs_decode": max(batches)}
    tuned = PeerConfig(SGLANG, "pages of 16, radix cache off, graphs to max B, heap frozen",
                       {**SGLANG_TUNED, **graphs},
                       "its tuning docs for throughput on prompts that never repeat")
    found = [tuned]
    if compile_too:
        found.append(PeerConfig(
            SGLANG, "the same with torch.compile",
            {**SGLANG_TUNED, **graphs, "enable_torch_compile": True,
             "torch_compile_max_bs": max(batches)},
            "what its users turn on for small batches", models=("qwen2.5-0.5b-shape",)))
    return found
