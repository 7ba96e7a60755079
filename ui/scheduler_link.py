"""This web server's link to the scheduler process, which runs every engine.

``scheduler()`` is this process's one ``SchedulerHandle``, started on first use. On ZeroGPU, where
the GPU exists only inside a ``spaces.GPU`` call, that call serves requests (``InlineScheduler``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ui.state import APP

if TYPE_CHECKING:
    from engine.scheduler_process.process import Placement, SchedulerHandle


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


def cuda_found() -> bool:
    """``cuda_seen``, waiting for the scheduler process to say where it has not yet (False where
    it cannot start: a run then says why)."""
    try:
        return cuda_seen() or scheduler().ready().cuda
    except Exception:  # noqa: BLE001 - no scheduler: not a page's error
        return False


def shutdown() -> None:
    """End the scheduler process (and the device process): with the server (after
    ``APP.shutting_down``, so no request starts another), or between tests."""
    with APP.scheduler_lock:
        if APP.scheduler is not None:
            APP.scheduler.close()
            APP.scheduler = None


def placement() -> Placement:
    """Which cores the scheduler, the device process and this server may use: none pinned (the
    OS can move the scheduler off a busy core), unless OVERLAP_DEMO_PIN=1 asks for a split."""
    from engine.scheduler_process.process import Placement, plan_placement

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
    """This process's handle on the scheduler (started on first use); once the server is
    stopping, a closed one, whose requests get ``SchedulerDied``."""
    with APP.scheduler_lock:
        if APP.scheduler is None:
            from engine.scheduler_process.process import InlineScheduler, SchedulerClient

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
