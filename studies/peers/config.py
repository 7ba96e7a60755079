"""A configuration of a peer, as its own users would choose it for this work, named and sourced.

The work is offline throughput on random token-id prompts: every prompt is new (a prefix cache
finds nothing), the batch is admitted at once, greedy decoding to a fixed length. A peer's rows in
the tables come from every configuration tried here; the ratios take each peer's fastest one
(``studies/peers/table.py``), so a configuration that made a peer slower is reported, never used.

Each peer's configurations are in its own folder's ``config.py``; ``studies.peers.work.configs_of``
picks them for a work and a shape.
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
