"""This web server's link to the scheduler process, which runs every engine.

The web server never runs an engine: ``scheduler()`` is the one ``SchedulerHandle`` of this
process (kept in ``ui.state.APP``): a ``SchedulerClient``, which starts the scheduler process
(long-lived, the model loaded once) and sends it one request at a time (run events share
``concurrency_id="engine"`` with ``concurrency_limit=1`` too, so a second visitor waits in
Gradio's queue and sees so). On ZeroGPU, where the GPU exists only inside a ``spaces.GPU`` call,
the same requests are served inside that call instead (``InlineScheduler``): that call runs in a
process of its own already.
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
    """This process's handle on the scheduler (the process started on first use). Once the
    server is stopping, a closed one: it starts no process that nobody would end, and a request
    gets ``SchedulerDied``, as from a process that died, which every handler answers."""
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
