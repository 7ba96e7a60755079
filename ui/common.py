"""What every handler shares: control limits, input checks, status lines, the scheduler process.

The web server never runs an engine: ``scheduler()`` is the one ``SchedulerHandle`` of this
process (kept in ``ui.state.APP``): a ``SchedulerClient``, which starts the scheduler process
(long-lived, the model loaded once) and sends it one request at a time (run events share
``concurrency_id="engine"`` with ``concurrency_limit=1`` too, so a second visitor waits in
Gradio's queue and sees so). On ZeroGPU, where the GPU exists only inside a ``spaces.GPU`` call,
the same requests are served inside that call instead (``InlineScheduler``): that call runs in a
process of its own already.
"""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import texts
from engine.models.hub import SUGGESTED_MODELS, cached_snapshot, is_hub_id
from engine.workloads import DEFAULT_PROMPTS, word_prompts  # noqa: F401 - used by the UI
from record.schema import ENGINE_LOOPS
from ui.state import APP

if TYPE_CHECKING:
    from engine.processes.scheduler_process import Placement, SchedulerHandle

ROOT = Path(__file__).resolve().parent.parent
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
    """A control holds a value the run cannot take; ``text(lang)`` says which and why."""

    def __init__(self, key: str, **values: Any) -> None:
        super().__init__(key)
        self.key, self.values = key, values

    def said(self) -> dict[str, Any]:
        return said(self.key, "error", **self.values)


def one_queue(name: str) -> dict[str, Any]:
    """Event options for handlers that must take turns in the order they were triggered: one
    queue (``name``) of one. Gradio reads a handler's inputs when its event is triggered, not
    when it runs, so two replies for the same output can land out of order on a loaded
    machine; in one queue of one the last reply is the one triggered last."""
    return {"concurrency_id": name, "concurrency_limit": 1}


def on_zero_gpu() -> bool:
    """Hugging Face ZeroGPU says so in its environment (the ``spaces`` package alone does not)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "true", "yes")


def cuda_seen() -> bool:
    """Did the scheduler process find a GPU? (False until it has said; True on ZeroGPU.)"""
    if on_zero_gpu():
        return True
    client = APP.scheduler
    ready = client.reported if client is not None else None
    return bool(ready and ready.cuda)


def shutdown() -> None:
    """End the scheduler process (and with it the device process): with the server (which
    sets ``APP.shutting_down`` first, so no request starts another), or between tests (the next
    request starts a new one). A request in progress (the warm-up, at a Ctrl-C during
    start-up) fails with ``SchedulerDied``, which it keeps to itself once the server stops."""
    with APP.scheduler_lock:
        if APP.scheduler is not None:
            APP.scheduler.close()
            APP.scheduler = None


def placement() -> Placement:
    """Which cores the scheduler, the device process and this server may use.

    On a 2-core machine with a browser beside the app, pinning (the device process on one core,
    the scheduler and the server on the other) gave the first clicks less GPU busy than leaving
    the processes to the OS, which can move the scheduler off a core that the browser or the
    server is using. So nothing is pinned unless OVERLAP_DEMO_PIN=1 asks for
    ``plan_placement``'s split (to compare the two)."""
    from engine.processes.scheduler_process import Placement, plan_placement

    return plan_placement() if os.environ.get("OVERLAP_DEMO_PIN", "0") == "1" else Placement()


def placement_note() -> tuple[str, dict[str, str]]:
    """The run label's word on placement: a text key and its values (cores, or none pinned)."""
    place = placement()
    if not place.device:
        return "placement_os", {}
    return "placement_pinned", {"sched_cores": ",".join(map(str, place.scheduler)),
                                "device_cores": ",".join(map(str, place.device)),
                                "server_cores": ",".join(map(str, place.server))}


def scheduler() -> SchedulerHandle:
    """This process's handle on the scheduler (the process started on first use). Once the
    server is stopping, a closed one: it starts no process that nobody would end, and a request
    gets ``SchedulerDied``, as from a process that died, which every handler answers."""
    with APP.scheduler_lock:
        if APP.scheduler is None:
            from engine.processes.scheduler_process import InlineScheduler, SchedulerClient

            if on_zero_gpu():
                APP.scheduler = InlineScheduler()
            else:
                client = SchedulerClient(placement())
                if APP.shutting_down.is_set():
                    client.close()
                else:
                    client.start()
                APP.scheduler = client
        return APP.scheduler


def is_empty(value: Any) -> bool:
    """An emptied number box, as Gradio sends it: None or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_whole(value: Any) -> bool:
    """A whole number, as a number box may send one: an int (not a bool) or a finite float with
    nothing after the point (2.0). Never raises, whatever comes (10**400, inf, a string)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value == int(value)


