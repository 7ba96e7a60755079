"""The bundled model is a valid Hugging Face Llama checkpoint that fits in the repository.

Specification for ``assets/bundled`` (trained by ``scripts/train_bundled.py``): transformers loads
the weights and the tokenizer with no network; the tokenizer round-trips text and starts every
encoding with ``<|endoftext|>``; the config is a Llama with grouped-query attention; the whole
directory stays within the 25 MB budget. Comparing our engine with transformers lives elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

BUNDLE = Path(__file__).resolve().parent.parent / "assets" / "bundled"
MAX_BUNDLE_BYTES = 25_000_000  # the 25 MB budget, in decimal megabytes to be strict

pytestmark = pytest.mark.skipif(not (BUNDLE / "config.json").exists(),
                                reason="assets/bundled has not been trained yet")


@pytest.fixture(scope="module")
def tokenizer():
    return transformers.AutoTokenizer.from_pretrained(BUNDLE)


@pytest.fixture(scope="module")
def model():
    return transformers.AutoModelForCausalLM.from_pretrained(BUNDLE, dtype=torch.float32).eval()


def test_bundle_has_the_hugging_face_files() -> None:
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                 "tokenizer_config.json", "README.md"):
        assert (BUNDLE / name).is_file(), name


def test_bundle_fits_the_size_budget() -> None:
    total = sum(path.stat().st_size for path in BUNDLE.rglob("*") if path.is_file())
    assert total <= MAX_BUNDLE_BYTES, f"{total / 1e6:.1f} MB"


def test_config_is_llama_with_grouped_query_attention() -> None:
    config = json.loads((BUNDLE / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_key_value_heads"] < config["num_attention_heads"]
    assert config["num_attention_heads"] % config["num_key_value_heads"] == 0
    assert config["hidden_act"] == "silu"


def test_tokenizer_round_trips_text(tokenizer) -> None:
    for text in ("The license grants you the right to copy it.",
                 "def f(x):\n\treturn x ** 2  # code, too\n",
                 "Unicode survives: naïve café, 東京, emoji 🙂."):
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text


def test_tokenizer_prepends_end_of_text_as_bos(tokenizer) -> None:
    assert tokenizer.bos_token == tokenizer.eos_token == tokenizer.pad_token == "<|endoftext|>"
    ids = tokenizer("This module provides").input_ids
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == "This module provides"


def test_model_matches_config_and_tokenizer(model, tokenizer) -> None:
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.eos_token_id == tokenizer.eos_token_id


@torch.no_grad()
def test_model_predicts_better_than_chance(model, tokenizer) -> None:
    """On plain English it beats a uniform guess over the vocabulary by a wide margin."""
    text = ("This program is free software; you can redistribute it and/or modify it under the "
            "terms of the GNU General Public License as published by the Free Software Foundation.")
    ids = tokenizer(text, return_tensors="pt").input_ids
    loss = model(input_ids=ids, labels=ids).loss.item()
    assert loss < 0.6 * torch.log(torch.tensor(float(len(tokenizer)))).item()


@torch.no_grad()
def test_greedy_generation_is_deterministic_text(model, tokenizer) -> None:
    ids = tokenizer("The function returns", return_tensors="pt").input_ids
    first = model.generate(ids, max_new_tokens=12, do_sample=False)
    second = model.generate(ids, max_new_tokens=12, do_sample=False)
    assert torch.equal(first, second)
    assert first.shape[1] > ids.shape[1]
    assert tokenizer.decode(first[0, ids.shape[1]:], skip_special_tokens=True).strip()
