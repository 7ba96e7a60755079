"""Which code made a run (``engine/provenance.py``): git's commit, or ENGINE_COMMIT where the
copy has no git, and records carry it."""

from __future__ import annotations

import pytest

from engine import provenance


@pytest.fixture(autouse=True)
def _fresh():
    provenance.engine_commit.cache_clear()
    yield
    provenance.engine_commit.cache_clear()


def test_the_environment_names_the_commit_where_git_cannot(monkeypatch):
    monkeypatch.setenv("ENGINE_COMMIT", "7944D1E")
    assert provenance.engine_commit() == "7944d1e"


@pytest.mark.parametrize("given", ["", "not a commit", "12345"])
def test_without_a_valid_name_git_is_asked_and_else_nothing_is_said(monkeypatch, tmp_path, given):
    monkeypatch.setenv("ENGINE_COMMIT", given)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)       # a folder that is no git checkout
    assert provenance.engine_commit() is None


def test_a_checkout_names_its_own_commit(monkeypatch):
    import shutil
    import subprocess
    if shutil.which("git") is None or subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=provenance.ROOT, capture_output=True).returncode:
        pytest.skip("not a git checkout")
    monkeypatch.delenv("ENGINE_COMMIT", raising=False)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=provenance.ROOT,
                          capture_output=True, text=True).stdout.strip()
    assert provenance.engine_commit().rstrip("+") == head
