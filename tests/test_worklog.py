"""The repository reads as a codebase, not a lab notebook: no work-log words in its text.

A docstring says what the code does and why; the page says what a run shows; numbers live in
docs/benchmarks.md with the command that re-makes them. So no tracked text file (code, comments,
docstrings, the page's copy in both languages, docs, scripts, raw benchmark outputs) may name a
round of work, one of this project's issues, a past working session, a dated piece of history,
or a notes folder that no longer exists. What a real system did is cited by its own tracker
("SGLang issue 18744", "Mini-SGLang PR 142"): that is a reference, not a log, and is allowed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = {".py", ".md", ".sh", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".log", ".html", ".js",
            ".css", ".ini"}
SKIP_PARTS = {".git", "__pycache__", "node_modules", ".venv"}

# A tracker number right after one of these names (or "its") cites that project, not this one.
UPSTREAM = re.compile(r"(?:sglang|mini-sglang|vllm|pytorch|torch|transformers|gradio|triton|"
                      r"flashinfer|cpython|its)(?:'s)?\s+$", re.I)
TRACKER = re.compile(r"\b(?:issues?|PRs?) #?\d", re.I)
WORKLOG = {
    "a round of work": re.compile(r"\bround \d", re.I),
    "a working session": re.compile(
        r"\b(?:this|that|previous|earlier|first|second|third|fourth|fifth|sixth|seventh|eighth|"
        r"ninth|tenth|gpu|GPU)[ -]session\b|\bsession \d", re.I),
    "a dated piece of history": re.compile(r"(?<![\"'·] )(?<![\"'])\b20\d\d-[01]\d-[0-3]\d\b"),
    "history by date": re.compile(r"\b(?:before|after|since|until|as of) 20\d\d\b", re.I),
    "the removed notes folder": re.compile(r"docs/notes"),
    "a past measurement": re.compile(r"\b(?:as we measured|last time we)\b", re.I),
    # The page's Chinese copy: "第 9 轮" (round 9), "第六次会话" (the sixth session), "议题 14".
    "a round of work (zh)": re.compile(r"第\s*[\d一二三四五六七八九十]+\s*轮"),
    "a working session (zh)": re.compile(r"第\s*[\d一二三四五六七八九十]+\s*次?会话|本次会话"),
    "one of this project's issues (zh)": re.compile(r"议题\s*#?\d"),
}


def _tracked_text_files() -> list[Path]:
    try:
        names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.splitlines()
        paths = [ROOT / n for n in names]
    except (OSError, subprocess.CalledProcessError):       # not a git checkout (a Space, a wheel)
        paths = [p for p in ROOT.rglob("*") if not SKIP_PARTS & set(p.parts)]
    return sorted(p for p in paths if p.suffix in SUFFIXES and p.is_file())


def worklog_words(text: str) -> list[tuple[int, str, str]]:
    """(line number, what it is, the words) for every work-log phrase in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in WORKLOG.items():
            found += [(number, what, m.group(0)) for m in pattern.finditer(line)]
        found += [(number, "one of this project's issues", m.group(0))
                  for m in TRACKER.finditer(line) if not UPSTREAM.search(line[:m.start()])]
    return found


def test_the_patterns_find_work_log_words_and_leave_references_alone():
    flagged = ["Round 9 (sixth session): the same code", "Issue 14, the fast decode path",
               "serving latency (issue 15)", "H200 records made before 2026-12-01",
               "log: docs/notes/gpu.log", "from issues 20-22", "measured on 2026-11-30, quiet",
               "（见 README 的 H200 第 9 轮）", "第六次会话", "议题 14 的目标"]
    for line in flagged:
        assert worklog_words(line), line
    kept = ["SGLang issue 18744, then a stream barrier", "Mini-SGLang PR 142 frees pages",
            "a served session between clients", '"date": "2025-06-01"',
            "NVIDIA H200 · torch 2.11.0 · 2025-06-01", "median of 200 rounds of 2",
            "x = round(y, 2)", "scope=\"session\"", "the last session has not ended yet",
            "一个服务会话", "第 3 步"]
    for line in kept:
        assert not worklog_words(line), line


def test_no_tracked_text_file_holds_work_log_words():
    this = Path(__file__).resolve()
    problems = []
    for path in _tracked_text_files():
        if path.resolve() == this:                 # its own examples above are the patterns' test
            continue
        for number, what, words in worklog_words(path.read_text(errors="replace")):
            problems.append(f"{path.relative_to(ROOT)}:{number}: {what}: {words!r}")
    assert not problems, "work-log words (say what the code does and why instead):\n" + \
        "\n".join(problems)
