"""The classroom walkthrough holds together: its sections' minutes add up to what its title
promises (in both languages, section by section the same), and every picture and recorded run
it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
ROOT = DOCS.parent
WALKTHROUGHS = {"en": DOCS / "walkthrough.md", "zh": DOCS / "walkthrough.zh.md"}
# "## 3. The same step with overlap (2 min)", "## 11. ... (optional, 1.5 min)", and the same in
# Chinese: "（2 分钟）", "（选讲，1.5 分钟）".
SECTION = re.compile(r"^## (\d+)\. .*[(（](optional, |选讲，)?([0-9.]+) (?:min|分钟)[)）]\s*$", re.M)
TITLE = {"en": re.compile(r"^# .* in (\d+) minutes", re.M),
         "zh": re.compile(r"^# (\d+) 分钟", re.M)}
TOTAL = {"en": re.compile(r"(\d+) with the optional sections"),
         "zh": re.compile(r"加上选讲部分共 (\d+) 分钟")}


def _sections(lang: str) -> list[tuple[int, bool, float]]:
    text = WALKTHROUGHS[lang].read_text(encoding="utf-8")
    return [(int(n), bool(opt), float(m)) for n, opt, m in SECTION.findall(text)]


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_the_minutes_add_up_to_the_title(lang):
    text = WALKTHROUGHS[lang].read_text(encoding="utf-8")
    sections = _sections(lang)
    assert [n for n, _, _ in sections] == list(range(1, len(sections) + 1))
    core = sum(m for _, opt, m in sections if not opt)
    every = sum(m for _, _, m in sections)
    assert core == float(TITLE[lang].search(text).group(1))
    assert every == float(TOTAL[lang].search(text).group(1))


def test_both_languages_have_the_same_sections_and_minutes():
    assert _sections("en") == _sections("zh")


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_every_picture_and_recorded_run_named_exists(lang):
    text = WALKTHROUGHS[lang].read_text(encoding="utf-8")
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert pictures
    for picture in pictures:
        assert (DOCS / picture).resolve().is_file(), picture
    recorded = {p.stem for p in (ROOT / "assets" / "recorded").glob("*.json")}
    named = set(re.findall(r"`(h200-[a-z0-9-]+)`", text))
    assert named and named <= recorded, named - recorded
