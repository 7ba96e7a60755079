"""Presets and the page's defaults: one click sets the controls for what a loop is for, sized to
the device the run will use.

``overlap`` makes the scheduler's CPU work a little under one forward (``FIRST_CLICK_FORWARDS``),
which one-step overlap hides: a serial step costs T_fwd + T_cpu, an overlapped one
max(T_fwd, T_cpu). ``multistep`` makes it about three forwards, which k = 4 decode steps per pass
hide. The forward and the scheduler's own work are what the warm-up, or since then a run of the
same setup, measured (``DeviceProfile``); before that, fixed values (``PRESETS``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import gradio as gr

import texts
from record.run_record import config_of
from record.schema import ENGINE_LOOPS, Loop, RecordDict
from ui import queues, scheduler_link
from ui.i18n import lang_of
from ui.inputs import DEFAULTS, LIMITS, InputError, checked_int
from ui.state import APP
from ui.status import Said, render_said
from ui.view import Update

if TYPE_CHECKING:
    from engine.scheduler_process.messages import DeviceProfile

FIRST_CLICK_FORWARDS = 0.7   # the defaults' CPU part of a step, in forwards
_SET = ("decode_steps", "requests", "batch", "prompt_len", "max_new", "temperature",
        "extra_cpu_us", "request_rate")
PRESETS = {   # name: (the controls it sets, by ``ui.controls.Controls`` field, the CPU's part of
    #              a step in forwards, fixed extra us)
    Loop.OVERLAP: ({"loops": [Loop.NORMAL, Loop.OVERLAP], **{name: DEFAULTS[name] for name in _SET},
                    "stop_early": True}, FIRST_CLICK_FORWARDS, 4000),
    Loop.MULTISTEP: ({"loops": list(ENGINE_LOOPS), **{name: DEFAULTS[name] for name in _SET},
                      "decode_steps": 4, "max_new": 64, "stop_early": True}, 3.0, 60000),
}
CONTROLS = tuple(PRESETS[Loop.OVERLAP][0])         # the controls a preset sets
CPU_SLIDER = (int(LIMITS["extra_cpu_us"][1]), 250)   # (maximum, step) of the control on a CPU
CUDA_STEP_US = 10
# Every handler that writes the sizing line (and the control's range) takes turns: a reply
# triggered before a number was typed must not land after the typed number's.
SAID_QUEUE = queues.one_queue("preset-said")
WARM_WAIT_S = 180.0          # how long a page load waits for the warm-up to measure the GPU


def _kind(device_kind: str) -> str:
    return "cuda" if device_kind == "cuda" else "cpu"


def remember(profile: DeviceProfile | None) -> None:
    """Keep what the warm-up, or since then a run of its setup, measured."""
    if profile is not None and profile.t_fwd_us > 0:
        kind = _kind(profile.device_kind)
        with APP.profiles_lock:
            kept = APP.profiles.get(kind)
            if profile.source == "run":
                # Only a run of the setup the warm-up measured: the presets size that setup.
                if kept is None or _setup(kept) != _setup(profile):
                    return
            elif kept is not None and kept.source == "run" and _setup(kept) == _setup(profile):
                return                  # a warm-up ending after a run of its setup: keep the run
            APP.profiles[kind] = profile


def _setup(profile: DeviceProfile) -> tuple:
    return profile.model, profile.batch, profile.cuda_graph


def profile_of_run(record: RecordDict) -> DeviceProfile | None:
    """What a finished live run measured, as the warm-up would have: its serial loop's forward
    and the scheduler's own work; None without a serial loop that decoded, or with arrivals."""
    from engine.scheduler_process.messages import DeviceProfile

    config, env = config_of(record), record["env"]
    if config is None or config.request_rate is not None or config.arrivals_file:
        return None                     # arrivals: its steps ran at partial batches
    normal = next((run for run in record["runs"] if run["loop"] == Loop.NORMAL), None)
    if normal is None:
        return None
    metrics = normal["metrics"]
    fwd, cpu = metrics.get("t_fwd_us") or 0.0, metrics.get("t_cpu_us")
    if not fwd or cpu is None:
        return None
    extra = normal["extra_cpu_us"]
    return DeviceProfile(str(env.get("device_kind", "")), str(env.get("device_name", "")),
                         config.model, config.max_batch_size, config.cuda_graph, float(fwd),
                         max(float(cpu) - extra, 0.0), source="run", extra_us=extra)


