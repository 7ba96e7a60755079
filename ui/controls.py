"""The live tab's controls as one value: ``Controls``, what a run is asked to do.

The page builds it in one place (``Controls.from_inputs``, from Gradio's set-of-inputs form: a
dict of component -> value), and everything that starts a run takes it whole: the Run button's
handler (``ui.live_runs.run_live``), the request it becomes (``ui.live_runs.build_request``) and the
warm-up (``ui.live_runs.prewarm``, with ``Controls.page_defaults``). Numbers are kept as the page sent
them (a typed 2.5, an emptied box as None): ``build_request`` checks them and says what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
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
        first = cls(loops=[Loop.NORMAL, Loop.OVERLAP], decode_steps=DEFAULTS["decode_steps"],
                    stop_early=True, device="auto", model="bundled",
                    requests=DEFAULTS["requests"], batch=DEFAULTS["batch"],
                    prompt_len=DEFAULTS["prompt_len"], prompts_text=DEFAULT_PROMPTS,
                    max_new=DEFAULTS["max_new"], temperature=DEFAULTS["temperature"],
                    cuda_graph=False, extra_cpu_us=DEFAULTS["extra_cpu_us"],
                    request_rate=DEFAULTS["request_rate"], chat=False,
                    shared_prefix=DEFAULTS["shared_prefix"], kv_pages=DEFAULTS["kv_pages"])
        return replace(first, **changes)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_inputs(cls, values: Mapping[Any, Any], components: Mapping[str, Any]) -> Controls:
        """The controls from Gradio's set-of-inputs form: ``values`` maps each component to its
        value, ``components`` each field to its component (every field, by name)."""
        missing = sorted(set(cls.names()) - set(components))
        if missing:
            raise TypeError(f"Controls.from_inputs: no component for {missing}")
        return cls(**{name: values[components[name]] for name in cls.names()})
