"""The bundled model through both stacks: our engine's greedy text equals transformers' generate."""

from __future__ import annotations

import torch

from engine import Engine, EngineConfig, SamplingParams
from engine.loader import BUNDLED_DIR

PROMPTS = ["The license grants", "This module provides", "If the file does not exist,"]


def test_bundled_greedy_matches_transformers():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(BUNDLED_DIR)
    hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, dtype=torch.float32).eval()
    ids = [tok.encode(p, add_special_tokens=False) for p in PROMPTS]
    with Engine(EngineConfig(model="bundled", device="cpu", dtype="float32")) as eng:
        res = eng.generate(ids, SamplingParams(max_new_tokens=24, ignore_eos=True))
        text = eng.generate(PROMPTS, SamplingParams(max_new_tokens=8, ignore_eos=True))
    for p, o in zip(ids, res.outputs):
        ref = hf.generate(torch.tensor([p]), max_new_tokens=24, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[0, len(p):].tolist()
        assert o.token_ids == ref
    assert all(len(o.text.split()) >= 2 for o in text.outputs), "continuations should be words"
