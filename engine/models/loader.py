"""Finding a model and loading it into our modules: ``"bundled"`` (``assets/bundled``), a *preset*
(a public model's shapes with random weights, for timing only), a local Hugging Face directory,
or a hub id fetched through ``engine.models.hub``'s guards."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.models.hub import HubError, HubUnreachable, Progress, fetch_hub_model, is_hub_id
from engine.models.model import CausalLM, ModelSpec, fuse_hf_state_dict, rope_inv_freq

REPO_ROOT = Path(__file__).resolve().parents[2]          # engine/models/loader.py -> the repo
BUNDLED_DIR = REPO_ROOT / "assets" / "bundled"
SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}


class ModelLoadError(ValueError):
    """A model could not be found or is not supported; the message says which and why.
    ``offline``: it would come from the hub, which cannot be reached from here."""

    def __init__(self, message: str, offline: bool = False) -> None:
        super().__init__(message)
        self.offline = offline


def _preset(arch: str, sizes: tuple[int, int, int, int, int, int], theta: float, tie: bool,
            qkv_bias: bool, max_pos: int) -> ModelSpec:
    """``sizes``: vocabulary, hidden size, layers, heads, KV heads, MLP size."""
    vocab, hidden, layers, heads, kv, inter = sizes
    return ModelSpec(architecture=arch, vocab_size=vocab, hidden_size=hidden, num_layers=layers,
                     num_heads=heads, num_kv_heads=kv, head_dim=hidden // heads,
                     intermediate_size=inter, rms_norm_eps=1e-6 if qkv_bias else 1e-5,
                     rope_theta=theta, rope_scaling=None, max_position_embeddings=max_pos,
                     tie_word_embeddings=tie, qkv_bias=qkv_bias)


# Exact shapes of public models (their config.json), initialised randomly: for timing only.
PRESETS: dict[str, ModelSpec] = {
    "smollm2-135m-shape": _preset("LlamaForCausalLM", (49152, 576, 30, 9, 3, 1536), 100000.0,
                                  True, False, 8192),
    "qwen2.5-0.5b-shape": _preset("Qwen2ForCausalLM", (151936, 896, 24, 14, 2, 4864), 1000000.0,
                                  True, True, 32768),
    "qwen2.5-1.5b-shape": _preset("Qwen2ForCausalLM", (151936, 1536, 28, 12, 2, 8960),
                                  1000000.0, True, True, 32768),
    # A GPU-sized model, where a prefill of a few hundred tokens is compute, not launches;
    # without Llama 3.1's long-context RoPE scaling.
    "llama-3.1-8b-shape": _preset("LlamaForCausalLM", (128256, 4096, 32, 32, 8, 14336),
                                  500000.0, False, False, 131072),
}


@dataclass
class LoadedModel:
    model: CausalLM
    spec: ModelSpec
    path: str | None            # checkpoint directory (None for presets)
    eos_token_ids: tuple[int, ...]


def read_config(path: Path) -> dict:
    """``config.json`` of a checkpoint directory, or ``ModelLoadError`` naming the file and why."""
    where = path / "config.json"
    try:
        cfg = json.loads(where.read_text())
    except OSError as error:
        raise ModelLoadError(f"{where}: cannot be read ({error.strerror or error})") from None
    except ValueError as error:
        raise ModelLoadError(f"{where}: not valid JSON ({error})") from None
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
    return cfg


_INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size")


def _whole(cfg: dict, key: str, where: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise ModelLoadError(f"{where}: missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelLoadError(f"{where}: {key!r} must be a positive integer, got {value!r}")
    return value


def _real(cfg: dict, key: str, where: str, default: float) -> float:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ModelLoadError(f"{where}: {key!r} must be a positive number, got {value!r}")
    return float(value)


def spec_from_hf_config(cfg: dict, where: str = "config.json") -> ModelSpec:
    """Read a Hugging Face config dict; refuse what our modules cannot run, naming the reason."""
    if cfg.get("auto_map"):
        raise ModelLoadError(f"{where}: this checkpoint needs trust_remote_code (custom code in "
                             "auto_map); only built-in Llama/Qwen2/Qwen3 architectures are supported")
    archs = cfg.get("architectures") or []
    arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
    if arch is None:
        raise ModelLoadError(f"{where}: unsupported architecture {archs or cfg.get('model_type')!r}; "
                             f"supported: {sorted(SUPPORTED_ARCHITECTURES)}")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ModelLoadError(f"{where}: unsupported activation {cfg.get('hidden_act')!r} (silu only)")
    family = SUPPORTED_ARCHITECTURES[arch]
    ints = {key: _whole(cfg, key, where) for key in _INT_KEYS}
    heads = ints["num_attention_heads"]
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise ModelLoadError(f"{where}: 'rope_scaling' must be an object, got {rope!r}")
    rope = dict(rope)
    theta = _real({"rope_theta": rope.get("rope_theta", cfg.get("rope_theta", 10000.0))},
                  "rope_theta", where, 10000.0)
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind not in ("default", "llama3", "linear"):
        raise ModelLoadError(f"{where}: unsupported rope scaling {kind!r}")
    kv_heads = _whole(cfg, "num_key_value_heads", where, heads)
    head_dim = _whole(cfg, "head_dim", where, ints["hidden_size"] // heads or 1)
    if heads % kv_heads:
        raise ModelLoadError(f"{where}: {heads} attention heads are not a multiple of "
                             f"{kv_heads} key/value heads")
    return ModelSpec(
        architecture=arch,
        vocab_size=ints["vocab_size"],
        hidden_size=ints["hidden_size"],
        num_layers=ints["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=ints["intermediate_size"],
        rms_norm_eps=_real(cfg, "rms_norm_eps", where, 1e-6),
        rope_theta=theta,
        rope_scaling=rope if kind != "default" else None,
        max_position_embeddings=_whole(cfg, "max_position_embeddings", where, 4096),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=family == "qwen2" or bool(cfg.get("attention_bias", False)),
        o_bias=family == "llama" and bool(cfg.get("attention_bias", False)),
        mlp_bias=bool(cfg.get("mlp_bias", False)),
        qk_norm=family == "qwen3",
    )


def resolve_model_dir(name: str, progress: Progress | None = None) -> Path:
    """Map "bundled", a local directory or a hub id to a checkpoint directory (a hub id is
    fetched, or found in the cache, through ``engine.models.hub``; ``progress`` hears how it goes)."""
    if name == "bundled":
        if not (BUNDLED_DIR / "config.json").exists():
            raise ModelLoadError(f"the bundled model is missing at {BUNDLED_DIR}; run "
                                 "scripts/train_bundled.py or restore assets/ from git")
        return BUNDLED_DIR
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelLoadError(f"{path} is a directory but has no config.json")
        return path
    if not is_hub_id(name):           # "org/name" ("Qwen/Qwen2.5-0.5B" has dots; a file has none)
        raise ModelLoadError(f"unknown model {name!r}: not 'bundled', not a preset "
                             f"({', '.join(PRESETS)}), and not a local directory")
    try:  # a hub id: from the local cache, or downloaded where the network allows it
        return fetch_hub_model(name, progress)
    except HubError as err:
        raise ModelLoadError(f"model {name!r} is not a local directory, and from the hub: "
                             f"{err}", offline=isinstance(err, HubUnreachable)) from None


def _read_state_dict(path: Path, device: torch.device | str) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors, read straight onto ``device`` (no host copy on the way to a
    GPU)."""
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    bins = [] if files else sorted(path.glob("pytorch_model*.bin"))   # only without safetensors
    if not files and not bins:
        raise ModelLoadError(f"{path}: no model.safetensors (or pytorch_model.bin) weights found")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f), device=str(device)))
    for f in bins:
        state.update(torch.load(f, map_location=device, weights_only=True))
    return state