def on_cuda(device_choice: str) -> bool:
    """Does a run with this device choice use CUDA ("auto": where the scheduler found a GPU)?"""
    return device_choice == "cuda" or (device_choice == "auto" and scheduler_link.cuda_seen())


def profile_for(device_choice: str, own: DeviceProfile | None = None) -> DeviceProfile | None:
    """The profile of the device a run with this choice uses: the visitor's ``own`` (what their
    last run measured) where it is of that device, else the server's."""
    device_kind = "cuda" if on_cuda(device_choice) else "cpu"
    if own is not None and _kind(own.device_kind) == device_kind:
        return own
    with APP.profiles_lock:
        return APP.profiles.get(device_kind)


def own_measurement(record: RecordDict | None, spec: Said | None,
                    own: DeviceProfile | None) -> DeviceProfile | None:
    """The visitor's own measurement after their Run ended: the run's, where it finished and
    measured the setup the presets size, else the one they had."""
    if not spec or spec.get("key") != "status_done":
        return own
    try:
        found = profile_of_run(record) if record else None
    except (KeyError, TypeError, ValueError):
        return own
    if found is None:
        return own
    with APP.profiles_lock:
        kept = APP.profiles.get(_kind(found.device_kind))
    return found if kept is None or _setup(kept) == _setup(found) else own


def slider_range(profile: DeviceProfile | None) -> tuple[int, int]:
    """(maximum, step) of the extra-CPU-work control: on CUDA up to eight forwards (multi-step's
    largest k), on a CPU the control's whole range."""
    if profile is None or _kind(profile.device_kind) != "cuda":
        return CPU_SLIDER
    top = max(2000, math.ceil(8 * profile.t_fwd_us / 500) * 500)
    return min(top, int(LIMITS["extra_cpu_us"][1])), CUDA_STEP_US


def sized_extra_us(forwards: float, profile: DeviceProfile) -> int:
    """Extra CPU work per step that makes the CPU's part ``forwards`` forwards long."""
    low, _, _ = LIMITS["extra_cpu_us"]
    high, step = slider_range(profile)
    extra = forwards * profile.t_fwd_us - profile.t_cpu_us
    return int(min(max(round(extra / step) * step, low), high))


def sizing_said(profile: DeviceProfile, extra: int, lang: str, mine: bool = False) -> str:
    """What this much extra CPU work means on the device: whether one-step overlap hides it,
    else which k multi-step needs; figures only from the visitor's own run (``mine``)."""
    fwd, cpu = profile.t_fwd_us, profile.t_cpu_us
    part = (cpu + extra) / fwd                  # the CPU's part of a step, in forwards
    k = max(1, math.ceil(part - 1e-9))
    if not mine:
        return texts.t(lang, "sizing_plain_hides" if k == 1 else "sizing_plain_multistep"
                       ).format(k=k)
    # One plain sentence; how it was worked out is one click away.
    lead = texts.t(lang, "sizing_lead_hides" if k == 1 else "sizing_lead_multistep").format(
        fwd=fwd / 1e3, forwards=part, k=k)
    how = texts.t(lang, "preset_sized_run").format(
        device=profile.device_name, model=profile.model, batch=profile.batch,
        graphs=texts.t(lang, "detail_graphs" if profile.cuda_graph else "detail_eager"),
        fwd=fwd / 1e3, cpu=cpu / 1e3, extra=extra, forwards=part,
        hides=int(max(fwd - cpu, 0)), k=k, k4=int(max(4 * fwd - cpu, 0)),
        run_extra=profile.extra_us)
    return f"{lead}<details><summary>{texts.t(lang, 'sizing_how')}</summary>\n\n{how}</details>"


