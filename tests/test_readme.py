"""The README is the front door: short, and its abridged loop is the code's own.

Every statement line of the README's ``overlap_loop`` (its comments aside) is a line of the real
``Scheduler.overlap_loop``, in the same order: the abridged loop may leave lines out, never say
something the code does not. And the README stays within a page count a reader takes in.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from engine.scheduler.scheduler import Scheduler

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MAX_LINES = 200


def _statements(code: str) -> list[str]:
    """The code's lines without comments, whitespace collapsed, blank lines dropped."""
    lines = [re.sub(r"\s+", " ", line.split("#", 1)[0]).strip() for line in code.splitlines()]
    return [line for line in lines if line]


def test_the_readme_fits_its_length():
    assert len(README.splitlines()) <= MAX_LINES


def test_the_readmes_overlap_loop_is_the_codes_in_order():
    block = re.search(r"```python\n(def overlap_loop.*?)```", README, re.S)
    assert block, "the README shows overlap_loop"
    shown = _statements(block.group(1))
    real = _statements(inspect.getsource(Scheduler.overlap_loop))
    at = 0
    for line in shown:
        assert line in real[at:], f"not in Scheduler.overlap_loop (in this order): {line!r}"
        at = real.index(line, at) + 1


def test_the_readmes_peer_table_is_the_benchmarks_json():
    """The peer table is rendered from ``studies/results/peer-h100.json`` (one GPU, every engine
    on it): a figure or ratio typed by hand, or a stale one, fails here."""
    import json

    from studies.peers import table

    doc = json.loads((ROOT / "studies" / "results" / "peer-h100.json").read_text())
    for host in table.hosts(doc["rows"]):
        assert host and host in README                     # the card named by its UUID
        for model in sorted({r["model"] for r in doc["rows"] if table.host_of(r) == host}):
            assert table.summary_table(doc["rows"], model, host) in README, (model, host)
