"""The scheduler process: the engine's loops run away from the web server, whose interpreter lock
a scheduler thread would share (SGLang splits its processes for the same reason).

    web server process  --LiveRunRequest-->  scheduler process  --StepCommand-->  device process
    (Gradio, HTTP API)  <--SpanBatch, ...--  (Engine, loops)    <--StepDone-----  (CPU only)

``SchedulerClient`` starts it and sends one request at a time; a dead process fails its request
and the next starts a new one. ``InlineScheduler`` serves from a thread (ZeroGPU)."""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable, Generator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from engine.proc_watch import exit_text, is_stopped, start_deaf_to_ctrl_c
from engine.scheduler_process.messages import (
    AbortRequest,
    CancelRequest,
    Event,
    LabFinished,
    Request,
    RequestFailed,
    RunFinished,
    SchedulerReady,
    ServeRequest,
    ServingStopped,
    StatsQuery,
    StopServing,
    SubmitRequest,
    Warmed,
)

FINAL = (RunFinished, LabFinished, Warmed, RequestFailed, ServingStopped)
# Messages that mean something only inside a served session; outside one (the session failed or
# ended while they were on their way) they are dropped.
SESSION_ONLY = (CancelRequest, SubmitRequest, AbortRequest, StatsQuery, StopServing)
POLL_S = 0.2                     # how often a waiting client looks at the process
# The scheduler's nice value, inherited by the CPU device process it starts (below other
# programs' 0: they are the GPU's hardware and its driver here; see ``_raise_priority``).
NICE = int(os.environ.get("OVERLAP_DEMO_NICE", "-10"))
START_TIMEOUT_S = 120.0          # importing torch on a slow, busy 2-core machine


class SchedulerDied(RuntimeError):
    """The scheduler process died or stopped; the message says how. The next request restarts it."""


@dataclass(frozen=True)
class Placement:
    """Cores each process may run on (empty: wherever the OS puts it)."""

    scheduler: tuple[int, ...] = ()
    device: tuple[int, ...] = ()
    server: tuple[int, ...] = ()

    def describe(self) -> str:
        def cores(cpus: tuple[int, ...]) -> str:
            return "any core" if not cpus else (f"core {cpus[0]}" if len(cpus) == 1 else
                                                f"cores {','.join(map(str, cpus))}")
        return (f"scheduler on {cores(self.scheduler)}, CPU device process on "
                f"{cores(self.device)}, web server on {cores(self.server)}")


def plan_placement(cpus: list[int] | None = None) -> Placement:
    """The CPU device process gets a core to itself (it is busy all the time in the overlap
    loop), the scheduler another; the web server shares the scheduler's core on a 2-core machine
    (the scheduler waits on the device for part of every step) and gets the rest on a larger one.
    One core: no pinning at all."""
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if len(cpus) < 2:
        return Placement()
    device, scheduler = (cpus[-1],), (cpus[0],)
    rest = tuple(c for c in cpus if c not in device + scheduler)
    return Placement(scheduler=scheduler, device=device, server=rest or scheduler)


def _pin(cpus: tuple[int, ...]) -> None:
    if cpus:
        with suppress(OSError):      # a container that forbids it: run wherever we are put
            os.sched_setaffinity(0, cpus)


def _raise_priority() -> None:
    """Run the scheduler (and the device process, which inherits it) before other programs: fair
    sharing with a busy program would measure the machine, not the loops. Where the app leads its
    own session, its autogroup is raised too (Linux shares between sessions first)."""
    with suppress(OSError):                       # not Linux, no autogroups, or not allowed
        if os.getsid(0) == os.getppid():          # the app (our parent) leads the session
            with open("/proc/self/autogroup", "w") as autogroup:
                autogroup.write(str(NICE))
    _nice_to(NICE)


def _nice_to(nice: int) -> None:
    """This thread (and what it starts later) at ``nice``, where that is a raise the OS allows."""
    with suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) > nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)


def pin_server(placement: Placement) -> None:
    """Keep the calling (web server) process off the device process's core."""
    _pin(placement.server)


def raise_server_priority() -> None:
    """Run the web server at the scheduler's priority, so its short turns (a visitor's place in
    line, a drawing) are not kept waiting behind a run. Call it before the server starts its
    threads (a thread takes its nice value from the thread that starts it)."""
    _nice_to(NICE)


# ---- the process ------------------------------------------------------------------------------

