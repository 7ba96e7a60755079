"""Check ``docs/citations.md`` against the real systems' sources, and read it for the tests: each
row's path exists, its *shows* text is in its lines, and the lines sit in the function it names.

    python -m scripts.check_citations --source Mini-SGLang=/path/to/mini-sglang \
        --source SGLang=/path/to/unpacked/sglang-wheel

A system given no source is skipped; the exit status is 1 when any checked row fails."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CITATIONS = Path(__file__).resolve().parent.parent / "docs" / "citations.md"
_TICKED = re.compile(r"`([^`]+)`")
_DEF = re.compile(r"^(\s*)(?:async\s+)?(?:def|class)\s+(\w+)")


@dataclass(frozen=True)
class FileCitation:
    """One row of the Files table: where, which lines, inside what, showing what."""

    system: str
    path: str
    lines: tuple[int, int] | None
    inside: str
    shows: tuple[str, ...]


@dataclass(frozen=True)
class Citations:
    """The whole list: what each system was read at, its files, its pull requests and issues."""

    read_at: dict[str, str]
    files: tuple[FileCitation, ...]
    references: dict[str, set[str]]

    def commit(self, system: str) -> str | None:
        """The commit a system was read at, where the list names one (hex, 7 to 40 digits)."""
        found = re.search(r"commit `([0-9a-f]{7,40})`", self.read_at.get(system, ""))
        return found.group(1) if found else None


def _table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first Markdown table under ``## heading``, cells stripped."""
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _lines(cell: str) -> tuple[int, int] | None:
    if not cell:
        return None
    first, _, last = cell.partition("-")
    return int(first), int(last or first)


def read(text: str | None = None) -> Citations:
    """Parse ``docs/citations.md`` (or ``text``) into its three tables."""
    text = CITATIONS.read_text(encoding="utf-8") if text is None else text
    read_at = {row[0]: row[2] for row in _table(text, "Read at")}
    files = tuple(
        FileCitation(system=row[0], path=_TICKED.findall(row[1])[0], lines=_lines(row[2]),
                     inside=" ".join(_TICKED.findall(row[3])), shows=tuple(_TICKED.findall(row[4])))
        for row in _table(text, "Files"))
    references: dict[str, set[str]] = {}
    for row in _table(text, "Pull requests and issues"):
        references.setdefault(row[0], set()).add(row[1].removeprefix(f"{row[0]} "))
    return Citations(read_at=read_at, files=files, references=references)


def _source_text(root: Path, path: str, commit: str | None) -> str | None:
    """A file's text under ``root`` (``python/`` dropped for a wheel), or from git at ``commit``."""
    for candidate in (root / path, root / path.removeprefix("python/")):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
        if candidate.is_dir():
            return ""
    if commit is None or not ((root / ".git").exists() or (root / "HEAD").is_file()):
        return None
    spec = f"{commit}:{path.rstrip('/')}"
    shown = subprocess.run(["git", "-C", str(root), "show", spec], capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else None


def enclosing(lines: list[str], first: int, last: int) -> str:
    """The innermost ``def``/``class`` holding 1-based lines ``first``..``last`` ('' if none):
    walking up from ``first``, the first one indented less than every line seen so far."""
    own = _DEF.match(lines[first - 1])
    if own:
        return own.group(2)
    indent = min((len(line) - len(line.lstrip()) for line in lines[first - 1:last]
                  if line.strip()), default=0)
    for line in reversed(lines[:first - 1]):
        if not line.strip() or line.lstrip().startswith((")", "]", "}")):
            continue  # a blank line, or the close of a signature spread over lines
        depth = len(line) - len(line.lstrip())
        if depth < indent:
            found = _DEF.match(line)
            if found:
                return found.group(2)
            indent = depth
    return ""


def check(row: FileCitation, text: str | None) -> list[str]:
    """What is wrong with one row against its source's text (nothing: it holds)."""
    where = f"{row.system} {row.path}" + (f" lines {row.lines[0]}-{row.lines[1]}" if row.lines else "")
    if text is None:
        return [f"{where}: no such file"]
    lines = text.splitlines()
    problems = []
    if row.lines:
        first, last = row.lines
        if last > len(lines):
            return [f"{where}: the file has {len(lines)} lines"]
        body = "\n".join(lines[first - 1:last])
        around = enclosing(lines, first, last)
        if row.inside and around != row.inside:
            problems.append(f"{where}: inside {around or 'no function'!r}, not {row.inside!r}")
    else:
        body = text
    problems += [f"{where}: {shown!r} not there" for shown in row.shows if shown not in body]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", action="append", default=[], metavar="SYSTEM=PATH",
                        help="a system's source: a checkout, an unpacked wheel or a clone")
    args = parser.parse_args(argv)
    sources = dict(item.split("=", 1) for item in args.source)
    citations = read()
    unknown = set(sources) - set(citations.read_at)
    if unknown:
        parser.error(f"no such system in {CITATIONS.name}: {', '.join(sorted(unknown))} "
                     f"(systems: {', '.join(citations.read_at)})")
    failures = checked = 0
    for row in citations.files:
        if row.system not in sources:
            continue
        text = _source_text(Path(sources[row.system]), row.path, citations.commit(row.system))
        problems = check(row, text)
        checked += 1
        failures += bool(problems)
        for problem in problems:
            print("FAIL", problem)
    skipped = sorted({row.system for row in citations.files} - set(sources))
    print(f"{checked} rows checked, {failures} failed"
          + (f"; not checked (no source given): {', '.join(skipped)}" if skipped else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
