"""Any file a user gives the page, as a run record: a record as it is, a trace imported.

``load_any`` reads through ``record.files.read_bounded`` (bounded in bytes, before and after
decompression), then tells a run record from a Chrome or torch.profiler trace by its first bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from record.files import DEFAULT_MAX_BYTES, read_bounded
from record.profiler_import import record_from_trace
from record.run_record import record_from_bytes


def looks_like_record(data: bytes) -> bool:
    """A run record starts as a JSON object with a ``"schema"`` key near its top."""
    head = data[:4096]
    return head.lstrip().startswith(b"{") and b'"schema"' in head


def load_any(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """A run record as it is (validated), or a trace imported into a record."""
    name = Path(path).name
    data = read_bounded(path, max_bytes, what=f"file {name}")
    if looks_like_record(data):
        return record_from_bytes(data, name)
    return record_from_trace(data, name, max_bytes)
