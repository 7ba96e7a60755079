"""The work every engine runs in the peer benchmark (``benchmark.py``): a model preset's shape,
batch sizes, prompt and output lengths; the token-id prompts, the folder a peer loads the shape
from, and the configurations of each peer tried on it (each peer's ``config.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from studies.peers.config import MINISGL, PeerConfig
from studies.peers.minisglang.config import configs as minisglang_configs
from studies.peers.sglang.config import configs as sglang_configs

if TYPE_CHECKING:
    from engine.workloads import Workload


@dataclass(frozen=True)
class PeerWork:
    """What every engine runs."""

    models: tuple[str, ...] = ("qwen2.5-0.5b-shape",)
    batches: tuple[int, ...] = (1, 64)
    prompt_len: int = 32
    new_tokens: int = 128
    repeats: int = 10
    seed: int = 0
    record_batch: int = 16          # every engine's recorded runs, first shape (0: none)
    record_tokens: int = 64
    record_repeats: int = 5
    sglang_compile: bool = False    # also SGLang with torch.compile (minutes of autotuning)
    only: tuple[str, ...] = ()      # run only the configurations whose name holds one of these
    minisgl_pages_256: bool = False  # also Mini-SGLang with its offline benchmark's pages of 256
    warm: bool = True               # start each peer once per shape first (compiles kernels)
    warm_also: tuple[str, ...] = () # shapes only warmed (kernels cached for a later call)

    @property
    def max_seq_len(self) -> int:
        return self.prompt_len + max(self.new_tokens, self.record_tokens) + 16

    def workload(self, model: str, batch: int, new_tokens: int | None = None) -> Workload:
        """Our engine's ``Workload`` for ``batch`` requests of ``model``'s shape: the peers'
        token-id prompts, taken as they are, greedy, no stop before ``new_tokens``."""
        from engine.workloads import Workload
        return Workload(self.prompt_len, new_tokens or self.new_tokens, requests=batch,
                        seed=self.seed, ignore_eos=True,
                        prompt_ids=tuple(map(tuple, prompts_for(self, model, batch))))


def check_work(work: PeerWork) -> None:
    """Refuse what no engine can run, in words."""
    from engine.models.loader import PRESETS
    for model in work.models + work.warm_also:
        if model not in PRESETS:
            raise ValueError(f"the peers run a model preset's shape with random weights; "
                             f"{model!r} is not one of {', '.join(PRESETS)}")
    if not work.batches or min(work.batches) < 1 or max(work.batches) > 256:
        raise ValueError(f"--batches must be between 1 and 256, got {list(work.batches)}")
    if work.repeats < 1 or work.prompt_len < 1 or work.new_tokens < 2:
        raise ValueError("--repeats and --prompt-len must be at least 1, --new-tokens at least 2")
    if not 0 <= work.record_batch <= 256:
        raise ValueError(f"--record-batch must be between 0 and 256, got {work.record_batch}")


def graph_sizes(batches: tuple[int, ...]) -> list[int]:
    """Mini-SGLang's CUDA-graph batch sizes: powers of two up to the largest batch, and each."""
    return sorted(set(batches) | {1 << i for i in range(max(batches).bit_length())})


def write_model_dir(model: str, out: Path) -> Path:
    """A Hugging Face model folder for a peer: the preset's ``config.json`` and a WordLevel
    tokenizer of its vocabulary's size (Mini-SGLang always loads one; the prompts are ids)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from engine.models.checkpoint import hf_config
    from engine.models.loader import PRESETS
    spec = PRESETS[model]
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({**hf_config(spec), "torch_dtype": "bfloat16"}))
    vocab = {f"t{i}": i for i in range(spec.vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)   # ids back, spaced
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0",
        "model_max_length": spec.max_position_embeddings,
        # Mini-SGLang looks a chat template up on the hub when the folder has none.
        "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}))
    return out


def prompts_for(work: PeerWork, model: str, batch: int) -> list[list[int]]:
    """The token-id prompts every engine gets for ``batch`` requests of ``model``'s shape."""
    from engine.models.loader import PRESETS
    from engine.workloads import make_prompts
    return make_prompts(None, batch, work.prompt_len, work.seed, PRESETS[model].vocab_size)


def configs_of(peer: str, work: PeerWork, model: str) -> list[PeerConfig]:
    """The configurations of ``peer`` tried on ``model``'s shape."""
    found = (minisglang_configs(max(work.batches + (work.record_batch,)), work.max_seq_len,
                                work.minisgl_pages_256)
             if peer == MINISGL else sglang_configs(work.batches, work.sglang_compile))
    return [c for c in found if (not c.models or model in c.models)
            and (not work.only or any(part in c.name for part in work.only))]
