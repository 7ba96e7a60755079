"""Shared fixtures: tiny random checkpoints in Hugging Face format, made with ``save_pretrained``.

No hub access: every test model is built here from a transformers config with random weights.
``initializer_range`` is large so the logits are decisive (greedy ties are vanishingly rare), which
keeps token-for-token comparisons meaningful rather than flaky.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VOCAB = 320
EOS = 3


def _config(arch: str):
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=128, max_position_embeddings=512,
                  eos_token_id=EOS, bos_token_id=1, pad_token_id=0, initializer_range=0.25,
                  tie_word_embeddings=False)
    if arch == "llama":
        return tf.LlamaConfig(**common), tf.LlamaForCausalLM
    if arch == "qwen2":
        return tf.Qwen2Config(**common), tf.Qwen2ForCausalLM
    if arch == "qwen3":
        return tf.Qwen3Config(**{**common, "head_dim": 32}), tf.Qwen3ForCausalLM
    raise ValueError(arch)


@pytest.fixture(scope="session")
def make_checkpoint(tmp_path_factory):
    """``make_checkpoint("llama")`` -> path of a saved random checkpoint (cached per arch)."""
    import torch

    made: dict[str, Path] = {}

    def make(arch: str) -> Path:
        if arch not in made:
            cfg, cls = _config(arch)
            torch.manual_seed(1234)
            model = cls(cfg)
            if arch == "qwen2":   # give the q/k/v biases real values so they are tested
                with torch.no_grad():
                    for name, p in model.named_parameters():
                        if name.endswith("bias"):
                            p.normal_(0, 0.2)
            path = tmp_path_factory.mktemp(f"ckpt_{arch}")
            model.save_pretrained(path)
            made[arch] = path
        return made[arch]

    return make


def cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


requires_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
