"""Workloads: what a run's requests are, and their prompts, reproducible from a seed. ``Workload``
is the one description of a run's work (the page, the CLI, the benchmarks, a peer's run); it sizes
the engine and makes the prompts and sampling."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.config import NORMAL, EngineConfig, SamplingParams, _check, _is_int

MIN_SEQ_LEN = 64        # the least max_seq_len a workload asks for: a few pages, however small


def word_prompt_tokens(words: int) -> int:
    """Tokens to allow for a prompt of ``words`` words: about two a word, and a chat template."""
    return 2 * words + 64


@dataclass(frozen=True)
class Workload:
    """The requests of a run: each holds ``shared_prefix`` system-prompt tokens, its prompt and
    at most ``max_new_tokens`` new tokens. Prompts are ``texts``, ``prompt_ids`` or made up; a
    trace's ``arrivals`` may give each request its lengths; else ``request_rate`` spreads them by
    a Poisson process, else all at t=0."""

    prompt_tokens: int = 16         # a prompt given in words: the tokens allowed for it
    max_new_tokens: int = 64
    shared_prefix: int = 0          # tokens of one system prompt before every prompt
    margin: int = 0
    arrivals: Sequence[Any] = ()    # a trace's requests (or Poisson times), one per request
    prompt_words: int = 0           # prompts of this many words (0: of ``prompt_tokens`` tokens)
    requests: int = 16
    texts: tuple[str, ...] = ()     # the prompts as text (the page's); empty: made up
    prompt_ids: tuple[tuple[int, ...], ...] = ()    # ... or as token ids, taken as they are
    temperature: float = 0.0
    ignore_eos: bool = False
    stop_early: bool = False        # each request stops on a token a probe run emitted
    chat: bool = False              # each prompt a user message, through the chat template
    request_rate: float | None = None   # requests/s of Poisson arrivals (inf: all at t=0)
    seed: int = 0                   # made-up prompts and arrival times
    arrivals_file: str | None = None    # the trace ``arrivals`` was read from (its name)

    def __post_init__(self) -> None:
        for name in ("prompt_tokens", "max_new_tokens", "requests"):
            _check(_is_int(getattr(self, name)) and getattr(self, name) >= 1,
                   f"Workload.{name} must be a whole number >= 1, got {getattr(self, name)!r}")
        for name in ("shared_prefix", "margin", "prompt_words", "seed"):
            _check(_is_int(getattr(self, name)) and getattr(self, name) >= 0,
                   f"Workload.{name} must be a whole number >= 0, got {getattr(self, name)!r}")
        for given in ("texts", "prompt_ids", "arrivals"):
            count = len(getattr(self, given))
            _check(count in (0, self.requests), f"Workload.requests ({self.requests}) must be "
                   f"the number of {given} ({count})")
        _check(self.request_rate is None or self.request_rate > 0 and not
               math.isnan(self.request_rate),
               f"Workload.request_rate must be > 0 (or None), got {self.request_rate!r}")

    @classmethod
    def of_words(cls, words: int, max_new_tokens: int, shared_prefix: int = 0,
                 **given: Any) -> Workload:
        """Prompts of ``words`` words; ``texts`` given, as many requests as texts."""
        if given.get("texts") and "requests" not in given:
            given["requests"] = len(given["texts"])
        return cls(word_prompt_tokens(words), max_new_tokens, shared_prefix,
                   prompt_words=words, **given)

    def longest(self) -> int:
        lengths = [self.prompt_tokens + self.max_new_tokens]
        lengths += [(a.prompt_tokens or self.prompt_tokens)
                    + (a.output_tokens or self.max_new_tokens) for a in self.arrivals]
        return max(lengths) + self.shared_prefix

    def max_seq_len(self) -> int:
        return max(MIN_SEQ_LEN, self.longest() + self.margin)

    def engine_config(self, **fields: Any) -> EngineConfig:
        """An ``EngineConfig`` with ``fields``, its ``max_seq_len`` sized for this work."""
        return EngineConfig(max_seq_len=self.max_seq_len(), **fields)

    def sampling(self) -> SamplingParams | list[SamplingParams]:
        """How every request is sampled (a list where a trace gives each its output length)."""
        def params(new_tokens: int) -> SamplingParams:
            return SamplingParams(max_new_tokens=new_tokens, temperature=self.temperature,
                                  ignore_eos=self.ignore_eos)
        if any(a.output_tokens for a in self.arrivals):
            return [params(a.output_tokens or self.max_new_tokens) for a in self.arrivals]
        return params(self.max_new_tokens)

    def prompts(self, engine) -> list:
        """The prompts as ``engine`` takes them (text or token ids), after the system prompt."""
        tokenizer, vocab = engine.tokenizer, engine.spec.vocab_size
        if self.texts:
            own = token_prompts(engine, list(self.texts), self.prompt_words or self.prompt_tokens)
        elif self.prompt_ids:
            own = [list(ids) for ids in self.prompt_ids]
        elif any(a.prompt_tokens for a in self.arrivals):        # lengths from a trace
            own = [make_prompts(tokenizer, 1, a.prompt_tokens or self.prompt_tokens,
                                self.seed + i, vocab)[0] for i, a in enumerate(self.arrivals)]
        elif self.prompt_words:
            own = token_prompts(engine, word_prompts("", self.requests, self.prompt_words)[0],
                                self.prompt_words)
        else:
            own = make_prompts(tokenizer, self.requests, self.prompt_tokens, self.seed, vocab)
        return with_shared_prefix(own, self.shared_prefix, tokenizer, vocab)


SENTENCES = (
    "The license grants permission to use, copy and modify the software.",
    "This module provides functions for working with files and directories.",
    "The function returns a new list containing the results.",
    "When the request is finished, the scheduler frees its memory.",
    "A short example shows how the parser reads each line of the input.",
    "The server waits for a connection and then reads the first message.",
    "If the value is not found, the method raises an error.",
    "Each thread holds a lock while it updates the shared state.",
    "The documentation describes the options that the program accepts.",
    "You may distribute copies of the program under the terms of this license.",
    "The object stores its data in a dictionary of named fields.",
    "Use this class to format dates and times in a readable way.",
)


# The prompts the app offers by default (one per line, cycled over the requests).
DEFAULT_PROMPTS = (
    "Once upon a time, in a small village by the sea, there lived an old baker who\n"
    "The quick brown fox jumps over the lazy dog, and then the dog decides to\n"
    "Explain in simple words why a scheduler might read each new token one step late:\n"
    "Here is a short story about a robot that learned to keep its workshop busy:"
)


def word_prompts(text: str | None, count: int, words: int) -> tuple[list[str], bool]:
    """``count`` prompts of ``words`` words: the given lines cycled, repeated or cut to length;
    and whether ``text`` had no words (``DEFAULT_PROMPTS`` were used)."""
    lines = [line.split() for line in (text or "").splitlines() if line.strip()]
    used_default = not lines
    lines = lines or [line.split() for line in DEFAULT_PROMPTS.splitlines()]
    prompts = []
    for i in range(count):
        base = lines[i % len(lines)]
        prompts.append(" ".join((base * (words // len(base) + 1))[:words]))
    return prompts, used_default


def make_prompts(tokenizer, n: int, prompt_len: int, seed: int = 0,
                 vocab_size: int | None = None) -> list[list[int]]:
    """``n`` token-id prompts of exactly ``prompt_len`` tokens each."""
    if n < 1 or prompt_len < 1:
        raise ValueError("need at least one prompt of at least one token")
    rng = random.Random(seed)
    if tokenizer is None:
        hi = vocab_size or 1000
        return [[rng.randrange(1, hi) for _ in range(prompt_len)] for _ in range(n)]
    return [_sentence_ids(tokenizer, i + rng.randrange(len(SENTENCES)), prompt_len)
            for i in range(n)]


def _sentence_ids(tokenizer, first: int, tokens: int) -> list[int]:
    """``tokens`` ids of English sentences, from the ``first``-th on."""
    ids: list[int] = []
    k = first
    while len(ids) < tokens:
        ids += tokenizer.encode(SENTENCES[k % len(SENTENCES)] + " ", add_special_tokens=False)
        k += 1
    return ids[:tokens]


def system_prompt_ids(tokenizer, tokens: int, vocab_size: int | None = None) -> list[int]:
    """A system prompt of exactly ``tokens`` token ids, the same at every call."""
    if tokenizer is None:
        rng = random.Random(12345)
        return [rng.randrange(1, vocab_size or 1000) for _ in range(tokens)]
    return _sentence_ids(tokenizer, 0, tokens)


def with_shared_prefix(prompts: list, tokens: int, tokenizer, vocab_size: int | None = None):
    """``prompts`` (text or token ids) each after one shared system prompt of ``tokens`` tokens."""
    if tokens <= 0:
        return list(prompts)
    if prompts and isinstance(prompts[0], str):          # as text, ending in a line break
        system = tokenizer.decode(system_prompt_ids(tokenizer, tokens)).strip() + "\n"
        return [system + p for p in prompts]
    system = system_prompt_ids(tokenizer, tokens, vocab_size)
    return [system + list(p) for p in prompts]


def stop_params_from_probe(engine, prompts, max_new_tokens: int, lo: int, hi: int, seed: int = 0,
                           temperature: float = 0.0, chat: bool = False):
    """Per-request ``SamplingParams`` whose stop token really fires (the token a probe run emitted
    at a random position in ``[lo, hi)``), so requests finish at varied steps; and the probe."""
    probe = engine.generate(prompts, SamplingParams(max_new_tokens=max_new_tokens, ignore_eos=True,
                                                    temperature=temperature), NORMAL, chat=chat)
    rng = random.Random(seed)
    params = []
    for out in probe.outputs:
        ids = out.token_ids
        stop = ids[rng.randrange(min(lo, len(ids) - 1), max(min(hi, len(ids)), 1))]
        params.append(SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature,
                                     ignore_eos=True, stop_token_ids=(stop,)))
    return params, probe


def token_prompts(engine, prompts: list[str], tokens: int) -> list:
    """Text prompts as they are; a model without a tokenizer gets ``tokens`` fixed ids each."""
    if engine.tokenizer is not None:
        return prompts
    vocab = engine.spec.vocab_size
    return [[(i * 7919 + j * 104729) % max(vocab - 16, 1) + min(8, vocab - 1) for j in range(tokens)]
            for i in range(len(prompts))]
