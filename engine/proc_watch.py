"""Watching a child process: has it died (and how), or is it stopped?

Every wait on another process here (the CPU device process, the scheduler process) is a short
poll that also asks these two questions, so a dead or stopped peer is reported within a second
instead of being waited for forever.
"""

from __future__ import annotations

import signal
from typing import Any


def exit_text(proc: Any) -> str:
    """How a ``multiprocessing`` process ended, for a person: "killed by SIGKILL", "exit code 1"."""
    code = proc.exitcode
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def is_stopped(pid: int) -> bool:
    """True when the process is stopped (SIGSTOP, a debugger): it will not answer until resumed."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def start_deaf_to_ctrl_c(proc: Any) -> None:
    """Start a ``multiprocessing`` process that a terminal's Ctrl-C does not reach.

    A terminal sends SIGINT to the whole process group, children included. A child that is still
    importing torch would die of it with a traceback of its own; the parent handles Ctrl-C and
    ends its children instead. So the child starts with SIGINT blocked: a signal mask is kept
    through spawn's fork and exec, so the child is deaf from its first instruction (a handler set
    in the child would come too late for a Ctrl-C during its imports). The mask is the calling
    thread's alone and a blocked signal is only held back, never lost: a Ctrl-C that arrives
    meanwhile reaches the parent's handler through another thread, or as soon as the mask is
    lifted. (Ignoring SIGINT in the parent instead, SIG_IGN, would lose a Ctrl-C that arrives
    during the start, and the parent would serve on as if it had never been pressed.)

    multiprocessing's resource tracker, started on the first spawn, unblocks SIGINT in the
    calling thread once it has started itself; it is started first, so the mask holds."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