def preset(name: str, lang_choice: str = "English", device_choice: str = "auto",
           own: DeviceProfile | None = None) -> tuple[dict[str, Any], str]:
    """The values the preset gives the controls (by ``Controls`` field name), and a sentence
    saying how the extra CPU work was chosen."""
    lang = lang_of(lang_choice)
    values, forwards, fixed = PRESETS[Loop(name)]
    profile = profile_for(device_choice, own)
    if profile is None:
        extra = fixed
        said = texts.t(lang, "preset_fixed").format(extra=extra)
    else:
        extra = sized_extra_us(forwards, profile)
        said = sizing_said(profile, extra, lang, mine=profile is own)
    return {**values, "extra_cpu_us": extra}, said


def device_defaults(device_choice: str, extra_now: object, graphs_now: object, lang_choice: str,
                    own: DeviceProfile | None = None,
                    changed: bool = False) -> tuple[Update, Update, str]:
    """The extra-CPU-work control, the CUDA-graphs box and the sizing line for the device a run
    would use: on a page load only untouched defaults change; a device chosen (``changed``) gets
    its own defaults."""
    lang = lang_of(lang_choice)
    cuda = on_cuda(device_choice)
    profile = profile_for(device_choice, own)
    if not cuda:
        value = DEFAULTS["extra_cpu_us"] if changed else extra_now
        # A page load leaves the value alone: the reader may have moved it meanwhile.
        keep_value: dict[str, Any] = {"value": value} if changed else {}
        return (gr.update(maximum=CPU_SLIDER[0], step=CPU_SLIDER[1], **keep_value), gr.update(),
                describe(device_choice, value, lang_choice, own))
    if profile is None:                         # no GPU measured (no warm-up): fixed steps
        return gr.update(), gr.update(value=True), texts.t(lang, "preset_unmeasured")
    extra = sized_extra_us(FIRST_CLICK_FORWARDS, profile)
    high, step = slider_range(profile)
    untouched = changed or extra_now == DEFAULTS["extra_cpu_us"]
    sized: dict[str, Any] = {"value": extra} if untouched else {}
    slider = gr.update(maximum=high, step=step, **sized)
    graphs = gr.update(value=True) if untouched and not graphs_now else gr.update()
    return slider, graphs, describe(device_choice, extra if untouched else extra_now, lang_choice, own)


def wait_for_warm_up() -> None:
    """On a page load: wait until the warm-up has measured the device."""
    APP.warmed.wait(WARM_WAIT_S)


def describe(device_choice: str, extra_now: object, lang_choice: str,
             own: DeviceProfile | None = None) -> str:
    """The sizing line again for the control as it is now (a language switch; ``follow``)."""
    lang = lang_of(lang_choice)
    profile = profile_for(device_choice, own)
    try:
        extra = checked_int("extra_cpu_us", extra_now)
    except InputError as error:      # a number typed past the control's ends, or none at all
        return render_said(error.said(), lang)
    if profile is not None:
        return sizing_said(profile, extra, lang, mine=profile is own)
    return texts.t(lang, "preset_unmeasured" if on_cuda(device_choice)
                 else "preset_cpu_default").format(extra=DEFAULTS["extra_cpu_us"])


def follow(device_choice: str, extra_now: object, lang_choice: str,
           own: DeviceProfile | None = None) -> Update | str:
    """The sizing line after the control moved or a run ended; left as it is while nothing has
    been measured."""
    if profile_for(device_choice, own) is None:
        return gr.update()
    return describe(device_choice, extra_now, lang_choice, own)
