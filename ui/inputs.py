"""What the page's controls offer and accept: their choices, defaults and limits, and the checks
on what a visitor types.

A typed number can be anything (empty, 2.5 where a count is asked, 10**400, a string): every
value is checked here against ``LIMITS`` and refused with ``InputError``, which names the control
and the limit in the reader's language. Nothing is rounded or clamped.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import texts
from engine.models.hub import SUGGESTED_MODELS, cached_snapshot, is_hub_id
from record.schema import ENGINE_LOOPS
from ui.status import Said, said

MODELS = [  # (value, display name, real weights?)
    ("bundled", "bundled", True),
    ("smollm2-135m-shape", "SmolLM2-135M shape", False),
    ("qwen2.5-0.5b-shape", "Qwen2.5-0.5B shape", False),
    ("qwen2.5-1.5b-shape", "Qwen2.5-1.5B shape", False),
]
DEFAULTS = {"requests": 16, "batch": 16, "prompt_len": 24, "max_new": 96, "temperature": 0.0,
            "extra_cpu_us": 4000, "decode_steps": 4, "request_rate": 0.0, "shared_prefix": 0,
            "kv_pages": 0}
LIMITS = {  # control: (min, max, whole number?); checked here, since a typed number can be anything
    "requests": (1, 64, True), "batch": (1, 64, True), "prompt_len": (1, 256, True),
    "max_new": (1, 256, True), "temperature": (0.0, 2.0, False),
    "extra_cpu_us": (0, 100000, True), "decode_steps": (2, 8, True),
    "request_rate": (0.0, 1000.0, False),     # requests/s; 0: all arrive at the start
    "shared_prefix": (0, 1024, True),         # tokens of one system prompt before every prompt
    "kv_pages": (0, 65536, True),             # 0: pages for every request at full length
}


class InputError(ValueError):
    """A control holds a value the run cannot take; ``said()`` says which and why."""

    def __init__(self, key: str, **values: Any) -> None:
        super().__init__(key)
        self.key, self.values = key, values

    def said(self) -> Said:
        return said(self.key, "error", **self.values)


def is_empty(value: object) -> bool:
    """An emptied number box, as Gradio sends it: None or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_whole(value: object) -> TypeGuard[int | float]:
    """A whole number, as a number box may send one: an int (not a bool) or a finite float with
    nothing after the point (2.0). Never raises, whatever comes (10**400, inf, a string)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value == int(value)


def checked(name: str, value: object) -> int | float:
    """One control's value within ``LIMITS[name]``, whole where it counts things;
    ``InputError`` otherwise."""
    low, high, whole = LIMITS[name]
    if is_empty(value):
        raise InputError("error_empty", control_key=f"name_{name}", low=low, high=high)
    if not isinstance(value, (int, float)) or isinstance(value, bool) \
            or (isinstance(value, float) and not math.isfinite(value)):
        raise InputError("error_range", control_key=f"name_{name}", low=low, high=high, value=value)
    if whole and not is_whole(value):
        raise InputError("error_whole", control_key=f"name_{name}", low=low, high=high, value=value)
    if not low <= value <= high:
        raise InputError("error_range", control_key=f"name_{name}", low=low, high=high, value=value)
    return int(value) if whole else float(value)


def checked_int(name: str, value: object) -> int:
    """A counting control's value (whole in ``LIMITS``), checked."""
    number = checked(name, value)
    assert isinstance(number, int), f"{name} is not a whole-number control"
    return number


def validate_seed(seed: object) -> int:
    """The lab's workload seed: a whole number in 0..2**31-1."""
    if is_empty(seed):
        raise InputError("error_empty", control_key="name_seed", low=0, high=2**31 - 1)
    if not is_whole(seed) or not 0 <= seed < 2**31:
        raise InputError("error_seed", value=seed)
    return int(seed)


def check_model(model: object) -> str:
    """A model from the list, or a hub id typed into the box; ``InputError`` otherwise (a path
    on this server is never taken from a visitor)."""
    name = str(model or "").strip()
    if name in {value for value, _, _ in MODELS} or name in SUGGESTED_MODELS:
        return name
    if not name:
        raise InputError("error_model_empty")
    if not is_hub_id(name):
        raise InputError("error_model", model=name)
    return name


def model_choices(lang: str) -> list[tuple[str, str]]:
    """The bundled model and the random-weight shapes, then the suggested hub models, each marked
    as downloaded already (read from the local cache, never the network) or fetched on first use."""
    local = [(f"{name.replace(' shape', ' ' + texts.t(lang, 'model_shape'))}: "
              f"{texts.t(lang, 'model_real' if real else 'model_random')}", value)
             for value, name, real in MODELS]
    hub = [(f"{repo}: {texts.t(lang, 'model_hub_ready' if cached_snapshot(repo) else 'model_hub')}",
            repo) for repo in SUGGESTED_MODELS]
    return local + hub


def loop_choices(lang: str) -> list[tuple[str, str]]:
    return [(texts.t(lang, f"loop_{loop}"), loop) for loop in ENGINE_LOOPS]


def device_choices(lang: str, cuda: bool) -> list[tuple[str, str]]:
    """auto, CPU, and CUDA only where the scheduler process found a GPU."""
    choices = [(texts.t(lang, "device_auto"), "auto"), ("CPU", "cpu")]
    return choices + ([("CUDA", "cuda")] if cuda else [])
