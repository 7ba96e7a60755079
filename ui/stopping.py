"""How the app stops: Ctrl-C (or SIGTERM) at any moment says "stopped", and nothing else, within
seconds, and leaves no process behind.

Python's own Ctrl-C raises ``KeyboardInterrupt`` wherever the main thread is, so the app takes the
two signals itself from its first lines: until a child process may start it exits at once; from
then on the handler only asks (``asked``), and the main thread ends the server and its children.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

from ui.state import APP

STOPPED = "stopped"
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def take_signals() -> None:
    """Handle Ctrl-C and SIGTERM here from now on (main thread only, as Python requires)."""
    for signum in SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _on_signal)


def children_from_here() -> None:
    """A child process may start from now on: a stop is no longer immediate but orderly."""
    APP.children = True


def asked() -> bool:
    return bool(APP.stop_signal)


def wait() -> None:
    """Return once a stop is asked (polled: the handler runs in this thread, so a lock could
    be one this thread holds)."""
    while not APP.stop_signal:
        time.sleep(0.1)


def exit_code() -> int:
    """What the shell sees: 128 + the signal's number, as for a program the signal ended."""
    return 128 + APP.stop_signal if APP.stop_signal else 0


def say_stopped() -> None:
    """The one line a stop prints (around stdout's buffer where the signal came mid-write)."""
    try:
        print(STOPPED, flush=True)
    except RuntimeError:
        os.write(sys.stdout.fileno(), f"{STOPPED}\n".encode())


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if APP.stop_signal:
        return                      # already stopping
    APP.stop_signal = signum
    if not APP.children:            # nothing started that must be ended: end here, at once
        say_stopped()
        os._exit(exit_code())
