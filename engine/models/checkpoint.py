"""Writing our modules back out as a Hugging Face checkpoint (config.json + model.safetensors), so
transformers and our engine can load the *same* random weights of a preset."""

from __future__ import annotations

import json
from pathlib import Path

from engine.models.model import CausalLM, ModelSpec, split_to_hf_state_dict


def hf_config(spec: ModelSpec) -> dict:
    cfg = {
        "architectures": [spec.architecture],
        "model_type": {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                       "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}[spec.architecture],
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers, "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads, "head_dim": spec.head_dim,
        "intermediate_size": spec.intermediate_size, "rms_norm_eps": spec.rms_norm_eps,
        "rope_theta": spec.rope_theta, "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings, "hidden_act": "silu",
        "attention_bias": spec.qkv_bias and spec.architecture == "LlamaForCausalLM",
        "mlp_bias": spec.mlp_bias,
    }
    if spec.rope_scaling:
        cfg["rope_scaling"] = spec.rope_scaling
    return cfg


def save_hf_checkpoint(model: CausalLM, out: str | Path) -> Path:
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    hf_state = split_to_hf_state_dict(model.state_dict(), model.spec)   # HF's separate q/k/v, gate/up
    state = {k: v.detach().contiguous().cpu() for k, v in hf_state.items()}
    if model.spec.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(hf_config(model.spec), indent=2))
    return out