def validate(**given: Any) -> dict[str, Any]:
    """Every number within LIMITS, whole where it counts things; ``InputError`` otherwise.

    Nothing is rounded or clamped here: a value the run cannot take is refused, naming the limit.
    """
    checked = {}
    for name, value in given.items():
        low, high, whole = LIMITS[name]
        if is_empty(value):
            raise InputError("error_empty", control=name, low=low, high=high)
        if not isinstance(value, (int, float)) or isinstance(value, bool) \
                or (isinstance(value, float) and not math.isfinite(value)):
            raise InputError("error_range", control=name, low=low, high=high, value=value)
        if whole and not is_whole(value):
            raise InputError("error_whole", control=name, low=low, high=high, value=value)
        if not low <= value <= high:
            raise InputError("error_range", control=name, low=low, high=high, value=value)
        checked[name] = int(value) if whole else float(value)
    return checked


def validate_seed(seed: Any) -> int:
    """The lab's workload seed: a whole number in 0..2**31-1."""
    if is_empty(seed):
        raise InputError("error_empty", control="seed", low=0, high=2**31 - 1)
    if not is_whole(seed) or not 0 <= seed < 2**31:
        raise InputError("error_seed", value=seed)
    return int(seed)


def said(key: str, kind: str = "info", detail: str = "", notes: tuple[str, ...] = (),
         folded: tuple[str, str] | None = None, **args: Any) -> dict[str, Any]:
    """A final status line as data (its text key, values, kind, notes), so a language switch can
    say it again in the other language. Values that came from a user or a file are escaped here;
    ``notes`` are text keys appended after it (formatted with the same values); ``folded`` is
    (the title's key, a note's key) shown one click away; ``detail`` is shown folded, as code."""
    return {"key": key, "kind": kind, "detail": detail, "notes": list(notes),
            "folded": list(folded or ()),
            "args": {name: value if isinstance(value, (int, float)) else esc(value)
                     for name, value in args.items()}}


def render_said(spec: dict[str, Any] | None, lang: str) -> str:
    """The status line of a ``said`` spec in ``lang`` (the technical detail folded beneath)."""
    if not spec:
        return status(texts.t(lang, "no_runs"))
    args = dict(spec["args"])
    if "control" in args:                    # a control's name, in the reader's language
        args["control"] = texts.t(lang, f"name_{args['control']}")
    for name in [name for name in args if name.endswith("_key")]:
        args[name[:-4]] = texts.t(lang, args.pop(name))   # a text said in the reader's language
    text = texts.t(lang, spec["key"]).format(**args)
    gap = texts.sentence_gap(lang)
    text += "".join(gap + texts.t(lang, note).format(**args) for note in spec["notes"])
    if spec.get("folded"):
        title, note = spec["folded"]
        text += (f"<details><summary>{texts.t(lang, title)}</summary>"
                 f"{texts.t(lang, note).format(**args)}</details>")
    if spec["detail"]:
        text += (f"<details><summary>{texts.t(lang, 'fail_detail')}</summary>"
                 f"<pre>{esc(spec['detail'])}</pre></details>")
    return status(text, spec["kind"])


def status(text: str, kind: str = "info") -> str:
    """A status line. ``text`` is HTML: whatever in it came from a user or a file is escaped by
    the caller (``esc``)."""
    return f'<div class="status status-{kind}">{text}</div>'


def esc(value: Any) -> str:
    return html.escape(str(value))


def progress_bar(fraction: float, text: str) -> str:
    percent = max(0.0, min(100.0, 100.0 * fraction))
    return (status(text, "running") + f'<div class="bar"><div style="width:{percent:.0f}%">'
            "</div></div>")


def lang_of(choice: str) -> str:
    return "zh" if choice == texts.LANGUAGES["zh"] else "en"


def model_choices(lang: str) -> list[tuple[str, str]]:
    """The bundled model and the random-weight shapes, then the suggested hub models (fetched on
    first use through ``engine.models.hub``'s guards; the box takes any other hub id too), each marked
    as downloaded already or fetched on first use (read from the local cache, never the network)."""
    local = [(f"{name.replace(' shape', ' ' + texts.t(lang, 'model_shape'))}: "
              f"{texts.t(lang, 'model_real' if real else 'model_random')}", value)
             for value, name, real in MODELS]
    hub = [(f"{repo}: {texts.t(lang, 'model_hub_ready' if cached_snapshot(repo) else 'model_hub')}",
            repo) for repo in SUGGESTED_MODELS]
    return local + hub


def check_model(model: Any) -> str:
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


def loop_choices(lang: str) -> list[tuple[str, str]]:
    return [(texts.t(lang, f"loop_{loop}"), loop) for loop in ENGINE_LOOPS]


def device_choices(lang: str, cuda: bool) -> list[tuple[str, str]]:
    """auto, CPU, and CUDA only where the scheduler process found a GPU."""
    choices = [(texts.t(lang, "device_auto"), "auto"), ("CPU", "cpu")]
    return choices + ([("CUDA", "cuda")] if cuda else [])