def eos_token_ids(path: Path, cfg: dict) -> tuple[int, ...]:
    ids = cfg.get("eos_token_id")
    gen = path / "generation_config.json"
    if gen.exists():
        try:
            ids = json.loads(gen.read_text()).get("eos_token_id", ids)
        except (OSError, ValueError, AttributeError) as error:
            raise ModelLoadError(f"{gen}: not a readable JSON object ({error})") from None
    if ids is None:
        return ()
    return tuple(ids) if isinstance(ids, list) else (int(ids),)


def describe_model(name: str, progress: Progress | None = None
                   ) -> tuple[ModelSpec, str | None, tuple[int, ...]]:
    """(spec, checkpoint dir, eos ids) without loading weights: fails fast on a bad name."""
    if name in PRESETS:
        return PRESETS[name], None, ()
    path = resolve_model_dir(name, progress)
    cfg = read_config(path)
    return spec_from_hf_config(cfg, where=str(path / "config.json")), str(path), eos_token_ids(path, cfg)


def load_model(name: str, device: torch.device | str, dtype: torch.dtype, seed: int = 0,
               progress: Progress | None = None) -> LoadedModel:
    """Build our modules for ``name`` on ``device`` in ``dtype``, with weights loaded (or random)."""
    if name in PRESETS:
        spec = PRESETS[name]
        torch.manual_seed(seed)
        with torch.device(device):
            model = CausalLM(spec).to(dtype)
        model.inv_freq = rope_inv_freq(spec, device)
        _init_random(model)
        return LoadedModel(model.eval(), spec, None, ())
    path = resolve_model_dir(name, progress)
    cfg = read_config(path)
    spec = spec_from_hf_config(cfg, where=str(path / "config.json"))
    # Our modules are built on the meta device (shapes, no memory) and take the checkpoint's
    # tensors as their own (assign=True): the weights exist once, where they will run.
    with torch.device("meta"):
        model = CausalLM(spec)
    state = fuse_hf_state_dict(_read_state_dict(path, device))   # q/k/v -> qkv, gate/up -> one
    if spec.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    except RuntimeError as error:                     # a tensor of the wrong shape
        first = str(error).split("\n\t")[1:2] or [str(error)[:300]]
        raise ModelLoadError(f"{path}: weights do not match {path / 'config.json'}: "
                             f"{first[0].strip()}") from None
    missing = [m for m in missing if not (spec.tie_word_embeddings and m == "lm_head.weight")]
    if missing or unexpected:
        raise ModelLoadError(f"{path}: weights do not match a {spec.architecture}: missing "
                             f"{missing[:5]}, unexpected {unexpected[:5]}")
    if spec.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model = model.to(dtype)
    model.inv_freq = rope_inv_freq(spec, device)  # float32 even in bf16: cast per forward
    return LoadedModel(model.eval(), spec, str(path), eos_token_ids(path, cfg))


@torch.no_grad()
def _init_random(model: CausalLM) -> None:
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.fill_(1.0)
        elif name.endswith("bias"):
            p.zero_()
        else:
            p.normal_(0.0, 0.02)


def load_tokenizer(path: str | None, preset: bool = False):
    """The checkpoint's own tokenizer; a preset's is the bundled one. A checkpoint without one
    gets none (token ids only): another model's would turn its text into the wrong ids."""
    from transformers import AutoTokenizer

    where = str(BUNDLED_DIR) if preset else path
    if not where or not _has_tokenizer(Path(where)):
        return None
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return AutoTokenizer.from_pretrained(where)


def _has_tokenizer(path: Path) -> bool:
    return (path / "tokenizer.json").exists() or (path / "tokenizer_config.json").exists()
