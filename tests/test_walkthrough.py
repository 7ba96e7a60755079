"""The classroom walkthrough holds together.

- Its core sections' minutes add up to what its title promises, the optional deep-dives' to what
  its opening paragraph promises, every section after the core is marked optional, and each core
  section asks one question; both languages have the same sections and minutes.
- Every picture and recorded run it names exists, and every control it names (in bold) is on the
  page: a label the page's tabs show, in English or Chinese.
- Every number a section quotes where it names a recorded run (``assets/recorded``) is one the
  page shows for that run, read through the page's own handlers (``tests/page_figures.py``): no
  list of figures to keep up to date, so a new figure cannot escape. What it quotes the page
  saying (a lane's label, a button) the page says, and the colour it gives a phase is the one
  the page draws. The peer benchmark's figures (``studies/results/peer-h100.json``) and the
  serving measurement's (``assets/serving``) are the ones those files hold, in both languages.
- Every path, line range, pull request and issue of SGLang, Mini-SGLang, vLLM or FlashInfer that
  the walkthroughs, the README, the page's texts or the code cite is listed in
  ``docs/citations.md``, and every system listed there names the commit or release it was read
  at. (``scripts/check_citations.py`` checks the list against the sources themselves.)
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import page_figures
import pytest

from scripts import check_citations
from texts import LANGUAGES, STRINGS
from texts.teach import HAZARD_NAMES

DOCS = Path(__file__).resolve().parent.parent / "docs"
ROOT = DOCS.parent
WALKTHROUGHS = {"en": DOCS / "walkthrough.md", "zh": DOCS / "walkthrough.zh.md"}
# "## 3. The same step with overlap (1.5 min)", "## 12. Deep-dive: ... (optional, 3 min)", and
# the same in Chinese: "（1.5 分钟）", "（选读，3 分钟）".
SECTION = re.compile(r"^## (\d+)\. .*[(（](optional, |选读，)?([0-9.]+) (?:min|分钟)[)）]\s*$", re.M)
HEADING = re.compile(r"^## .*$", re.M)
TITLE = {"en": re.compile(r"^# .* in (\d+) minutes", re.M),
         "zh": re.compile(r"^# (\d+) 分钟", re.M)}
OPTIONAL_TOTAL = {"en": re.compile(r"sections \d+-\d+, (\d+(?:\.\d+)?) minutes\s+more"),
                  "zh": re.compile(r"第 \d+–\d+ 节，另需 (\d+(?:\.\d+)?) 分钟")}
QUESTION = {"en": "**Question.**", "zh": "**问题。**"}
# A bold phrase that ends a sentence or a clause is a lead-in ("**Set:**", "**Question.**",
# "**Where do B10's tokens land?**"); any other bold phrase names a control on the page.
LEAD_IN_ENDS = tuple(".:?。：？")
BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
TABS = ROOT / "ui" / "tabs"


def _text(lang: str) -> str:
    return WALKTHROUGHS[lang].read_text(encoding="utf-8")


def _sections(lang: str) -> list[tuple[int, bool, float]]:
    return [(int(n), bool(opt), float(m)) for n, opt, m in SECTION.findall(_text(lang))]


def _bodies(lang: str) -> dict[int, str]:
    """Each numbered section's text, its heading included, by number."""
    text = _text(lang)
    starts = [m.start() for m in HEADING.finditer(text)] + [len(text)]
    bodies = {}
    for start, end in zip(starts, starts[1:]):
        number = re.match(r"## (\d+)\.", text[start:end])
        if number:
            bodies[int(number.group(1))] = text[start:end]
    return bodies


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_the_minutes_add_up_to_what_the_walkthrough_promises(lang):
    text = _text(lang)
    sections = _sections(lang)
    assert [n for n, _, _ in sections] == list(range(1, len(sections) + 1))
    core = [m for _, opt, m in sections if not opt]
    optional = [m for _, opt, m in sections if opt]
    assert sum(core) == float(TITLE[lang].search(text).group(1))
    assert sum(optional) == float(OPTIONAL_TOTAL[lang].search(text).group(1))
    # The core first, then only optional sections.
    flags = [opt for _, opt, _ in sections]
    assert flags == sorted(flags), "a core section after an optional one"


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_each_core_section_asks_one_question(lang):
    bodies = _bodies(lang)
    for number, optional, _ in _sections(lang):
        if not optional:
            body = bodies[number].split("\n---\n")[0]           # the wrap-up after the core
            assert body.count(QUESTION[lang]) == 1, (lang, number)


