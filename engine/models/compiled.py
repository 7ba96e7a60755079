"""Decode forward compiled by ``torch.compile``, cut at attention (CUDA only).

TorchInductor fuses a small model's tiny element-wise kernels. Attention (our own kernel) stays
outside; everything between two attentions is one region, which takes the two layers as arguments
(one compile for every layer pair) with the batch a symbol (one for every bucket). Prefill runs the
eager modules."""

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
    """Call like ``CausalLM.forward``; decode runs compiled regions around ``ctx.attend``."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model
        # Compiled code is cached per function, with one entry per model shape and batch
        # specialisation; a process that builds several models (the tests do) needs more than 8.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        opts = dict(dynamic=True, fullgraph=True)
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
