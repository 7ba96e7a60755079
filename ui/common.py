"""What every handler shares: control limits, the engine cache, the one-run-at-a-time locks.

The engine is imported lazily (torch is slow to import), built once per configuration and kept,
and used by one run at a time per device: run events share ``concurrency_id="engine"`` with
``concurrency_limit=1``, and each run also holds its device's lock, so the start-up warm-up, a live
run and a hazard-lab run never share a device.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import viz

ROOT = Path(__file__).resolve().parent.parent
MODELS = [  # (value, display name, real weights?)
    ("bundled", "bundled", True),
    ("smollm2-135m-shape", "SmolLM2-135M shape", False),
    ("qwen2.5-0.5b-shape", "Qwen2.5-0.5B shape", False),
    ("qwen2.5-1.5b-shape", "Qwen2.5-1.5B shape", False),
]
LOOPS = ("normal", "overlap", "multistep")
DEVICES = [("auto", "auto"), ("CPU", "cpu"), ("CUDA", "cuda")]
DEFAULT_PROMPTS = (
    "Once upon a time, in a small village by the sea, there lived an old baker who\n"
    "The quick brown fox jumps over the lazy dog, and then the dog decides to\n"
    "Explain in simple words why a scheduler might read each new token one step late:\n"
    "Here is a short story about a robot that learned to keep its workshop busy:"
)
DEFAULTS = {"requests": 16, "batch": 16, "prompt_len": 24, "max_new": 48, "temperature": 0.0,
            "extra_cpu": 4000, "k": 4}
LIMITS = {  # control: (min, max); checked again here because a typed number can be anything
    "requests": (1, 64), "batch": (1, 64), "prompt_len": (1, 256), "max_new": (1, 256),
    "temperature": (0.0, 2.0), "extra_cpu": (0, 20000), "k": (2, 8),
}

ENGINES: dict[str, tuple[tuple, Any]] = {}          # device -> (config key, Engine)
DEVICE_LOCKS = {"cpu": threading.Lock(), "cuda": threading.Lock()}


def validate(**values: Any) -> dict[str, Any]:
    """Numbers within LIMITS (as ints where they count things), or ValueError for a person."""
    checked = {}
    for name, value in values.items():
        low, high = LIMITS[name]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise ValueError(f"{name.replace('_', ' ')} is empty: enter a number in {low}..{high}")
        if not low <= value <= high:
            raise ValueError(f"{name.replace('_', ' ')} must be in {low}..{high}, got {value}")
        checked[name] = float(value) if isinstance(low, float) else int(value)
    return checked


def make_prompts(text: str, count: int, words: int) -> list[str]:
    """``count`` prompts of ``words`` words: the given lines, cycled, repeated or cut to length."""
    lines = [line.split() for line in (text or "").splitlines() if line.strip()]
    lines = lines or [line.split() for line in DEFAULT_PROMPTS.splitlines()]
    prompts = []
    for i in range(count):
        base = lines[i % len(lines)]
        prompts.append(" ".join((base * (words // len(base) + 1))[:words]))
    return prompts


def token_prompts(engine: Any, prompts: list[str], words: int) -> list[Any]:
    """Models without a tokenizer (random-weight presets) take token ids: ``words`` per prompt."""
    if getattr(engine, "tokenizer", True) is not None:
        return prompts
    vocab = engine.spec.vocab_size
    return [[(i * 7919 + j * 104729) % (vocab - 16) + 8 for j in range(words)]
            for i in range(len(prompts))]


def engine_kwargs(model: str, device: str, values: dict[str, Any], cuda_graph: bool) -> dict:
    return {"model": model, "device": device, "max_batch_size": values["batch"],
            "cuda_graph": bool(cuda_graph) and device == "cuda",
            "extra_cpu_us": values["extra_cpu"], "seed": 0,
            "max_seq_len": 2 * values["prompt_len"] + values["max_new"] + 64}


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch  # lazy: slow to import, and only needed once someone presses Run

    return "cuda" if torch.cuda.is_available() else "cpu"


def engine_for(config_kwargs: dict[str, Any], cache: dict[str, tuple[tuple, Any]] | None = None
               ) -> Any:
    """The cached engine for this configuration; a different one on the device replaces it."""
    from engine import Engine, EngineConfig

    cache = ENGINES if cache is None else cache
    config = EngineConfig(**config_kwargs)
    key = tuple(sorted(config_kwargs.items()))
    cached = cache.get(config.device)
    if cached and cached[0] == key:
        return cached[1]
    if cached:
        cache.pop(config.device)
        cached[1].close()
    engine = Engine(config)
    cache[config.device] = (key, engine)
    return engine


def device_lock(device: str) -> threading.Lock:
    return DEVICE_LOCKS.setdefault(device, threading.Lock())


def status(text: str, kind: str = "info") -> str:
    return f'<div class="status status-{kind}">{text}</div>'


def progress_bar(fraction: float, text: str) -> str:
    percent = max(0.0, min(100.0, 100.0 * fraction))
    return (status(text, "running") + f'<div class="bar"><div style="width:{percent:.0f}%">'
            "</div></div>")


def lang_of(choice: str) -> str:
    return "zh" if choice == viz.LANGUAGES["zh"] else "en"


def model_choices(lang: str) -> list[tuple[str, str]]:
    return [(f"{name}: {viz.t(lang, 'model_real' if real else 'model_random')}", value)
            for value, name, real in MODELS]


def loop_choices(lang: str) -> list[tuple[str, str]]:
    return [(viz.t(lang, f"loop_{loop}"), loop) for loop in LOOPS]


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
