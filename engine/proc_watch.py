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
