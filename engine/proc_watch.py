"""Watching a child process: has it died (and how), or is it stopped? Every wait on another process
polls these, so a dead or stopped peer is reported instead of waited for forever."""

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
    """Start a ``multiprocessing`` process that a terminal's Ctrl-C does not reach (the parent ends
    its children): SIGINT is blocked while it starts (a signal mask survives spawn). The resource
    tracker, which unblocks SIGINT once started, is started first."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