def scheduler_main(conn: Any, placement: Placement) -> None:
    """The scheduler process: serve requests from ``conn`` one at a time until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the server's to handle
    signal.signal(signal.SIGTERM, _end_now)           # the server is stopping: end at once
    _pin(placement.scheduler)
    _raise_priority()
    from record import host_load
    host_load.serve_beside(os.getppid())   # the server's CPU time is ours, not another program's

    from engine.scheduler_process.service import SchedulerService

    service = SchedulerService(device_cpus=placement.device)
    send_lock = threading.Lock()

    def emit(event: Any) -> None:
        with send_lock:                   # the reporter thread sends too
            conn.send(event)

    pending: deque[Any] = deque()         # requests the watcher read while one was running
    try:
        emit(_ready_here(placement.describe()))
        while True:
            try:
                request = pending.popleft() if pending else conn.recv()
            except (EOFError, OSError):
                return                     # the server is gone
            if isinstance(request, SESSION_ONLY):
                continue                   # it arrived after its request had ended
            if isinstance(request, ServeRequest):
                service.serve(request, conn, emit)   # reads the pipe itself: no watcher
                continue
            cancelled, done = threading.Event(), threading.Event()
            watcher = threading.Thread(target=_watch_for_cancel, name="cancel-watcher", daemon=True,
                                       args=(conn, cancelled, pending, done))
            watcher.start()
            try:
                service.handle(request, emit, cancelled)
            finally:
                done.set()
                watcher.join()
    except (BrokenPipeError, OSError):
        return
    finally:
        service.close()


def _ready_here(placement: str) -> SchedulerReady:
    """What this process runs on, said to the server."""
    import torch

    cuda = torch.cuda.is_available()
    return SchedulerReady(os.getpid(), cuda, torch.cuda.get_device_name() if cuda else "CPU",
                          placement)


def _end_now(_signum: int, _frame: Any) -> None:
    """SIGTERM: the server will not wait for the request in progress. End the children (the CPU
    device process) and exit at once: a traceback from a half-built engine would be noise."""
    for child in mp.active_children():
        child.kill()
        child.join(timeout=2)
    os._exit(0)


def _watch_for_cancel(conn: Any, cancelled: threading.Event, pending: deque[Any],
                      done: threading.Event) -> None:
    """Reads the pipe while a request runs, until ``done``: a ``CancelRequest`` sets ``cancelled``;
    anything else (the next request) is kept, in order, for the main loop."""
    while not done.is_set():
        try:
            if conn.poll(0.1):
                message = conn.recv()
                if isinstance(message, CancelRequest):
                    cancelled.set()
                else:
                    pending.append(message)
        except (EOFError, OSError):
            cancelled.set()                # the server is gone: stop the run
            return


def _until_final(next_event: Callable[[], Event], abandon: Callable[[], None],
                 ) -> Generator[Event, None, None]:
    """Events up to and including a request's final one; stopped early, ``abandon`` is called."""
    finished = False
    try:
        while not finished:
            event = next_event()
            finished = isinstance(event, FINAL)
            yield event
    finally:
        if not finished:
            abandon()


# ---- the server's side ------------------------------------------------------------------------

