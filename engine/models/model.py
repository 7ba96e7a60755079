"""A Llama-family transformer (Llama, Mistral, Qwen2, Qwen3) in plain PyTorch, attending over a
paged KV cache, with Hugging Face's parameter names; q/k/v and gate/up are stacked into one matrix
each at load, as in vLLM and SGLang. The model never sees requests or pages: it gets padded
``[B, S]`` ids and positions and an attention *context* that stores this step's keys and values and
attends over what a row may see. Each layer is *before attention* / *attend* / *after attention*,
so ``compiled.py`` can compile what lies between two attentions."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a Llama-family model, read from a Hugging Face ``config.json``."""

    architecture: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False

    def num_parameters(self) -> int:
        h, d, kv = self.hidden_size, self.head_dim, self.num_kv_heads
        attn = h * self.num_heads * d * 2 + h * kv * d * 2
        attn += (self.num_heads + 2 * kv) * d if self.qkv_bias else 0
        attn += 2 * d if self.qk_norm else 0
        mlp = 3 * h * self.intermediate_size
        per_layer = attn + mlp + 2 * h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * per_layer + embed + h


@dataclass
class AttentionContext:
    """Where K/V go and come from, shared by every layer of one forward: the plain-PyTorch way."""

    write_loc: torch.Tensor   # [B*S] flat cache slot per query token (a scratch slot for padding)
    read_loc: torch.Tensor    # [B, Lk] flat cache slot of key position j for row b
    mask: torch.Tensor        # [B, 1, S, Lk] additive: 0 where query i may attend key j, else -inf
    applies_rope = False      # q and k come rotated (the paged decode context rotates them itself)

    def attend(self, q, k, v, k_cache, v_cache) -> torch.Tensor:
        """Store this step's ``k, v [B, S, KV, D]``, then attend ``q [B, S, H, D]`` -> ``[B, S, H*D]``."""
        b, s, nh, d = q.shape
        nkv = k.shape[2]
        k_cache.index_copy_(0, self.write_loc, k.reshape(b * s, nkv, d))
        v_cache.index_copy_(0, self.write_loc, v.reshape(b * s, nkv, d))
        # Read every key the row may see: a copy of the whole (padded) context, every layer.
        keys = k_cache[self.read_loc].transpose(1, 2)                       # [B, KV, Lk, D]
        values = v_cache[self.read_loc].transpose(1, 2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=self.mask,
                                             enable_gqa=True)               # [B, H, S, D]
        return out.transpose(1, 2).reshape(b, s, nh * d)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Same arithmetic as transformers (normalise in float32, or float64, cast back, then scale
        # by the weight), but the normalisation is one fused kernel instead of five.
        return self.weight * F.rms_norm(x, (x.shape[-1],), eps=self.eps)


def rope_inv_freq(spec: ModelSpec, device: torch.device | str = "cpu") -> torch.Tensor:
    """Inverse frequencies, with Llama-3 style scaling when the config asks for it."""
    d = spec.head_dim
    inv = 1.0 / (spec.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    scaling = spec.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "llama3":
        factor = scaling["factor"]
        low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
        old_ctx = scaling["original_max_position_embeddings"]
        low_wl, high_wl = old_ctx / low, old_ctx / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wl, inv / factor, inv)
        smooth = (old_ctx / wavelen - low) / (high - low)
        mid = (1 - smooth) * scaled / factor + smooth * scaled
        is_mid = (wavelen >= high_wl) & (wavelen <= low_wl)
        inv = torch.where(is_mid, mid, scaled)
    elif kind == "linear":
        inv = inv / scaling["factor"]
    return inv.to(device)


def rope_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype):
    """cos/sin tables for ``positions [B, S]`` -> two ``[B, S, D]`` tensors in ``dtype``."""
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    freqs = positions.to(compute)[..., None] * inv_freq.to(compute)  # [B, S, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)                            # [B, S, D]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [B, S, H, D]; cos/sin: [B, S, D]
    return x * cos[:, :, None, :] + _rotate_half(x) * sin[:, :, None, :]


