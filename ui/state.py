"""What the web server keeps between events, in one object: ``APP``.

What outlives one event and is shared by every visitor (the scheduler's client, what was measured,
the line of runs) lives here, not in module globals; per-visitor state is ``gr.State`` in the page.
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
    # "cuda" | "cpu" -> the latest ``DeviceProfile`` (the warm-up's, then a run's): sizes presets.
    profiles: dict[str, DeviceProfile] = field(default_factory=dict)
    profiles_lock: threading.Lock = field(default_factory=threading.Lock)
    warmed: threading.Event = field(default_factory=threading.Event)   # the warm-up has ended
    # Seconds per decode step by (model, device, batch, CUDA graphs): the next run's estimate.
    step_seconds: dict[tuple, float] = field(default_factory=dict)
    # The line for the engine (``ui.turns``): runs, lab runs and the warm-up take turns there.
    turns: Turns = field(default_factory=Turns)
    # The upload parser started ahead of time (``ui.parsing``): (process, pipe), at most one.
    parsers: list[tuple[Any, Any]] = field(default_factory=list)
    parsers_lock: threading.Lock = field(default_factory=threading.Lock)
    # How the server stops (``ui.stopping``): the signal (0: none), and whether a child may exist.
    stop_signal: int = 0
    children: bool = False


APP = AppState()
