"""Reading an uploaded file in a process of its own, one file per process.

Parsing a large trace takes gigabytes for a moment; a process gives them back when it exits,
where the web server would keep them. Starting one (spawn) is slow, so a spare is started as soon
as the last worker is done. A worker past its time limit is killed, and the upload says so.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import cast

from engine.proc_watch import start_deaf_to_ctrl_c
from record.imported.given_file import sniff
from record.schema import RecordDict
from ui.state import APP

MAX_UPLOAD_BYTES = 200 * 2**20
PARSE_TIMEOUT_S = 120.0


def _worker(conn: Connection) -> None:
    """The worker process: read one file, send back its record or why not, exit; at the
    ordinary priority, so a long parse does not take a core from a run."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), 0))
    try:
        path, max_bytes = conn.recv()
    except (EOFError, OSError):
        return                                      # the web server went away
    from record.imported.given_file import load_any

    answer: tuple[str, RecordDict | str]
    try:
        answer = ("ok", load_any(path, max_bytes))
    except Exception as error:  # noqa: BLE001 - every failure goes back as a message
        answer = ("error", str(error) or type(error).__name__)
    try:
        conn.send(answer)
    except OSError:                                 # the web server went away meanwhile
        pass


def _start() -> tuple[BaseProcess, Connection]:
    """A worker that a terminal's Ctrl-C does not reach: the app handles it and ends them."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_worker, args=(child,), daemon=True,
                              name="overlap-demo-parse")
    start_deaf_to_ctrl_c(process)
    child.close()
    return process, parent


def prepare() -> None:
    """Have a worker waiting (at start-up, and after each file)."""
    with APP.parsers_lock:
        if not APP.parsers:
            APP.parsers.append(_start())


def _take() -> tuple[BaseProcess, Connection]:
    """A worker for one file: the spare while it is alive, else a new one (a dead spare is
    reaped: it has read nothing)."""
    with APP.parsers_lock:
        while APP.parsers:
            process, conn = APP.parsers.pop()
            if process.is_alive():
                return process, conn
            conn.close()
            process.join(timeout=1)
        return _start()


def parse(path: Path) -> RecordDict:
    """The record of ``path`` (a record, or a trace imported), read by a worker process;
    ``ValueError`` with the reason, or ``NotATrace`` for a file plainly neither (an image)."""
    sniff(path)
    process, conn = _take()
    try:
        conn.send((str(path), MAX_UPLOAD_BYTES))
        if not conn.poll(PARSE_TIMEOUT_S):
            raise ValueError(f"reading the file took more than {PARSE_TIMEOUT_S:.0f} s")
        kind, value = conn.recv()
    except (EOFError, OSError):
        process.join(timeout=5)
        raise ValueError(f"the process reading the file ended (exit code {process.exitcode})"
                         ) from None
    finally:
        conn.close()
        if process.is_alive():
            process.kill()
        process.join(timeout=5)
        threading.Thread(target=prepare, name="parse-prepare", daemon=True).start()
    if kind != "ok":
        raise ValueError(value)
    return cast(RecordDict, value)