def test_both_languages_have_the_same_sections_and_minutes():
    assert _sections("en") == _sections("zh")


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_every_picture_and_recorded_run_named_exists(lang):
    text = _text(lang)
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert pictures
    for picture in pictures:
        assert (DOCS / picture).resolve().is_file(), picture
    recorded = {p.stem for p in (ROOT / "assets" / "recorded").glob("*.json")}
    named = set(re.findall(r"`(h200-[a-z0-9-]+)`", text))
    assert named and named <= recorded, named - recorded


def _names(label: str) -> set[str]:
    """What a reader may call a control with this label: the label, the label without its
    arrows, and its head before an explanation ("KV pages (16 tokens each; ...)" -> "KV pages",
    "More settings: model, ..." -> "More settings")."""
    label = " ".join(label.split())
    names = {label, label.strip(" ▶◀")}
    for cut in (" (", "（", ":", "："):
        if cut in label:
            names.add(label.split(cut)[0].strip(" ▶◀"))
    return names


def _page_controls() -> set[str]:
    """Every name a control on the page goes by, in both languages: the labels of the strings the
    tabs (``ui/tabs``) show, the folds of a run's results, the hazard lab's switches, the
    language switch, and each control's name in the page's own messages (``name_*``)."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in TABS.glob("*.py"))
    used = set(re.findall(r'"([a-z][a-z0-9_]*)"', source))
    prefixes = set(re.findall(r'f"([a-z][a-z0-9_]*)\{', source))     # f"preset_{name}"
    names: set[str] = set(LANGUAGES.values())
    for strings in STRINGS.values():
        for key, value in strings.items():
            if (key in used or key.startswith(("fold_", "name_"))
                    or any(key.startswith(prefix) for prefix in prefixes)):
                names |= _names(value)
    for switches in HAZARD_NAMES.values():
        for title, _ in switches.values():
            names |= _names(title)
    return names


def _controls_named(lang: str) -> list[str]:
    text = FENCE.sub("", _text(lang))
    bold = (" ".join(b.split()) for b in BOLD.findall(text))
    return [b for b in bold if not b.endswith(LEAD_IN_ENDS)]


def test_the_control_check_sees_what_it_should():
    names = _page_controls()
    assert {"Run", "运行", "Extra CPU work", "额外 CPU 工作", "More settings", "KV pages",
            "Step n", "Why: the article's formula with these runs' numbers",
            "Drop the finished-request guard", "A heavy scheduler: multi-step, k = 4"} <= names
    assert "seed" not in names and "Seed" not in names       # no such control on the live tab
    assert _controls_named("en") and _controls_named("zh")


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_every_control_named_is_on_the_page(lang):
    names = _page_controls()
    missing = sorted({c for c in _controls_named(lang) if c not in names})
    assert not missing, f"named in bold but not a control on the page: {missing}"


# Where the walkthrough lists what the "More settings" fold holds: every item must be a control
# in bold (a plain word there, such as a "seed" the tab does not have, would escape the check).
FOLD_LIST = {"en": re.compile(r"The fold \*\*More settings\*\*\s+holds the rest:(.*?)\.\s", re.S),
             "zh": re.compile(r"折叠区 \*\*更多设置\*\* 里是其余控件：(.*?)。", re.S)}


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_the_more_settings_list_names_only_controls(lang):
    listed = FOLD_LIST[lang].search(_text(lang))
    assert listed, "the walkthrough no longer lists what More settings holds"
    items = BOLD.findall(listed.group(1))
    rest = BOLD.sub("", listed.group(1))
    assert items and not re.sub(r"[\s,、]|\band\b|和", "", rest), rest


# --- figures quoted from recorded files --------------------------------------------------------
#
# Every number a section quotes in a section that names a recorded run is one the page shows
# for that run (``tests/page_figures.py``): the section's recorded runs are opened through the
# page's own handlers, zoomed to the steps the section asks for, and every figure the page
# then draws or prints is collected with its unit. A number the page does not show fails,
# unless it is what the record says it was run with (its config: batch, requests, extra CPU
# work) or, where the section names the peer benchmark's file, one of that file's numbers at
# the precision quoted (``test_the_peer_figures_quoted_are_the_benchmarks`` checks those one by
# one). A new figure cannot escape: there is no list of figures to forget to extend.

RECORDED_DIR = ROOT / "assets" / "recorded"
PEER_FILE = ROOT / "studies" / "results" / "peer-h100.json"
# "set **First step** 25 and **Last step** 26"; "**起始步**（First step）设 25，**结束步**…设 26"
WINDOW = {"en": re.compile(r"\*\*First step\*\*\s*(\d+)[^*]*\*\*Last step\*\*\s*(\d+)"),
          "zh": re.compile(r"\*\*起始步\*\*[^0-9*]*?(\d+)[^*]*\*\*结束步\*\*[^0-9*]*?(\d+)")}
# Chinese puts the unit and the term where its grammar does: compare the numbers there.
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _recorded_stems() -> set[str]:
    return {p.stem for p in RECORDED_DIR.glob("*.json")}


def _recorded_sections(lang: str) -> list[tuple[int, list[str], str]]:
    """(number, the recorded runs it names, its text) of each section naming a recorded run."""
    found = []
    for number, body in _bodies(lang).items():
        stems = sorted(set(re.findall(r"`([a-z0-9-]+)`", body)) & _recorded_stems())
        if stems:
            found.append((number, stems, body))
    return found


def _shown(stems: list[str], lang: str, body: str) -> str:
    windows = [(int(a), int(b)) for a, b in WINDOW[lang].findall(body)]
    return "\n".join(page_figures.page_text(stem, lang, windows) for stem in stems)


def _not_on_the_page(stems: list[str], lang: str, body: str) -> list[str]:
    """The figures ``body`` quotes that the page does not show for ``stems``."""
    shown = page_figures.figures_in(_shown(stems, lang, body))
    configs = [v for stem in stems for v in page_figures.record_values(stem)]
    peer = page_figures.file_values(PEER_FILE) if PEER_FILE.name in body else []
    missing = []
    for number, unit in sorted(page_figures.quoted_figures(body)):
        if (number, unit) in shown:
            continue
        if (not unit and page_figures.rounds_to(number, configs)) \
                or page_figures.rounds_to(number, peer):
            continue
        missing.append(number + unit)
    return missing


RECORDED_SECTIONS = [(lang, number) for lang in WALKTHROUGHS
                     for number, _, _ in _recorded_sections(lang)]


def test_the_sections_that_name_recorded_runs_are_found():
    assert {number for _, number in RECORDED_SECTIONS} >= {7, 8, 14, 18}
    assert RECORDED_SECTIONS.count(("en", 8)) == RECORDED_SECTIONS.count(("zh", 8)) == 1


@pytest.mark.parametrize("lang, number", RECORDED_SECTIONS)
def test_every_figure_a_section_quotes_about_a_recorded_run_is_on_the_page(lang, number):
    pytest.importorskip("gradio")
    [(stems, body)] = [(s, b) for n, s, b in _recorded_sections(lang) if n == number]
    missing = _not_on_the_page(stems, lang, body)
    assert not missing, f"section {number} ({lang}) quotes figures the page does not show " \
                        f"for {stems}: {missing}"


def test_the_figure_check_finds_a_figure_of_another_recording():
    """Section 8 as it was: the busy figures of another recording of the same work, and the
    kernel lane's busy of that one, are found; the page's own are not."""
    pytest.importorskip("gradio")
    stems = ["h200-smollm-eager-kernels", "h200-smollm-graph-kernels"]
    old = ("set **First step** 25 and **Last step** 26. The GPU is busy (98.0% normal, 98.4% "
           "overlap), its kernels only 5.1% (3.3%); now 97.4% and 3.9%, a step of 1.90 ms, "
           "on H200 with Qwen2.5-0.5B in section 9, `h200-x 3.3%` and ![a](b-4.5.png).")
    assert _not_on_the_page(stems, "en", old) == ["3.3%", "5.1%", "98.0%", "98.4%"]


# Where a section says what the page says, in quotes, the page says it: a lane's label ("kernels:
# engine stream · busy 3.9%"), a button ("Same work, 3 engines side by side").
QUOTED = re.compile(r"[“「]([^”」]+)[”」]|\"([^\"]+)\"")


@pytest.mark.parametrize("lang, number", RECORDED_SECTIONS)
def test_what_a_section_quotes_the_page_saying_the_page_says(lang, number):
    pytest.importorskip("gradio")
    [(stems, body)] = [(s, b) for n, s, b in _recorded_sections(lang) if n == number]
    shown = " ".join(_shown(stems, lang, body).split())
    quoted = [" ".join((a or b).split()) for a, b in QUOTED.findall(FENCE.sub("", body))]
    assert [q for q in quoted if q not in shown] == [], (lang, number)


# A colour the lessons give a phase ("the grey *wait* span", "粉紫色的 *launch* 段") is the colour the
# page draws it in (``viz.style.PHASE_COLORS``), by hue and lightness.
COLOUR = {"en": re.compile(r"\b((?:light |dark )?(?:[a-z]+-)?(?:red|orange|brown|yellow|green|"
                           r"teal|blue|navy|purple|lilac|violet|plum|pink|grey|gray))\s+"
                           r"[*`](\w+)[*`]"),
          "zh": re.compile(r"((?:浅|深)?(?:[红橙棕黄绿青蓝紫粉灰]){1,2})色的?\s*[*`](\w+)[*`]")}
HUES = {"red": (345, 15), "orange": (15, 45), "brown": (15, 55), "yellow": (45, 70),
        "green": (70, 165), "teal": (165, 200), "blue": (195, 260), "navy": (200, 250),
        "purple": (260, 320), "lilac": (260, 320), "violet": (255, 300), "plum": (280, 330),
        "pink": (290, 350), "红": (345, 15), "橙": (15, 45), "棕": (15, 55), "黄": (45, 70),
        "绿": (70, 165), "青": (165, 200), "蓝": (195, 260), "紫": (260, 320), "粉": (290, 350)}


def _looks(hex_colour: str, words: str) -> bool:
    """Whether a colour (``#rrggbb``) is what ``words`` call it: each hue word names its hue
    (one of several, "pink-lilac", "粉紫"), grey a colour without hue, light and dark its
    lightness, brown and navy a dark one."""
    import colorsys

    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    hue, light, sat = colorsys.rgb_to_hls(r, g, b)
    hue *= 360
    if any(w in words for w in ("grey", "gray", "灰")):
        return sat < 0.12 or max(r, g, b) - min(r, g, b) < 0.06
    if ("light" in words or "浅" in words) and light < 0.6:
        return False
    if ("dark" in words or "深" in words or "navy" in words or "brown" in words) and light > 0.45:
        return False
    named = [w for w in HUES if w in words]
    return bool(named) and any(lo <= hue <= hi if lo < hi else hue >= lo or hue <= hi
                               for lo, hi in (HUES[w] for w in named))


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_every_colour_a_lesson_gives_a_phase_is_the_one_the_page_draws(lang):
    from viz.style import PHASE_COLORS

    named = [(words, phase) for words, phase in COLOUR[lang].findall(_flat(_text(lang)))
             if phase in PHASE_COLORS]
    assert len(named) >= 3, named            # the pattern still reads the lessons' colours
    wrong = [(words, phase, PHASE_COLORS[phase]) for words, phase in named
             if not _looks(PHASE_COLORS[phase], words)]
    assert not wrong, wrong


def test_the_colour_check_tells_blue_from_pink_lilac():
    from viz.style import PHASE_COLORS

    launch = PHASE_COLORS["launch"]
    assert _looks(launch, "pink-lilac") and _looks(launch, "粉紫")
    assert not _looks(launch, "blue") and not _looks(launch, "蓝")
    assert _looks(PHASE_COLORS["schedule"], "dark blue") and _looks(PHASE_COLORS["wait"], "grey")
    assert _looks(PHASE_COLORS["copy"], "light green")


def _sections_naming(lang: str, name: str) -> str:
    return "\n".join(body for body in _bodies(lang).values() if name in body)


def _x(ratio: float) -> str:
    return f"{ratio:.2f}×"


@pytest.mark.parametrize("stem", ["h200-minisglang-qwen05-b16", "h200-sglang-qwen05-b16"])
def test_the_hook_costs_quoted_are_the_records_notes(stem):
    record = json.loads((ROOT / "assets" / "recorded" / f"{stem}.json").read_text())
    costs = {note["loop"]: note["cost_pct"] for note in record["notes"]
             if note.get("key") == "hook_cost"}
    for lang in WALKTHROUGHS:
        said = _sections_naming(lang, f"`{stem}`")
        for loop in ("normal", "overlap"):
            assert f"{costs[loop]:+.1f}%" in said, (lang, loop)


def _peer_rows() -> list[dict[str, Any]]:
    """Batch 1 on the 0.5B shape, from the call that ran Mini-SGLang (ours is timed in every
    call: its rows of that call), Mini-SGLang in its best configuration there."""
    rows = [r for r in json.loads(PEER_FILE.read_text())["rows"]
            if r["batch"] == 1 and r["model"] == "qwen2.5-0.5b-shape"]
    call = next(r["where"]["call"] for r in rows if r["engine"] == "Mini-SGLang")
    fastest = max((r for r in rows if r["engine"] == "Mini-SGLang" and r["loop"] == "overlap"
                   and r["recording"] == "off"), key=lambda r: r["tok_s_median"])
    return [r for r in rows if r["where"]["call"] == call
            and (r["engine"] != "Mini-SGLang" or r["config"] == fastest["config"])]


def _peer(engine: str, loop: str, recording: str = "on") -> dict[str, Any]:
    rows = [r for r in _peer_rows() if r["engine"] == engine and r["loop"] == loop
            and r["recording"] == recording]
    assert len(rows) == 1, (engine, loop, recording)
    return rows[0]


def test_the_peer_figures_quoted_are_the_benchmarks():
    """Section 18: forwards, CPU per step, steps, overlap's gain per step and tokens/s at batch
    1, as ``python -m studies peers mini-sglang`` wrote them."""
    def gain(engine: str) -> str:
        return _x(_peer(engine, "normal")["step_ms"] / _peer(engine, "overlap")["step_ms"])

    figures = [f"{_peer('ours', 'normal')['forward_ms']:.3f} ms",
               f"{_peer('Mini-SGLang', 'normal')['forward_ms']:.3f} ms",
               f"{_peer('Mini-SGLang', 'overlap')['forward_ms']:.3f} ms",
               f"{_peer('ours', 'overlap')['forward_ms']:.3f} ms",
               f"{_peer('Mini-SGLang', 'normal')['cpu_ms']:.2f}",
               f"{_peer('Mini-SGLang', 'normal')['step_ms']:.2f}",
               f"{_peer('ours', 'normal')['cpu_ms']:.2f}",
               f"{_peer('ours', 'normal')['step_ms']:.2f}",
               gain("Mini-SGLang"), gain("ours"),
               f"{_peer('ours', 'normal')['tok_s_median']:.0f}",
               f"{_peer('ours', 'overlap')['tok_s_median']:.0f}",
               f"{_peer('Mini-SGLang', 'normal', 'off')['tok_s_median']:.0f}",
               f"{_peer('Mini-SGLang', 'overlap', 'off')['tok_s_median']:.0f}"]
    for lang in WALKTHROUGHS:
        said = _sections_naming(lang, "peer-h100.json")
        numbers = NUMBER.findall(said)
        for figure in figures:
            assert NUMBER.search(figure).group(0) in numbers, (lang, figure)


def test_the_serving_figures_quoted_are_the_measurements():
    """Section 16: the serving tab's measurement, medians over its repeats."""
    rows = json.loads((ROOT / "assets" / "serving" / "serving-cpu-bundled-extra4000.json")
                      .read_text())["rows"]

    def median(loop: str, rate: float, key: str) -> float:
        return statistics.median(r[key] for r in rows
                                 if r["loop"] == loop and r["request_rate"] == rate)

    figures = [f"{median('normal', 2.0, 'output_tokens_per_s'):.0f}",
               f"{median('overlap', 2.0, 'output_tokens_per_s'):.0f}",
               f"{median('normal', 2.0, 'itl_ms_p50'):.1f}",
               f"{median('overlap', 2.0, 'itl_ms_p50'):.1f}",
               f"{median('normal', 8.0, 'ttft_ms_p50'):.0f}",
               f"{median('overlap', 8.0, 'ttft_ms_p50'):.0f}",
               f"{median('overlap', 8.0, 'output_tokens_per_s'):.0f}",
               f"{median('normal', 8.0, 'output_tokens_per_s'):.0f}"]
    for lang in WALKTHROUGHS:
        numbers = NUMBER.findall(_bodies(lang)[16])
        for figure in figures:
            assert figure in numbers, (lang, figure)


# A real system's source path as the texts cite it: ``python/sglang/srt/managers/scheduler.py``,
# ``sglang/srt/utils/nvtx_utils.py`` (a wheel's layout: ``python/`` left out),
# ``vllm/v1/core/sched/async_scheduler.py``, ``python/minisgl/scheduler/`` (a folder).
PEER_PATH = re.compile(r"(?<![\w/.-])((?:python/)?(?:sglang|minisgl)/[\w/]*(?:\.py)?"
                       r"|(?:vllm|flashinfer)/[\w/]*(?:\.py)?)")
# "SGLang PR 18803", "SGLang PRs 26380, 28363, 31687", "SGLang PR 13713、13916", "Mini-SGLang PR 142".
PEER_REFERENCE = re.compile(r"(SGLang|Mini-SGLang|vLLM|FlashInfer) (PR|issue)s? "
                            r"(\d+(?:(?:,\s*|\s+and\s+|、)\d+)*)")
# "`path` lines 1664-1679 and 1762-1766", "`path` line 15"; "`path` 第 1664–1679 行和第 1762–1766 行".
LINE_RANGES = {"en": re.compile(r"`([\w/.]+\.py)`\s+lines? (\d+)(?:-(\d+))?(?: and (\d+)-(\d+))?"),
               "zh": re.compile(r"`([\w/.]+\.py)`\s*第 (\d+)(?:–(\d+))? 行(?:和第 (\d+)–(\d+) 行)?")}
CITING = ["README.md", "app.py", "docs/*.md", "texts/*.py", "engine/**/*.py", "record/**/*.py",
          "viz/*.py", "ui/**/*.py", "bench/*.py", "studies/**/*.py", "studies/**/*.sh",
          "scripts/*.py"]


def _citing_files() -> list[Path]:
    skip = {DOCS / "citations.md", Path(check_citations.__file__).resolve()}
    return sorted({path for pattern in CITING for path in ROOT.glob(pattern)} - skip)


def _peer_paths(text: str) -> set[str]:
    """The real systems' files and folders ``text`` cites, each as its repository spells it."""
    found = set()
    for path in PEER_PATH.findall(text):
        if path.startswith(("sglang/", "minisgl/")):
            path = "python/" + path
        if path.endswith(".py") or (path.endswith("/") and path.count("/") >= 3):
            found.add(path)
    return found


def test_every_cited_path_and_reference_is_in_the_citations_list():
    listed = check_citations.read()
    paths = {row.path for row in listed.files}
    for path in _citing_files():
        text = path.read_text(encoding="utf-8")
        for cited in _peer_paths(text):
            assert cited in paths, f"{path.relative_to(ROOT)} cites {cited}, not in docs/citations.md"
        for system, kind, numbers in PEER_REFERENCE.findall(text):
            for number in re.findall(r"\d+", numbers):
                assert f"{kind} {number}" in listed.references.get(system, ()), \
                    f"{path.relative_to(ROOT)} cites {system} {kind} {number}, not in docs/citations.md"


@pytest.mark.parametrize("lang", WALKTHROUGHS)
def test_every_cited_line_range_is_in_the_citations_list(lang):
    listed = {(row.path, row.lines) for row in check_citations.read().files}
    cited = LINE_RANGES[lang].findall(_text(lang))
    assert len(cited) >= 8, cited        # the pattern still reads the walkthrough's citations
    for path, *bounds in cited:
        first, last, first_2, last_2 = (int(b) if b else None for b in bounds)
        assert (path, (first, last or first)) in listed, (lang, path, first, last)
        if first_2:
            assert (path, (first_2, last_2)) in listed, (lang, path, first_2, last_2)


def test_every_system_in_the_list_names_the_code_it_was_read_at():
    listed = check_citations.read()
    systems = {row.system for row in listed.files} | set(listed.references)
    for system in systems:
        read_at = listed.read_at.get(system, "")
        assert listed.commit(system) or re.search(r"sha256 `[0-9a-f]{64}`", read_at), system
    for row in listed.files:
        assert row.lines is None or (row.inside and row.shows), row   # a range says what it holds


def test_the_citation_checker_finds_a_wrong_line_a_wrong_function_and_a_missing_name(tmp_path):
    source = tmp_path / "python" / "peer" / "loop.py"
    source.parent.mkdir(parents=True)
    source.write_text("class Scheduler:\n"
                      "    def step(\n"
                      "        self,\n"
                      "    ) -> None:\n"
                      "        batch = self.schedule()\n"
                      "        self.launch(batch)\n"
                      "\n"
                      "    def finish(self):\n"
                      "        self.free()\n")
    text = check_citations._source_text(tmp_path, "python/peer/loop.py", None)

    def row(lines, inside, *shows):
        return check_citations.FileCitation("Peer", "python/peer/loop.py", lines, inside, shows)

    assert check_citations.check(row((5, 6), "step", "self.launch(batch)"), text) == []
    assert check_citations.check(row(None, "", "def finish"), text) == []
    assert check_citations.check(row((9, 9), "finish", "self.free()"), text) == []
    assert check_citations.check(row((8, 9), "finish", "self.free()"), text) == []
    assert check_citations.check(row((9, 9), "step", "self.free()"), text)      # wrong function
    assert check_citations.check(row((5, 5), "step", "self.launch"), text)      # wrong lines
    assert check_citations.check(row(None, "", "def retract"), text)            # missing name
    assert check_citations.check(row((40, 41), "step", "x"), text)              # past the end
    assert check_citations._source_text(tmp_path, "python/peer/gone.py", None) is None
    # a wheel's layout: no python/ folder
    assert check_citations._source_text(tmp_path / "python", "python/peer/loop.py", None) == text


ARTICLE_TITLE = "SGLang 双 Stream 重叠调度：如何把 CPU 后处理藏到 GPU 计算背后"
ARTICLE_CODE = "python/minisgl/scheduler/scheduler.py"
# A path into the folder beside the checkout, named "shared", written relative or quoted.
OUTSIDE = re.compile(r"(?:^|[\s`(\"'])(?:\.\./)*shared/", re.M)
TEXT_SUFFIXES = {".py", ".md", ".sh", ".txt", ".toml", ".cfg", ".yml", ".yaml"}
SKIPPED_DIRS = {".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", ".mypy_cache",
                "data", "out", "tmp"}


def _repository_texts() -> list[Path]:
    return [p for p in ROOT.rglob("*")
            if p.suffix in TEXT_SUFFIXES and p.is_file()
            and not SKIPPED_DIRS.intersection(p.relative_to(ROOT).parts[:-1])
            and not p.relative_to(ROOT).parts[0].startswith(".")]


def test_no_file_points_a_reader_at_a_folder_outside_the_repository():
    """A clone holds only the repository: nothing may send its reader to the folder beside it."""
    named = [f"{p.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
             for p in _repository_texts()
             for text in [p.read_text(encoding="utf-8", errors="replace")]
             for m in OUTSIDE.finditer(text)]
    assert not named, named


@pytest.mark.parametrize("where", ["README", "page-en", "page-zh", "walkthrough-en", "walkthrough-zh"])
def test_the_article_is_named_by_its_title_and_the_code_it_reads(where):
    text = {"README": (ROOT / "README.md").read_text(encoding="utf-8"),
            "page-en": STRINGS["en"]["intro"], "page-zh": STRINGS["zh"]["intro"],
            "walkthrough-en": _text("en"), "walkthrough-zh": _text("zh")}[where]
    flat = re.sub(r"\s+", "", text)        # a title may wrap across lines
    assert re.sub(r"\s+", "", ARTICLE_TITLE) in flat
    assert ARTICLE_CODE in text


# Where a text says what the forward waits for, it says both edges: its own upload, and (by the
# engine stream's order) the forward before it, which wrote its input tokens into the token pool.
ONLY_WAIT = re.compile(r"waits? only for|waits? for [^.]*? alone|只等|只需等")
STREAM_ORDER = re.compile(r"stream order|stream's order|runs its work in order|stream 顺序|按顺序执行")


def _flat(text: str) -> str:
    """One line: quote markers gone, runs of white space one space."""
    return re.sub(r"\s+", " ", re.sub(r"^> ?", "", text, flags=re.M))


def _paragraphs(text: str) -> list[str]:
    return [_flat(p) for p in re.split(r"\n\s*\n|\n> ?\n", text) if p.strip()]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_claim_of_what_the_forward_waits_for_names_the_token_pool_edge(lang):
    texts_of_lang = [_text(lang)] + [v for v in STRINGS[lang].values() if isinstance(v, str)]
    for text in texts_of_lang:
        for paragraph in _paragraphs(text):
            if ONLY_WAIT.search(paragraph) and re.search(r"upload|上传", paragraph):
                assert STREAM_ORDER.search(paragraph), paragraph


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_forward_waits_for_its_upload_and_the_forward_before_it(lang):
    """Section 3's answer and the page's 'what to look for' both say the two edges."""
    answer = _bodies(lang)[3]
    help_text = STRINGS[lang]["timeline_help"]
    for text in (_flat(answer), _flat(help_text)):
        assert re.search(r"upload|上传", text)
        assert STREAM_ORDER.search(text), text[:200]
    assert re.search(r"forward\(B10\)", answer)
