"""Which code made a run: the commit of this checkout (``git rev-parse``), or ``ENGINE_COMMIT``
where there is no git; None (left out of records) with neither."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


@functools.cache
def engine_commit() -> str | None:
    """This checkout's commit, short; a tree with uncommitted changes to tracked files says so
    (``7944d1e+``). None where neither git nor ``ENGINE_COMMIT`` says it."""
    given = os.environ.get("ENGINE_COMMIT", "").strip().lower()
    if _COMMIT.fullmatch(given.rstrip("+")):
        return given
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, timeout=5)
        if head.returncode != 0 or not _COMMIT.fullmatch(head.stdout.strip()):
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")
