"""What the web server keeps between events, in one object: ``APP``.

Gradio handlers are plain functions of component values; what outlives one event (the scheduler
process's client, what the warm-up and the runs measured, the line of runs) lives here
rather than in module globals spread over ``ui``'s modules, so a reader (and a test) finds all of
it in one place. Per-visitor state (the record on screen, the last lab report) is ``gr.State``
in the page instead: this is the server's, shared by every visitor.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ui.turns import Turns

if TYPE_CHECKING:
    from engine.scheduler_process.messages import DeviceProfile
    from engine.scheduler_process.process import SchedulerHandle


@dataclass
class AppState:
    # The scheduler: one client per server process, started on first use (``ui.scheduler_link.scheduler``).
    scheduler: SchedulerHandle | None = None
    scheduler_lock: threading.Lock = field(default_factory=threading.Lock)
    # Set as the server stops: work cut short then is not news.
    shutting_down: threading.Event = field(default_factory=threading.Event)
    # What a device measured, "cuda" | "cpu": the latest ``DeviceProfile`` of that kind (the
    # warm-up's, then a run's of the same setup); the presets and the sizing line read it.
    profiles: dict[str, DeviceProfile] = field(default_factory=dict)
    profiles_lock: threading.Lock = field(default_factory=threading.Lock)
    warmed: threading.Event = field(default_factory=threading.Event)   # the warm-up has ended
    # Seconds per decode step of earlier runs, by (model, device, batch, CUDA graphs): the
    # estimate shown before the next run of the same setup (the latest few setups only).
    step_seconds: dict[tuple, float] = field(default_factory=dict)
    # The line for the engine (``ui.turns``): runs, lab runs and the warm-up take turns there;
    # each visitor's Stop reaches their own ticket in it, and nobody else's.
    turns: Turns = field(default_factory=Turns)
    # The upload parser started ahead of time (``ui.parsing``): (process, pipe), at most one.
    parsers: list[tuple[Any, Any]] = field(default_factory=list)
    parsers_lock: threading.Lock = field(default_factory=threading.Lock)
    # How the server stops (``ui.stopping``): the signal that asked (0: none yet), and whether a
    # child process may exist (a stop then ends it in order instead of at once).
    stop_signal: int = 0
    children: bool = False


APP = AppState()
