"""Build the plain-English training corpus for the bundled model, from text already on this machine.

Sources, read offline (nothing imported or executed): the standard library's docstrings and
reference topics; docstrings of installed packages with a permissive license; license texts;
READMEs, NEWS and changelogs under ``/usr/share/doc``; GNU info manuals. A paragraph is kept only if
it reads like prose, deduplicated across the corpus; documents are separated by two blank lines
(the trainer puts an end-of-text token there); the stats file records what went in::

    python scripts/make_corpus.py --out data/corpus.txt"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DOC_SEPARATOR = "\n\n\n"
PARAGRAPH_SEPARATOR = "\n\n"

_DOCUMENTED_NODES = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
_SKIP_STDLIB_DIRS = {"site-packages", "__pycache__"}
_SKIP_PACKAGE_DIRS = {"__pycache__", "tests", "test", ".."}  # ".." = scripts installed elsewhere
_CODE_CHARS = set("=[]{}<>#@$%&|\\/~^`+")
_FUNCTION_WORDS = {
    "the", "a", "an", "of", "to", "and", "or", "in", "is", "are", "be", "for", "with", "that",
    "this", "it", "as", "by", "on", "not", "if", "from", "which", "can", "will", "you", "any",
}
_RST_ROLE = re.compile(r":[a-zA-Z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_RST_LITERAL = re.compile(r"``([^`]*)``|`([^`]*)`_{0,2}")
_EMAIL = re.compile(r"<?[\w.+-]+@[\w-]+(\.[\w-]+)+>?")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(\w[^*\n]*?)\*{1,2}(?![\w*])")
_BULLET = re.compile(r"^(\s*)(?:[-*+\u2022]|\d+[.)]|[a-z][.)])\s+", re.MULTILINE)
_TYPOGRAPHY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                             "\u2013": "-", "\u2014": " - ", "\u00a0": " ", "\u2026": "..."})
_UNDERLINE = re.compile(r"^\s*([-=*~^#+.\"'_])\1{2,}\s*$")
_HTML_TAG = re.compile(r"</?[a-zA-Z][^>\n]*>")
_MARKDOWN_HEADER = re.compile(r"^#{1,6}\s+", re.MULTILINE)
_IDENTIFIER = re.compile(r"[/_]|\(\)|\.[ch]\b|::|[a-z][A-Z]")
_NOT_PROSE_LINE_STARTS = (">>>", "...", "$ ", "# ", "#!", "+--", "|", ":")  # ":" = rst fields
_SECTION_HEADER = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Attributes"
                             r"|Examples?|Notes?|Keyword Arguments|See Also|References|Warns)"
                             r"\s*(:|\s+\w+\s*:)")
_PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache|ISC|PSF|Python|Zlib|CC0|Unlicense)", re.IGNORECASE)
_COPYLEFT = re.compile(r"GPL|MPL|Mozilla|EPL|Eclipse|CDDL|proprietary", re.IGNORECASE)
_TABLE_GAP = re.compile(r"\S {3,}\S")
_COPYRIGHT_LINE = re.compile(r"^\s*(copyright\b|\(c\)|©|\d{4}\s*[-,]\s*\d{4})", re.IGNORECASE)
_DEP5_FIELD = re.compile(r"^(Format|Upstream-[\w-]+|Source|Files|Copyright|Comment|Disclaimer"
                         r"|Files-Excluded|License):", re.IGNORECASE)


@dataclass(frozen=True)
class Document:
    """One source document: a module's docstrings, a license, a README, a manual node."""

    source: str  # source family, e.g. "stdlib-docstrings"
    text: str  # raw text; paragraphs separated by blank lines
    strict: bool = False  # terse developer notes: demand more English and no identifiers


# --- sources ---------------------------------------------------------------------------------


