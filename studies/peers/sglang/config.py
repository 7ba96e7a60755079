"""SGLang (0.5.17) in the configurations its users would choose for the peer benchmark's work.

Its docs' "Hyperparameter Tuning" page points throughput work at the page size, the radix cache,
the chunked prefill size and the CUDA-graph batch sizes; ``--enable-torch-compile`` for small
batches. Tried: pages of 16, radix cache off, decode graphs up to the largest batch, the heap
frozen after warm-up; and that with torch.compile. FlashInfer attention: its H200 default
(FlashAttention 3) is a library the offline GPU machine cannot be given.
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
