"""Intake: prompts and sampling parameters become checked requests (``Req``). What a caller can get
wrong is refused here, before a run starts, in one sentence that names the prompt and the limit."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig, SamplingParams
from engine.models.prompts import encode_chat, encode_text
from engine.scheduler.kv_cache import pages_needed
from engine.scheduler.request import Req

MAX_ARRIVAL_S = 86_400


@dataclass(frozen=True)
class Intake:
    """What checking a request needs to know about the engine."""

    config: EngineConfig
    tokenizer: Any                  # None: token ids only
    vocab_size: int
    eos_ids: tuple[int, ...]
    total_pages: int

    def requests(self, prompts: Any, params: Any, chat: bool = False) -> list[Req]:
        """One request per prompt (strings, token-id lists, or chats with ``chat``)."""
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, (list, tuple)):
            raise ValueError(f"prompts must be a list of strings or of token-id lists, got "
                             f"{type(prompts).__name__}")
        if not prompts:
            raise ValueError("prompts is empty: give at least one prompt")
        plist = (list(params) if isinstance(params, (list, tuple))
                 else [params or SamplingParams()] * len(prompts))
        if len(plist) != len(prompts):
            raise ValueError(f"got {len(plist)} SamplingParams for {len(prompts)} prompts")
        reqs = []
        for i, (prompt, sp) in enumerate(zip(prompts, plist)):
            if not isinstance(sp, SamplingParams):
                raise ValueError(f"params {i} is a {type(sp).__name__}, not SamplingParams")
            ids = self.encode_chat(prompt, i) if chat else self.encode(prompt, i)
            reqs.append(self.request(i, ids, sp))
        return reqs

    def request(self, rid: int, ids: list[int], sp: SamplingParams,
                what: str | None = None) -> Req:
        """A checked request for token ids ``ids`` (its seed, unless given, from the engine's)."""
        what = what or f"prompt {rid}"
        limit = self.config.max_seq_len
        if len(ids) + sp.max_new_tokens > limit:
            raise ValueError(f"{what} has {len(ids)} tokens; with max_new_tokens="
                             f"{sp.max_new_tokens} it exceeds max_seq_len={limit} (the context); "
                             "shorten it or raise max_seq_len")
        if pages_needed(len(ids) + sp.max_new_tokens, self.config.page_size) > self.total_pages:
            raise ValueError(f"{what} needs more KV pages than the whole cache holds")
        bad = [t for t in sp.stop_token_ids if t >= self.vocab_size]
        if bad:
            raise ValueError(f"{what}: stop_token_ids {bad[:5]} are outside the "
                             f"vocabulary (0..{self.vocab_size - 1})")
        stops = set(sp.stop_token_ids) | (set() if sp.ignore_eos else set(self.eos_ids))
        seed = sp.seed if sp.seed is not None else (self.config.seed * 1_000_003 + rid) % (2**31)
        return Req(rid=rid, prompt_ids=ids, params=sp, seed=seed, stop_ids=frozenset(stops))

    def encode_chat(self, prompt: Any, i: int) -> list[int]:
        """A user message (a string) or a list of messages, through the chat template."""
        if self.tokenizer is None:
            raise ValueError("chat needs a tokenizer with a chat template; this model has none")
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        try:
            ids = encode_chat(self.tokenizer, messages)
        except ValueError as error:
            raise ValueError(f"prompt {i}: {error}") from None
        return self.encode(ids, i)

    def encode(self, prompt: Any, i: int) -> list[int]:
        """A text prompt's token ids (special tokens included), or a token-id list checked."""
        if isinstance(prompt, str):
            if not prompt:
                raise ValueError(f"prompt {i} is empty")
            if self.tokenizer is None:
                raise ValueError("this model has no tokenizer: pass token-id lists")
            ids = encode_text(self.tokenizer, prompt)
            if not ids:
                raise ValueError(f"prompt {i} encodes to no tokens")
        elif isinstance(prompt, (list, tuple)):
            kinds = {type(t).__name__ for t in prompt if type(t) is not int   # plain ints: fast
                     and (not isinstance(t, numbers.Integral) or isinstance(t, bool))}
            if kinds:
                raise ValueError(f"prompt {i}: token ids must be integers, got "
                                 f"{', '.join(sorted(kinds))}")
            ids = [int(t) for t in prompt]
            if not ids:
                raise ValueError(f"prompt {i} is empty")
        else:
            raise ValueError(f"prompt {i} is a {type(prompt).__name__}: give a string or a list "
                             "of token ids")
        if ids and (min(ids) < 0 or max(ids) >= self.vocab_size):
            bad = [t for t in ids if not 0 <= t < self.vocab_size]
            raise ValueError(f"prompt {i} has token ids outside the vocabulary "
                             f"(0..{self.vocab_size - 1}): {bad[:5]}")
        return ids


def arrival_offsets_ns(arrivals: Sequence[float] | None, n: int) -> list[int]:
    """Each request's arrival, in ns after the run's start (all 0 without ``arrivals``)."""
    if arrivals is None:
        return [0] * n
    if isinstance(arrivals, (str, bytes)) or not hasattr(arrivals, "__len__") or len(arrivals) != n:
        got = len(arrivals) if hasattr(arrivals, "__len__") else repr(arrivals)
        raise ValueError(f"arrivals must give one time per prompt ({n}), got {got}")
    out = []
    for i, at in enumerate(arrivals):
        if isinstance(at, bool) or not isinstance(at, numbers.Real) or not 0 <= at <= MAX_ARRIVAL_S:
            raise ValueError(f"arrivals[{i}] must be a number of seconds in 0..{MAX_ARRIVAL_S}, "
                             f"got {at!r}")
        out.append(int(round(float(at) * 1e9)))
    return out