def stdlib_documents(lib_dir: Path) -> Iterator[Document]:
    """Yield one document per stdlib module: its docstrings in source order."""
    for path in sorted(lib_dir.rglob("*.py")):
        if _SKIP_STDLIB_DIRS & set(path.relative_to(lib_dir).parts):
            continue
        text = _module_docstrings(path)
        if text:
            yield Document("stdlib-docstrings", text)


def _module_docstrings(path: Path) -> str:
    """A module's module, class and function docstrings in source order ("" if unparsable)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError, RecursionError):
        return ""
    nodes = [node for node in ast.walk(tree) if isinstance(node, _DOCUMENTED_NODES)]
    nodes.sort(key=lambda node: getattr(node, "lineno", 0))  # ast.walk is breadth-first
    docstrings = (ast.get_docstring(node, clean=True) for node in nodes)
    return PARAGRAPH_SEPARATOR.join(d for d in docstrings if d)


def permissive_distributions(site_dir: Path) -> dict[str, tuple[str, list[Path]]]:
    """Installed distributions whose metadata declares a permissive license: name -> (license,
    the .py files it installed)."""
    found = {}
    for dist_info in sorted(site_dir.glob("*.dist-info")):
        try:
            header = (dist_info / "METADATA").read_text(errors="replace").split("\n\n", 1)[0]
            record = (dist_info / "RECORD").read_text(errors="replace").splitlines()
        except OSError:
            continue
        license_fields = [line.split(":", 1)[1].strip() for line in header.splitlines()
                          if line.startswith(("License-Expression:", "License:",
                                              "Classifier: License ::"))]
        license_text = "; ".join(field for field in license_fields if field)
        if not _PERMISSIVE.search(license_text) or _COPYLEFT.search(license_text):
            continue
        files = [site_dir / row.split(",", 1)[0] for row in record]
        files = [f for f in files if f.suffix == ".py" and not _SKIP_PACKAGE_DIRS & set(f.parts)]
        if files:
            found[dist_info.name.split("-")[0]] = (license_text[:120], files)
    return found


def site_package_documents(distributions: dict[str, tuple[str, list[Path]]],
                           ) -> Iterator[Document]:
    """Yield one document per module of the permissive distributions (stricter prose test)."""
    for _license, files in distributions.values():
        for path in files:
            text = _module_docstrings(path)
            if text:
                yield Document("site-packages-docstrings", text, strict=True)


def pydoc_topic_documents(lib_dir: Path) -> Iterator[Document]:
    """Yield the Python reference-manual topics stored as string literals in pydoc_data."""
    path = lib_dir / "pydoc_data" / "topics.py"
    if not path.exists():
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    yield Document("python-reference-topics", value.value)


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def debian_copyright_documents(doc_dir: Path) -> Iterator[Document]:
    """Yield the license bodies of Debian copyright files (DEP-5 and free-form)."""
    for path in sorted(doc_dir.glob("*/copyright")):
        lines = []
        for line in _read_text(path).splitlines():
            if _DEP5_FIELD.match(line) or _COPYRIGHT_LINE.match(line):
                lines.append("")  # a field header or holder line ends the paragraph
                continue
            if line.startswith((" ", "\t")) and line.strip() == ".":
                line = ""  # DEP-5 encodes a blank line inside a field as " ."
            lines.append(line)
        yield Document("debian-copyright", "\n".join(lines))


def common_license_documents(licenses_dir: Path) -> Iterator[Document]:
    """Yield the full license texts of /usr/share/common-licenses."""
    for path in sorted(licenses_dir.iterdir()):
        if path.is_file() and not path.is_symlink():
            yield Document("common-licenses", _read_text(path))


def package_doc_documents(doc_dir: Path) -> Iterator[Document]:
    """Yield package READMEs, then NEWS files and changelogs (the stricter prose test), plain or
    gzipped, from /usr/share/doc."""
    for pattern, source, suffixes in (("*/README*", "debian-readmes", {".rst"}),
                                      ("*/NEWS*", "debian-release-notes", set()),
                                      ("*/changelog*", "debian-release-notes", set())):
        for path in sorted(doc_dir.glob(pattern)):
            if path.is_file() and path.suffix in {"", ".gz", ".md", ".txt", ".Debian", *suffixes}:
                yield Document(source, _read_text(path), strict=source != "debian-readmes")


def info_manual_documents(info_dir: Path) -> Iterator[Document]:
    """Yield one document per node of the GNU info manuals (nodes are split by 0x1f)."""
    for path in sorted(info_dir.glob("*.info*.gz")):
        for node in _read_text(path).split("\x1f"):
            lines = [
                line for line in node.splitlines()
                if not line.startswith(("File: ", "Tag Table:", "End Tag Table", "* ", "Node: "))
            ]
            yield Document("gnu-info-manuals", "\n".join(lines))


# --- cleaning --------------------------------------------------------------------------------


def _unwrap_markup(text: str) -> str:
    text = _RST_ROLE.sub(r"\1", text)
    text = _RST_LITERAL.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _EMAIL.sub("", text.translate(_TYPOGRAPHY))
    text = _EMPHASIS.sub(r"\1", _MARKDOWN_HEADER.sub("", _HTML_TAG.sub("", text)))
    return _BULLET.sub(r"\1", text).replace("''", '"').replace("``", '"')


def _fraction(items: list[str] | str, test) -> float:
    return sum(1 for item in items if test(item)) / max(len(items), 1)


def _looks_like_prose(lines: list[str], joined: str, strict: bool) -> bool:
    """A prose test that keeps docstring sentences and drops code, tables and doctests."""
    words = joined.split()
    if len(words) < (6 if strict else 4) or len(joined) < 20:
        return False
    if len(words) < 8 and not joined.endswith("."):
        return False  # short fragments ("See also:", "New in 3.2") must at least be sentences
    if any(line.lstrip().startswith(_NOT_PROSE_LINE_STARTS) for line in lines):
        return False
    if _SECTION_HEADER.match(joined) or joined.count(" : ") >= 2:
        return False  # "Args: x: ...", "Parameters x : int ..." (docstring field lists)
    if _fraction([line.strip() for line in lines], _TABLE_GAP.search) > 0.3:
        return False
    if strict and _fraction(words, _IDENTIFIER.search) > 0.02:
        return False
    if _fraction(joined, _CODE_CHARS.__contains__) > 0.03:
        return False
    if _fraction(joined, str.isdigit) > 0.1 or _fraction(joined, lambda c: not c.isascii()) > 0.02:
        return False
    if _fraction(words, lambda w: "://" in w or "www." in w) > 0.05:
        return False
    alphabetic = _fraction(words, lambda w: w.strip(".,;:()\"'!?").isalpha())
    function_words = _fraction(words, lambda w: w.lower().strip(".,;:()\"'") in _FUNCTION_WORDS)
    return alphabetic >= 0.75 and function_words >= (0.2 if strict else 0.12)


def clean_paragraphs(text: str, strict: bool = False) -> list[str]:
    """Split a document into paragraphs and keep the prose ones, whitespace-normalised."""
    text = _unwrap_markup(text.replace("\r\n", "\n").replace("\t", "    "))
    kept = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.splitlines() if line.strip() and not _UNDERLINE.match(line)]
        if not lines:
            continue
        joined = " ".join(" ".join(lines).split())
        if _looks_like_prose(lines, joined, strict):
            kept.append(joined)
    return kept


# --- assembly --------------------------------------------------------------------------------


@dataclass
class CorpusStats:
    """What went into the corpus, per source family."""

    documents: Counter
    paragraphs: Counter
    bytes: Counter
    duplicates_dropped: int = 0


def build_corpus(documents: Iterator[Document]) -> tuple[str, CorpusStats]:
    """Clean and deduplicate all documents; return the corpus text and its stats."""
    stats = CorpusStats(Counter(), Counter(), Counter())
    seen: set[bytes] = set()
    out_docs = []
    for doc in documents:
        paragraphs = []
        for paragraph in clean_paragraphs(doc.text, doc.strict):
            normalised = re.sub(r"[^a-z0-9]+", "", paragraph.lower())    # a duplicate's key
            key = hashlib.blake2b(normalised.encode(), digest_size=12).digest()
            if key in seen:
                stats.duplicates_dropped += 1
                continue
            seen.add(key)
            paragraphs.append(paragraph)
        if not paragraphs:
            continue
        body = PARAGRAPH_SEPARATOR.join(paragraphs)
        out_docs.append(body)
        stats.documents[doc.source] += 1
        stats.paragraphs[doc.source] += len(paragraphs)
        stats.bytes[doc.source] += len(body.encode("utf-8"))
    return DOC_SEPARATOR.join(out_docs) + "\n", stats


def all_documents(args: argparse.Namespace, distributions: dict[str, tuple[str, list[Path]]],
                  ) -> Iterator[Document]:
    """Every source, in a fixed order: full license texts and the stdlib come first, so they are
    the copies that survive deduplication."""
    yield from common_license_documents(args.licenses_dir)
    yield from debian_copyright_documents(args.doc_dir)
    yield from pydoc_topic_documents(args.stdlib_dir)
    yield from stdlib_documents(args.stdlib_dir)
    yield from info_manual_documents(args.info_dir)
    yield from package_doc_documents(args.doc_dir)
    yield from site_package_documents(distributions)


def stats_record(stats: CorpusStats, total_bytes: int,
                 distributions: dict[str, tuple[str, list[Path]]]) -> dict:
    """The JSON-able summary written next to the corpus."""
    return {
        "bytes": total_bytes,
        "documents": sum(stats.documents.values()),
        "paragraphs": sum(stats.paragraphs.values()),
        "duplicate_paragraphs_dropped": stats.duplicates_dropped,
        "sources": {
            source: {"bytes": stats.bytes[source], "documents": stats.documents[source],
                     "paragraphs": stats.paragraphs[source]}
            for source in stats.bytes
        },
        "site_packages": {name: license for name, (license, _files) in distributions.items()},
    }


def _print_stats(stats: CorpusStats, out: Path, total_bytes: int) -> None:
    print(f"wrote {out}: {total_bytes:,} bytes, {sum(stats.documents.values()):,} documents, "
          f"{sum(stats.paragraphs.values()):,} paragraphs "
          f"({stats.duplicates_dropped:,} duplicate paragraphs dropped)")
    for source in stats.bytes:
        print(f"  {source:26s} {stats.bytes[source]:>12,} bytes {stats.documents[source]:>7,} docs "
              f"{stats.paragraphs[source]:>8,} paragraphs")


def main() -> None:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    lib_default = Path(sys.prefix) / "lib" / version
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/corpus.txt"))
    parser.add_argument("--stdlib-dir", type=Path, default=lib_default)
    parser.add_argument("--doc-dir", type=Path, default=Path("/usr/share/doc"))
    parser.add_argument("--licenses-dir", type=Path, default=Path("/usr/share/common-licenses"))
    parser.add_argument("--info-dir", type=Path, default=Path("/usr/share/info"))
    parser.add_argument("--no-site-packages", action="store_true",
                        help="leave out the docstrings of installed third-party packages")
    args = parser.parse_args()

    site_dir = args.stdlib_dir / "site-packages"
    distributions = {} if args.no_site_packages else permissive_distributions(site_dir)
    text, stats = build_corpus(all_documents(args, distributions))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    total_bytes = len(text.encode("utf-8"))
    record = stats_record(stats, total_bytes, distributions)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    _print_stats(stats, args.out, total_bytes)


if __name__ == "__main__":
    main()
