"""The live tab's controls as one value: ``Controls``, what a run is asked to do.

The page builds it in one place (``Controls.from_inputs``) and everything that starts a run takes
it whole (``ui.live_runs.run_live``, ``build_request``, ``prewarm``). Numbers are kept as the page
sent them (a typed 2.5, an emptied box as None): ``build_request`` checks them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from engine.workloads import DEFAULT_PROMPTS
from record.schema import Loop
from ui.inputs import DEFAULTS


@dataclass(frozen=True)
class Controls:
    loops: Sequence[str]              # any of ``record.schema.ENGINE_LOOPS``
    decode_steps: float | None        # multi-step's k
    stop_early: bool                  # each request stops at a token a probe run picked
    device: str                       # "auto" | "cpu" | "cuda"
    model: str                        # a listed model or a hub id typed into the box
    requests: float | None
    batch: float | None               # requests decoded together
    prompt_len: float | None          # words per prompt
    prompts_text: str                 # one prompt a line ("": the built-in prompts)
    max_new: float | None             # new tokens per request
    temperature: float | None
    cuda_graph: bool
    extra_cpu_us: float | None        # extra scheduler CPU work per step
    request_rate: float | None = 0.0  # requests/s (0: all arrive at the start)
    chat: bool = False                # prompts through the model's chat template
    shared_prefix: float | None = 0   # tokens of one system prompt before every prompt
    kv_pages: float | None = 0        # the KV pool (0: enough for every request)
    lang_choice: str = "English"      # the page's language, as its switch shows it

    @classmethod
    def page_defaults(cls, **changes: Any) -> Controls:
        """The controls as the page first shows them (what the warm-up prepares for)."""
        first: dict[str, Any] = {**DEFAULTS, "loops": [Loop.NORMAL, Loop.OVERLAP], "chat": False,
                                 "stop_early": True, "device": "auto", "model": "bundled",
                                 "prompts_text": DEFAULT_PROMPTS, "cuda_graph": False}
        return cls(**{**first, **changes})

    @classmethod
    def from_inputs(cls, values: Mapping[Any, Any], components: Mapping[str, Any]) -> Controls:
        """The controls from Gradio's set-of-inputs form: ``values`` maps each component to its
        value, ``components`` each field to its component (every field, by name)."""
        return cls(**{f.name: values[components[f.name]] for f in fields(cls)})
