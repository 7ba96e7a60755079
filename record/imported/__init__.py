"""Other engines' traces read as runs of the record schema, apart from the record of our own runs.
An imported run is a ``RunDict`` with a few keys more (``ImportedRun``)."""

from __future__ import annotations

from typing import Any, TypedDict, cast

from record.imported.trace_loop import LoopSeen, Note
from record.schema import RunDict


class ImportedRun(TypedDict, total=False):
    """What an imported run (or a run shown beside another record's) holds beyond a ``RunDict``."""

    notes: list[Note]                   # what the trace cannot tell
    source: str                         # the file it came from
    env: dict[str, Any]                 # runs side by side: where its record was made
    loop_seen: LoopSeen                 # what its timing says
    joined_gap_us: float                # gaps shorter than this count as busy
    step_starts: list[list[float]]      # [step, when the host began it]
    phase_roles: dict[str, str]         # its named host phases' roles


def imported(run: RunDict) -> ImportedRun:
    """The import-only keys of ``run``, typed (the same dict: a run of ours has none of them)."""
    return cast(ImportedRun, run)


def loop_verdict(run: RunDict) -> str | None:
    """What an imported run's timing says of its loop; None for a run of ours."""
    seen = imported(run).get("loop_seen")
    return seen.get("verdict") if isinstance(seen, dict) else None
