"""Decode forward compiled by ``torch.compile``, cut at attention (CUDA only, opt-in).

A decode step of a small model is hundreds of tiny kernels: every RMSNorm, RoPE, SiLU, residual
add is its own launch and its own trip through memory. The compiler (TorchInductor) fuses chains
of such element-wise work into one Triton kernel and leaves the matrix products to cuBLAS.

We compile *regions*, not the whole model, for three reasons:

- **Cut at attention.** Attention reads and writes the KV cache through the page table; it is our
  own Triton kernel already (``attention_triton.py``) and stays outside. Everything *between* two
  attentions (o_proj, residual, norm, MLP, residual, the *next* layer's norm, q/k/v) is one
  region, so the residual add at a layer's end fuses with the next layer's norm. RoPE is left to
  the attention kernel (``ModelRunner``'s default): in a region it would follow the cuBLAS q/k/v
  product, into which the compiler fuses nothing, so it would be a kernel of its own a layer.
- **Compile once, use 24 times.** The region takes the two layers as arguments; every layer pair has
  the same shapes, so it compiles once for all of them (seconds, not a minute per model).
- **One compile for every batch size.** ``dynamic=True`` makes the batch a symbol, so the ten
  CUDA-graph batch buckets share one compiled kernel set (batch 1 gets its own specialisation).

Prefill (more than one token per row) runs the eager modules: it happens once per request.
Compiled code lands in TorchInductor's on-disk cache (``TORCHINDUCTOR_CACHE_DIR``, default
``/tmp/torchinductor_$USER``), so a second start on the same machine skips most of the compile.
"""

from __future__ import annotations

import torch

from engine.models.model import CausalLM


def _first(model: CausalLM, layer, input_ids, positions, rope: bool):
    x, cos, sin = model.embed(input_ids, positions, rope)
    q, k, v = layer.attention_inputs(x, cos, sin)
    return x, cos, sin, q, k, v


def _between(layer, next_layer, x, attn, cos, sin):
    x = layer.attention_output_and_mlp(x, attn)
    q, k, v = next_layer.attention_inputs(x, cos, sin)
    return x, q, k, v


def _last(model: CausalLM, layer, x, attn, last_index):
    return model.head(layer.attention_output_and_mlp(x, attn), last_index)


class CompiledDecode:
    """Call like ``CausalLM.forward``; decode runs compiled regions around ``ctx.attend``.

    ``gemv=True`` (an experiment, off by default) also routes the decoder layers' linear layers
    through ``gemv_triton.py`` for one-token steps: cuBLAS reads small weights far below memory
    bandwidth at batch 1..64, but the split-K partial sums cost extra kernels where a norm
    follows, which can cost more than the bandwidth gains (``python -m studies forward
    --variants triton+compile triton+compile+gemv`` compares the two)."""

    def __init__(self, model: CausalLM, gemv: bool | tuple[str, ...] = False,
                 mode: str | None = None) -> None:
        self.model = model
        if gemv:
            from engine.layers.gemv_triton import use_decode_gemv
            use_decode_gemv(model.model.layers, () if gemv is True else gemv)
        # Compiled code is cached per function, with one entry per model shape and batch
        # specialisation; a process that builds several models (the tests do) needs more than 8.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        opts = dict(dynamic=True, fullgraph=True, mode=mode)
        self.first = torch.compile(_first, **opts)
        self.between = torch.compile(_between, **opts)
        self.last = torch.compile(_last, **opts)

    def __call__(self, input_ids, positions, ctx, kv_caches, last_index) -> torch.Tensor:
        if input_ids.shape[1] != 1:                # prefill: the eager modules
            return self.model(input_ids, positions, ctx, kv_caches, last_index)
        layers = self.model.model.layers
        rope = not getattr(ctx, "applies_rope", False)   # False: the attention kernel rotates
        x, cos, sin, q, k, v = self.first(self.model, layers[0], input_ids, positions, rope)
        for i, (k_cache, v_cache) in enumerate(kv_caches):
            attn = ctx.attend(q, k, v, k_cache, v_cache)                    # [B, 1, H*D]
            if i + 1 < len(layers):
                x, q, k, v = self.between(layers[i], layers[i + 1], x, attn, cos, sin)
        return self.last(self.model, layers[-1], x, attn, last_index)      # [B, V]
