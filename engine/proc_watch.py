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
    closes its children instead. An ignored signal stays ignored across the spawn's exec (and
    Python then installs no handler of its own), so the child is deaf to it from its first
    instruction. Only the main thread may change a signal's handler; from another thread the
    child ignores SIGINT itself once its target runs (both targets here do)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        proc.start()
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc.start()
    finally:
        signal.signal(signal.SIGINT, before)