class Attention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, d = spec.hidden_size, spec.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, d
        # q, k and v stacked: rows [0, H*D) are q_proj's, then k_proj's, then v_proj's.
        self.qkv_proj = nn.Linear(h, (spec.num_heads + 2 * spec.num_kv_heads) * d,
                                  bias=spec.qkv_bias)
        self.o_proj = nn.Linear(spec.num_heads * d, h, bias=spec.o_bias)
        if spec.qk_norm:
            self.q_norm = RMSNorm(d, spec.rms_norm_eps)
            self.k_norm = RMSNorm(d, spec.rms_norm_eps)
        self.qk_norm = spec.qk_norm

    def qkv(self, x: torch.Tensor, cos, sin):
        """q ``[B, S, H, D]``, k and v ``[B, S, KV, D]``, RoPE applied to q and k (``cos=None``:
        not here, the attention context rotates them as it loads them)."""
        b, s, _ = x.shape
        nh, nkv = self.num_heads, self.num_kv_heads
        qkv = self.qkv_proj(x).view(b, s, nh + 2 * nkv, self.head_dim)     # [B, S, H+2KV, D]
        q, k, v = qkv[:, :, :nh], qkv[:, :, nh:nh + nkv], qkv[:, :, nh + nkv:]
        if self.qk_norm:                 # Qwen3: q and k have their own norms
            q, k = self.q_norm(q), self.k_norm(k)
        if cos is None:                  # RoPE comes later, inside attention
            return q, k, v
        if self.qk_norm:
            return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v
        qk = apply_rope(qkv[:, :, :nh + nkv], cos, sin)   # one RoPE pass over q and k heads together
        return qk[:, :, :nh], qk[:, :, nh:], v


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, i, bias = spec.hidden_size, spec.intermediate_size, spec.mlp_bias
        self.gate_up_proj = nn.Linear(h, 2 * i, bias=bias)     # gate_proj's rows, then up_proj's
        self.down_proj = nn.Linear(i, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)                            # SwiGLU


# Hugging Face's separate matrices -> our stacked ones (in this order).
FUSED = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
         "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}


def fuse_hf_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Stack each layer's q/k/v (gate/up) weights and biases the way our modules hold them.
    A group with a part missing is left as it is, so loading reports the names that differ."""
    out = dict(state)
    for fused, parts in FUSED.items():
        first = re.compile(rf"^(.*\.){re.escape(parts[0])}\.(weight|bias)$")
        for key in state:
            m = first.match(key)
            names = [f"{m.group(1)}{p}.{m.group(2)}" for p in parts] if m else []
            if names and all(n in state for n in names):
                out[f"{m.group(1)}{fused}.{m.group(2)}"] = torch.cat([state[n] for n in names])
                for n in names:
                    del out[n]
    return out


def split_to_hf_state_dict(state: dict[str, torch.Tensor], spec: ModelSpec) -> dict[str, torch.Tensor]:
    """The inverse of ``fuse_hf_state_dict``: Hugging Face's names and shapes again."""
    d, i = spec.head_dim, spec.intermediate_size
    sizes = {"self_attn.qkv_proj": [spec.num_heads * d, spec.num_kv_heads * d, spec.num_kv_heads * d],
             "mlp.gate_up_proj": [i, i]}
    out = {}
    for key, value in state.items():
        m = re.match(r"^(.*\.)(self_attn\.qkv_proj|mlp\.gate_up_proj)\.(weight|bias)$", key)
        if not m:
            out[key] = value
            continue
        for part, piece in zip(FUSED[m.group(2)], value.split(sizes[m.group(2)])):
            out[f"{m.group(1)}{part}.{m.group(3)}"] = piece
    return out


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = Attention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = MLP(spec)

    def forward(self, x, cos, sin, ctx, k_cache, v_cache) -> torch.Tensor:
        q, k, v = self.attention_inputs(x, cos, sin)
        attn = ctx.attend(q, k, v, k_cache, v_cache)                        # [B, S, H*D]
        return self.attention_output_and_mlp(x, attn)

    def attention_inputs(self, x, cos, sin):
        """Before attention: norm, the stacked q/k/v projection, RoPE."""
        return self.self_attn.qkv(self.input_layernorm(x), cos, sin)

    def attention_output_and_mlp(self, x, attn) -> torch.Tensor:
        """After attention: output projection, residual, norm, SwiGLU MLP, residual."""
        x = x + self.self_attn.o_proj(attn)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)


class CausalLM(nn.Module):
    """``forward`` returns the logits of one chosen position per row: ``[B, V]``."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.spec = spec
        self.model = Backbone(spec)
        self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        if spec.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        # RoPE frequencies in float32; the loader fills them on the model's device.
        self.register_buffer("inv_freq", torch.empty(spec.head_dim // 2), persistent=False)

    def embed(self, input_ids, positions, rope: bool = True):
        """Token embeddings ``[B, S, h]`` and the RoPE tables for ``positions [B, S]`` (None, None
        with ``rope=False``: the attention context applies RoPE itself)."""
        x = self.model.embed_tokens(input_ids)                              # [B, S, h]
        if not rope:
            return x, None, None
        cos, sin = rope_cos_sin(self.inv_freq, positions, x.dtype)
        return x, cos, sin

    def head(self, x, last_index) -> torch.Tensor:
        """Final norm and LM head at one position per row: ``[B, V]``."""
        rows = torch.arange(x.shape[0], device=x.device)
        return self.lm_head(self.model.norm(x[rows, last_index]))           # [B, V]

    def forward(self, input_ids, positions, ctx, kv_caches, last_index):
        # input_ids, positions: [B, S]; last_index: [B] which position's logits to return
        x, cos, sin = self.embed(input_ids, positions, rope=not ctx.applies_rope)
        for layer, (k_cache, v_cache) in zip(self.model.layers, kv_caches):
            x = layer(x, cos, sin, ctx, k_cache, v_cache)
        return self.head(x, last_index)
