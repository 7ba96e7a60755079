"""Picking the next token on the device: greedy, temperature, top-k, top-p, per-request seeds.

The noise for request ``r`` at output position ``p`` is a hash of ``(seed_r, p, token id)``: a
request's samples depend on neither its batch nor the loop, and no RNG state stops a CUDA graph."""

from __future__ import annotations

import torch

_M = 2147483647  # 2^31 - 1: products below stay under 2^63, so int64 arithmetic never overflows


def uniform_noise(seeds: torch.Tensor, positions: torch.Tensor, vocab: int) -> torch.Tensor:
    """Deterministic uniforms in (0, 1): ``[B, V]`` from ``seeds [B]`` and ``positions [B]``."""
    ids = torch.arange(vocab, device=seeds.device, dtype=torch.int64)
    x = (seeds[:, None] % _M) * 16807 + (positions[:, None] % _M) * 69621 + ids[None, :]
    x = x % _M
    for _ in range(3):  # a few rounds of multiply + xorshift mix neighbouring counters apart
        x = (x * 48271) % _M
        x = x ^ (x >> 11)
        x = (x * 69621 + 12345) % _M
    return (x.to(torch.float64) + 0.5).div(_M).to(torch.float32)


def greedy(logits: torch.Tensor, kernel: str = "torch") -> torch.Tensor:
    """The most likely token of each row ``[B]``, the lowest id among equals (``torch.argmax``'s
    answer). ``kernel="triton"`` (CUDA): the same answer in two passes (``argmax_triton.py``)."""
    if kernel == "triton":
        from engine.layers.argmax_triton import argmax
        return argmax(logits)
    return logits.argmax(dim=-1)                                             # [B]


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
           top_p: torch.Tensor, seeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """One token per row. Rows with ``temperature == 0`` are greedy; the rest are sampled."""
    b, v = logits.shape                                                      # logits: [B, V]
    scaled = logits.float() / temperature.clamp_min(1e-5)[:, None]
    sorted_logits, order = scaled.sort(dim=-1, descending=True)              # [B, V]
    ranks = torch.arange(v, device=logits.device)
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, v))
    keep = ranks[None, :] < k[:, None]                                       # top-k
    probs = sorted_logits.softmax(dim=-1)
    keep &= (probs.cumsum(dim=-1) - probs) < top_p[:, None]                  # top-p (first kept)
    masked = torch.where(keep, sorted_logits, torch.full_like(sorted_logits, float("-inf")))
    # Gumbel-max: argmax(logits + Gumbel noise) is a draw from softmax(logits).
    noise = uniform_noise(seeds, positions, v).gather(1, order)              # noise by token id
    gumbel = -torch.log(-torch.log(noise))
    choice = (masked + gumbel).argmax(dim=-1, keepdim=True)                  # [B, 1] sorted rank
    sampled = order.gather(1, choice).squeeze(1)                             # [B]
    return torch.where(temperature == 0, logits.argmax(dim=-1), sampled)
