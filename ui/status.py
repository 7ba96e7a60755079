"""The page's status line: what a handler says about a run, kept as data so a language switch can
say it again in the other language.

``said`` makes the data (a text key, its values, a kind, notes), ``render_said`` the HTML in one
language. Whatever in a status came from a visitor or a file is escaped here, once.
"""

from __future__ import annotations

import html
import math
from typing import Any, TypedDict

import texts


class Said(TypedDict):
    """A status line as data (``said``): ``key`` and ``notes`` are text keys of ``texts``."""

    key: str
    kind: str                       # "info" | "warn" | "error" | "running"
    detail: str                     # technical detail, shown folded, as code
    notes: list[str]
    folded: list[str]               # [title key, note key] shown one click away, or empty
    args: dict[str, Any]            # the texts' values, escaped where they came from outside


def said(key: str, kind: str = "info", detail: str = "", notes: tuple[str, ...] = (),
         folded: tuple[str, str] | None = None, **args: Any) -> Said:
    """A status line as data; values from a user or a file are escaped here. A value named
    ``NAME_key`` is a text key, and ``NAME_keys`` a list of them: ``render_said`` says them in
    the reader's language as ``NAME``."""
    return {"key": key, "kind": kind, "detail": detail, "notes": list(notes),
            "folded": list(folded or ()),
            "args": {name: value if isinstance(value, (int, float))
                     else [str(key) for key in value] if name.endswith("_keys") else esc(value)
                     for name, value in args.items()}}


def failure(kind: str, detail: str) -> Said:
    """A request the scheduler process did not finish (``RequestFailed.kind``, or "died"): a
    sentence in the user's language, the engine's technical detail folded beneath it."""
    known = ("invalid", "cancelled", "device", "died", "model", "offline")
    key = f"fail_{kind}" if kind in known else "fail_error"
    if kind == "cancelled":
        return said(key, "warn")
    return said(key, "error", detail=detail)


def render_said(spec: Said | None, lang: str) -> str:
    """The status line of a ``said`` spec in ``lang`` (the technical detail folded beneath)."""
    if not spec:
        return status(texts.t(lang, "no_runs"))
    args = dict(spec["args"])
    keys = {name[:-4]: args.pop(name) for name in [name for name in args if name.endswith("_key")]}
    for name, key in keys.items():       # a text said in the reader's language, with the values
        args[name] = texts.t(lang, key).format(**args)
    lists = {name[:-5]: args.pop(name) for name in [name for name in args if name.endswith("_keys")]}
    for name, several in lists.items():  # several texts in the reader's language, in a row
        args[name] = " · ".join(texts.t(lang, key) for key in several)
    text = texts.t(lang, spec["key"]).format(**args)
    gap = texts.sentence_gap(lang)
    text += "".join(gap + texts.t(lang, note).format(**args) for note in spec["notes"])
    if spec.get("folded"):
        title, note = spec["folded"]
        text += (f"<details><summary>{texts.t(lang, title)}</summary>"
                 f"{texts.t(lang, note).format(**args)}</details>")
    if spec["detail"]:
        text += (f"<details><summary>{texts.t(lang, 'fail_detail')}</summary>"
                 f"<pre>{esc(spec['detail'])}</pre></details>")
    return status(text, spec["kind"])


def status(text: str, kind: str = "info") -> str:
    """A status line; ``text`` is HTML, whatever in it came from outside escaped by the caller."""
    return f'<div class="status status-{kind}">{text}</div>'


def esc(value: object) -> str:
    return html.escape(str(value))


def progress_bar(fraction: float, text: str) -> str:
    percent = max(0.0, min(100.0, 100.0 * fraction))
    return (status(text, "running") + f'<div class="bar"><div style="width:{percent:.0f}%">'
            "</div></div>")


def place_text(place: tuple[int, float], lang: str, key: str = "line_place") -> str:
    """"You are 12th in line; about 25 s." in ``lang`` (``key``: the sentence)."""
    n, seconds = place
    return texts.t(lang, key).format(n=n, nth=texts.ordinal(lang, n),
                                     seconds=max(1, math.ceil(seconds)))
