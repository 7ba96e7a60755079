"""A configuration of a peer, as its own users would choose it for this work, named and sourced.

Every configuration tried gets its rows; the ratios take each peer's fastest one (``table.py``),
so a configuration that made a peer slower is reported, never used. Each peer's list is in its
folder's ``config.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MINISGL, SGLANG = "Mini-SGLang", "SGLang"


@dataclass(frozen=True)
class PeerConfig:
    """One configuration of a peer: its name in the tables, its engine arguments (without the
    work's own: model, batch sizes, lengths), and why a user would pick it."""

    engine: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    models: tuple[str, ...] = ()         # only these shapes (empty: every shape of the work)
