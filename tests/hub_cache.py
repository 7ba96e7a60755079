"""Lay out a local Hugging Face hub cache, as ``snapshot_download`` leaves it, without a network.

``models--{org}--{name}/blobs/<sha256>`` holds each file once; ``snapshots/<commit>/<path>`` links
to its blob; ``refs/main`` names the commit. With ``HF_HUB_CACHE`` pointing here and
``HF_HUB_OFFLINE=1``, ``huggingface_hub.snapshot_download`` returns the snapshot: the same code
path as a model downloaded earlier on a machine with a network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def add_to_cache(cache: Path, repo_id: str, files: dict[str, Path | bytes],
                 commit: str = "0123456789abcdef0123456789abcdef01234567") -> Path:
    """Put ``files`` (repo path -> source file or bytes) in ``cache`` as ``repo_id``'s main."""
    org, name = repo_id.split("/")
    repo = cache / f"models--{org}--{name}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for rel, source in files.items():
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        if not blob.exists():
            blob.write_bytes(data)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.exists() or link.is_symlink():
            link.unlink()
        os.symlink(os.path.relpath(blob, link.parent), link)
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def checkpoint_files(folder: Path) -> dict[str, Path]:
    return {p.name: p for p in folder.iterdir() if p.is_file()}


def copy_tokenizer(source: Path, dest: Path, chat_template: str | None = None) -> None:
    import json

    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, dest / name)
    if chat_template:
        config = json.loads((dest / "tokenizer_config.json").read_text())
        config["chat_template"] = chat_template
        (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=1))


CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def save_tiny_llama(model_dir: Path, tokenizer_from: Path, chat_template: str = CHAT_TEMPLATE,
                    seed: int = 0) -> dict[str, Path]:
    """A tiny random Llama saved by transformers, with ``tokenizer_from``'s tokenizer and a chat
    template: the files of a hub repository (repo path -> file)."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(vocab_size=8192, hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                         max_position_embeddings=256, bos_token_id=0, eos_token_id=0,
                         pad_token_id=0, initializer_range=0.2, tie_word_embeddings=False)
    tf.LlamaForCausalLM(cfg).save_pretrained(model_dir)
    copy_tokenizer(tokenizer_from, model_dir, chat_template)
    return checkpoint_files(model_dir)
