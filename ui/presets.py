"""Presets: one click sets the controls for what a loop is for, sized to this machine.

- ``overlap`` (the defaults' loops): the scheduler's CPU work about as long as the forward, where
  one-step overlap gains the most (a serial step costs T_fwd + T_cpu, an overlapped one
  max(T_fwd, T_cpu): twice as fast when they are equal);
- ``multistep``: the scheduler's work about three forwards long, which one-step overlap cannot
  hide and k = 4 decode steps per scheduling pass can (max(T_fwd, T_cpu / 4) = T_fwd).

How long a forward and the scheduler's own work take here is what the background warm-up's probe
run measured (``engine.processes.messages.DeviceProfile``, kept by ``remember``); the extra CPU
work per step is set to bring the CPU's part to that many forwards. Before the warm-up has
measured anything (or with ``--no-prewarm``) the presets use fixed values measured on this
project's 2-core machine: 4 ms, and 20 ms (README: 58% GPU busy for one-step overlap, 97% for
k = 4).
"""

from __future__ import annotations

import threading
from typing import Any

import viz
from ui.common import DEFAULTS, LIMITS, lang_of

CONTROLS = ("loops", "decode_steps", "stop_early", "requests", "batch", "prompt_len", "max_new",
            "temperature", "extra_cpu_us", "request_rate")
PRESETS = {   # name: (the controls it sets, the CPU's part of a step in forwards, fixed extra us)
    "overlap": ({"loops": ["normal", "overlap"], **DEFAULTS, "stop_early": True}, 1.0, 4000),
    "multistep": ({"loops": ["normal", "overlap", "multistep"], **DEFAULTS, "decode_steps": 4,
                   "max_new": 64, "stop_early": True}, 3.0, 20000),
}
_profile: dict[str, Any] = {}
_lock = threading.Lock()


def remember(profile: Any) -> None:
    """Keep what the warm-up measured (a ``DeviceProfile``, or None)."""
    if profile is not None and profile.t_fwd_us > 0:
        with _lock:
            _profile["now"] = profile


def sized_extra_us(forwards: float, profile: Any) -> int:
    """Extra CPU work per step that makes the CPU's part ``forwards`` forwards long, in the
    control's steps (250 µs) and limits."""
    low, high, _ = LIMITS["extra_cpu_us"]
    extra = forwards * profile.t_fwd_us - profile.t_cpu_us
    return int(min(max(round(extra / 250) * 250, low), high))


def preset(name: str, lang_choice: str = "English") -> tuple:
    """The values the preset gives the controls (``CONTROLS`` order), then a sentence saying
    how the extra CPU work was chosen."""
    lang = lang_of(lang_choice)
    values, forwards, fixed = PRESETS[name]
    with _lock:
        profile = _profile.get("now")
    if profile is None:
        extra = fixed
        said = viz.t(lang, "preset_fixed").format(extra=extra)
    else:
        extra = sized_extra_us(forwards, profile)
        said = viz.t(lang, "preset_sized").format(
            device=profile.device_name, fwd=profile.t_fwd_us / 1e3, cpu=profile.t_cpu_us / 1e3,
            extra=extra, forwards=f"{forwards:g}")
    chosen = {**values, "extra_cpu_us": extra}
    return (*(chosen[control] for control in CONTROLS), said)
