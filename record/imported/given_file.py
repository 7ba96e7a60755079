"""A file a user gives the page, as a run record: a record as it is, a trace imported. ``sniff``
refuses at once what is plainly neither."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path

from record.bounded_read import DEFAULT_MAX_BYTES, read_bounded
from record.imported import imported
from record.imported.profiler_import import record_from_trace
from record.run_record import record_from_bytes
from record.schema import RecordDict, RunDict

# First bytes of files people upload by mistake -> what they are (``NotATrace.kind``).
MAGIC = ((b"\x89PNG", "png"), (b"\xff\xd8\xff", "jpeg"), (b"GIF8", "gif"), (b"%PDF", "pdf"),
         (b"PK\x03\x04", "zip"), (b"BZh", "bzip2"), (b"\xfd7zXZ", "xz"),
         (b"7z\xbc\xaf", "7z"), (b"RIFF", "riff"))


class NotATrace(ValueError):
    """A file that is plainly no record and no trace; ``kind`` says what it is instead."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"{name} is not JSON ({kind}): upload a run record or a Chrome / "
                         "torch.profiler trace (.json or .json.gz)")
        self.kind = kind


def sniff(path: str | os.PathLike[str]) -> None:
    """Raise ``NotATrace`` when the file's first bytes say it cannot be a record or a trace."""
    name = Path(path).name
    with open(path, "rb") as f:
        head = f.read(64)
    if not head.strip():
        raise NotATrace("empty", name)
    for magic, kind in MAGIC:
        if head.startswith(magic):
            raise NotATrace(kind, name)
    text = head.lstrip(b" \t\r\n")
    if text.startswith(b"\xef\xbb\xbf"):            # a UTF-8 byte-order mark, then JSON
        text = text[3:].lstrip()
    first = text[:1]
    if first.isascii() and first.isalnum() or first in (b"<", b"#", b"-", b'"'):
        raise NotATrace("text", name)                 # text (CSV, HTML, a log), not JSON


def looks_like_record(data: bytes) -> bool:
    """A run record starts as a JSON object with a ``"schema"`` key near its top."""
    head = data[:4096]
    return head.lstrip().startswith(b"{") and b'"schema"' in head


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off for the block: a trace makes a million objects in no cycle, and
    the collector would walk the growing heap again and again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_any(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> RecordDict:
    """A run record as it is (validated), or a trace imported into a record."""
    name = Path(path).name
    with collector_paused():
        data = read_bounded(path, max_bytes, what=f"file {name}")
        if looks_like_record(data):
            return record_from_bytes(data, name)
        return record_from_trace(data, name)


MAX_SHOWN_RUNS = 4      # runs drawn side by side at once: two records of two loops, or traces


def side_by_side(records: list[tuple[RecordDict, str]],
                 most: int = MAX_SHOWN_RUNS) -> tuple[RecordDict, int]:
    """One record holding the runs of ``records`` ((record, name) pairs), drawn as a live run's
    loops are; each run keeps its ``source`` and ``env``. At most ``most`` runs, the newest, and
    how many older ones were left out."""
    runs: list[RunDict] = []
    for record, name in records:
        for run in record["runs"]:
            shown = run.copy()
            extra = imported(shown)
            extra["source"] = extra.get("source") or name
            extra["env"] = extra.get("env") or record.get("env") or {}
            runs.append(shown)
    dropped = max(len(runs) - most, 0)
    first = records[0][0]
    combined: RecordDict = {"schema": first.get("schema", 1), "env": dict(first.get("env") or {}),
                            "config": {"sources": [name for _, name in records]},
                            "runs": runs[dropped:]}
    return combined, dropped