class SchedulerClient:
    """Starts the scheduler process and talks to it; one request at a time (a lock)."""

    def __init__(self, placement: Placement | None = None) -> None:
        self.placement = placement or Placement()
        self._proc: Any = None
        self._conn: Any = None
        self._ready: SchedulerReady | None = None
        self._lock = threading.Lock()            # one request at a time
        self._send_lock = threading.Lock()       # submit and cancel may send from two threads
        # Starting and ending the process: close() comes from the thread that stops the server
        # while a request (the warm-up) may be discarding the same process from its own thread.
        self._life_lock = threading.RLock()
        self._closed = False
        self._atexit = False
        self.restarts = 0

    # ---- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the process if it is not running (returns at once; ``ready`` waits for it).
        A closed client starts none: ``SchedulerDied``."""
        with self._life_lock:
            if self._closed:
                raise SchedulerDied("the scheduler process was closed (the server is stopping)")
            if self._proc is not None and self._proc.is_alive():
                return
            self._discard()
            ctx = mp.get_context("spawn")
            conn, child = ctx.Pipe(duplex=True)
            # Not a daemon: it starts the CPU device process itself, which daemons may not. It
            # ends when its pipe does: at close(), at interpreter exit (atexit below), or when
            # this process dies, since only this process holds the other end.
            proc = ctx.Process(target=scheduler_main, args=(child, self.placement),
                               name="overlap-demo-scheduler")
            start_deaf_to_ctrl_c(proc)
            child.close()             # only the child holds its end: its death reads as EOF
            self._proc, self._conn = proc, conn
            if not self._atexit:
                atexit.register(self.close)
                self._atexit = True

    def ready(self, timeout_s: float = START_TIMEOUT_S) -> SchedulerReady:
        """What the process reported when it came up (starting it and waiting if needed)."""
        if self._ready is not None and self.alive:
            return self._ready
        with self._lock:
            return self._ensure_ready(timeout_s)

    def _ensure_ready(self, timeout_s: float = START_TIMEOUT_S) -> SchedulerReady:
        self.start()
        if self._ready is None:
            event = self._next(timeout_s, "starting")
            if not isinstance(event, SchedulerReady):
                raise SchedulerDied(f"the scheduler process sent {type(event).__name__} "
                                    "instead of starting")
            self._ready = event
        return self._ready

    @property
    def reported(self) -> SchedulerReady | None:
        """What ``ready`` said, without waiting: None until the scheduler has said it."""
        return self._ready

    @property
    def alive(self) -> bool:
        proc = self._proc                 # read once: close() may clear it from another thread
        return proc is not None and proc.is_alive()

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    def close(self) -> None:
        """End the process for good: a request in progress fails (``SchedulerDied``), and no
        later request starts another."""
        with self._life_lock:
            self._closed = True
            self._discard()

    def _discard(self) -> None:
        """End the process (if any) and forget it; the next request starts a new one."""
        with self._life_lock:
            proc, conn = self._proc, self._conn
            self._proc = self._conn = self._ready = None
            if conn is not None:
                conn.close()                 # EOF on its pipe: an idle process ends by itself
            if proc is not None:
                _end_process(proc)

    # ---- requests ---------------------------------------------------------------------------
    def submit(self, request: Request) -> Generator[Event, None, None]:
        """Send ``request`` and yield its events until the final one (yielded too);
        ``SchedulerDied`` if the process dies or stops meanwhile. Stopping early cancels the
        request."""
        with self._lock:
            self._ensure_ready()
            self._send(request)
            yield from _until_final(lambda: self._next(None, "running a request"), self._abandon)

    @property
    def busy(self) -> bool:
        """A request is in progress (its events are being read)."""
        return self._lock.locked()

    def cancel(self) -> None:
        """Ask the request in progress to stop at its next scheduler iteration."""
        if self.alive:
            with suppress(SchedulerDied):      # it ended meanwhile: nothing left to cancel
                self._send(CancelRequest())

    def _send(self, message: Any) -> None:
        proc, conn = self._proc, self._conn
        if proc is None or conn is None:
            raise SchedulerDied("the scheduler process was closed")
        try:
            with self._send_lock:
                conn.send(message)
        except (BrokenPipeError, OSError) as error:
            raise self._gone(proc, "sending it a request") from error

    def _abandon(self) -> None:
        """Cancel the request and read its events up to the final one (or restart)."""
        if not self.alive:
            return
        self.cancel()
        with suppress(SchedulerDied):
            while not isinstance(self._next(30.0, "stopping a request"), FINAL):
                pass

    def _next(self, timeout_s: float | None, doing: str) -> Any:
        """The next event; ``SchedulerDied`` when the process dies, stops, misses a deadline or
        is closed (by another thread: the process and pipe are read once per poll)."""
        waited = 0.0
        while True:
            proc, conn = self._proc, self._conn
            if proc is None or conn is None:
                raise SchedulerDied(f"the scheduler process was closed while {doing}")
            try:
                if conn.poll(POLL_S):
                    return conn.recv()
            except (EOFError, OSError):
                raise self._gone(proc, doing) from None
            waited += POLL_S
            if not proc.is_alive():
                raise self._gone(proc, doing)
            if is_stopped(proc.pid):
                raise self._gone(proc, doing, "was stopped (SIGSTOP?)")
            if timeout_s is not None and waited > timeout_s:
                raise self._gone(proc, doing, f"did not answer in {timeout_s:.0f} s")

    def _gone(self, proc: Any, doing: str, why: str = "") -> SchedulerDied:
        """Discard ``proc`` (unless another thread already has) and say what became of it
        (``why``, or how it ended), under the lock every start and end of the process takes."""
        with self._life_lock:
            if not why:
                proc.join(timeout=1.0)
                self.restarts += 1
                why = f"ended ({exit_text(proc)})"
            if self._proc is proc:
                self._discard()
        return SchedulerDied(f"the scheduler process {why} while {doing}")


def _end_process(proc: Any) -> None:
    """End the scheduler process and reap it: idle, it ends at EOF on its pipe; busy, SIGTERM;
    stopped or still there, SIGKILL."""
    proc.join(timeout=1.0)
    if proc.is_alive() and not is_stopped(proc.pid):
        proc.terminate()
        proc.join(timeout=5)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=5)


class InlineScheduler:
    """The same service in a thread of this process (ZeroGPU: GPU work must run inside the
    ``spaces.GPU`` call, which is itself a separate process from the web server)."""

    def __init__(self) -> None:
        from engine.scheduler_process.service import SchedulerService

        self.service = SchedulerService()
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._ready: SchedulerReady | None = None

    def submit(self, request: Request) -> Generator[Event, None, None]:
        with self._lock:
            events: queue.Queue[Event] = queue.Queue()
            self._cancelled = threading.Event()
            worker = threading.Thread(target=self.service.handle,
                                      args=(request, events.put, self._cancelled), daemon=True)
            worker.start()
            try:
                yield from _until_final(events.get, self._cancelled.set)
            finally:
                worker.join()

    def ready(self) -> SchedulerReady:
        """What this process can run on (inside a ZeroGPU call, the GPU it was given)."""
        self._ready = _ready_here("in the calling process")
        return self._ready

    @property
    def reported(self) -> SchedulerReady | None:
        return self._ready

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def cancel(self) -> None:
        self._cancelled.set()

    def close(self) -> None:
        self.service.close()


# What the web server holds of the scheduler: one request at a time (``submit`` yields its events
# up to the final one), ``ready``, ``reported``, ``busy``, ``cancel`` and ``close``.
SchedulerHandle = SchedulerClient | InlineScheduler
