"""What a reader sees of KV memory, as a specification: the memory chart (pages in use, cached
and free add up to the pool at every step; one mark per retraction, naming the request and the
step), a prefill's cache hits in its hover, the metrics table's memory rows only where a run has
them, a message (never an exception) for runs without a memory trace, and both languages.

The figures are drawn from the documented example record and from a real engine run under
memory pressure: eight rows on a pool that holds every prompt but not every full length, all
prompts behind one shared system prompt (as tests/test_kv_memory.py builds it).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="viz needs plotly")

from loops import loop_of

import texts  # noqa: E402
import viz  # noqa: E402
from texts import t  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PS = 4
CJK = re.compile(r"[\u4e00-\u9fff]")            # Chinese characters
CJK_TEXT = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")   # and full-width marks


def _figure(runs, lang="en"):
    return viz.memory_figure(runs, lang).to_plotly()       # plotly validates the dicts


def _areas(fig):
    """{row's y-axis: {kind: trace}} for the three stacked areas of each panel."""
    names = {t("en", f"mem_{k}"): k for k in ("used", "cached", "free")}
    names.update({t("zh", f"mem_{k}"): k for k in ("used", "cached", "free")})
    panels: dict[str, dict] = {}
    for trace in fig.data:
        if trace.name in names and trace.stackgroup:
            panels.setdefault(trace.yaxis, {})[names[trace.name]] = trace
    return panels


def _retraction_marks(fig):
    return [tr for tr in fig.data if tr.mode == "markers" and tr.legendgroup == "retraction"]


def _assert_pool_whole(fig, runs):
    """Every panel: used + cached + free == total_pages at every point, the y-axis is the pool,
    and the points are the recorded steps (plus the last one held to the run's end)."""
    panels = _areas(fig)
    assert len(panels) == len(runs)
    for (axis, areas), run in zip(sorted(panels.items()), runs):
        total = run["memory"]["total_pages"]
        assert set(areas) == {"used", "cached", "free"}
        sums = [u + c + f for u, c, f in zip(areas["used"].y, areas["cached"].y, areas["free"].y)]
        assert sums and all(s == total for s in sums)
        steps = run["memory"]["steps"]
        assert list(areas["used"].y[:-1]) == [s[2] for s in steps]
        assert [row[0] for row in areas["used"].customdata[:-1]] == [s[0] for s in steps]
        layout_axis = fig.layout["yaxis" + axis[1:]]
        assert list(layout_axis.range) == [0, total]


# ---- the documented example record ------------------------------------------------------------

def test_the_example_record_draws_a_whole_pool_per_run():
    record = json.loads((ROOT / "docs/example_record.json").read_text())
    runs = record["runs"]
    assert all("memory" in run for run in runs)
    fig = _figure(record)                        # a whole record, as the page holds it
    _assert_pool_whole(fig, runs)
    assert not _retraction_marks(fig)            # that small run never ran dry
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == len(runs)
    assert "0 retractions" in titles[0] and "% of prompt tokens" in titles[0]
    assert f"{runs[0]['memory']['total_pages']} KV pages" in titles[0]
    assert _figure(runs).to_dict() == fig.to_dict()             # a runs list draws the same


# ---- runs without a memory trace ---------------------------------------------------------------

@pytest.mark.parametrize("memory", [None, {}, {"total_pages": 8, "steps": []},
                                    {"total_pages": 8, "steps": [[1, 2.0]]},
                                    {"total_pages": "8", "steps": [[1, 2.0, 1, 1, 6]]}],
                         ids=["absent", "empty", "no-steps", "short-step", "bad-total"])
def test_a_run_without_memory_gets_a_message_in_the_readers_language(memory):
    run = {"loop": "imported", "decode_steps": 1, "extra_cpu_us": 0, "label": "trace.json",
           "spans": [], "metrics": {}}
    if memory is not None:
        run["memory"] = memory
    for lang in ("en", "zh"):
        fig = viz.memory_figure([run], lang).to_dict()
        assert not fig["data"]
        assert fig["layout"]["annotations"][0]["text"] == t(lang, "memory_none")
    assert CJK.search(t("zh", "memory_none")) and not CJK.search(t("en", "memory_none"))
    assert viz.memory_figure([], "en").to_dict()["layout"]["annotations"][0]["text"] == \
        t("en", "no_runs")


def test_only_the_runs_with_a_trace_get_a_panel():
    record = json.loads((ROOT / "docs/example_record.json").read_text())
    imported = {"loop": "imported", "decode_steps": 1, "extra_cpu_us": 0,
                "label": "trace.json", "spans": [], "metrics": {}}
    fig = _figure([imported, record["runs"][1]])
    assert len(_areas(fig)) == 1 and len(fig.layout.annotations) == 1


# ---- a prefill's cache hits in the timeline's hover --------------------------------------------

def _prefill_run(cached):
    span = {"lane": "engine_stream", "phase": "prefill", "step": 1, "start_us": 0.0,
            "end_us": 500.0, "batch_size": 1, "num_tokens": 512, "req_ids": [0]}
    if cached:
        span["cached_tokens"] = cached
    return {"loop": "overlap", "decode_steps": 1, "extra_cpu_us": 0, "label": "overlap",
            "lanes": ["cpu", "scheduler_stream",
            "engine_stream"], "gpu_lanes": ["scheduler_stream", "engine_stream"],
            "metrics": {}, "spans": [span], "outputs": []}


def _prefill_hover(run, lang):
    fig = viz.side_by_side_figure([run], lang=lang).to_plotly()
    (trace,) = [tr for tr in fig.data if tr.name == "prefill"]
    assert "customdata[7]" in trace.hovertemplate
    return trace.customdata[0][7]


def test_a_prefill_hover_says_how_many_prompt_tokens_came_from_the_cache():
    assert _prefill_hover(_prefill_run(32), "en") == \
        "<br>32 of 544 prompt tokens from the prefix cache"
    zh = _prefill_hover(_prefill_run(32), "zh")
    assert "544" in zh and "32" in zh and "前缀缓存" in zh
    assert _prefill_hover(_prefill_run(0), "en") == ""          # no hit: no line


# ---- the metrics table's memory rows -----------------------------------------------------------

MEMORY_KEYS = ("prefix_hit_rate", "prefix_hit_tokens", "retractions")


def test_memory_rows_appear_only_where_a_run_has_them():
    engine_run = {"loop": "overlap", "decode_steps": 1, "extra_cpu_us": 0, "label": "overlap",
                  "spans": [], "outputs": [],
                  "metrics": {"tokens_per_s": 10.0, "prefix_hit_rate": 0.25,
                              "prefix_hit_tokens": 96, "retractions": 3}}
    imported = {"loop": "imported", "decode_steps": 1, "extra_cpu_us": 0,
                "label": "trace.json", "spans": [], "outputs": [],
                "metrics": {"tokens_per_s": 0.0}}
    alone = viz.metrics_html([imported])
    assert not any(f'data-metric="{key}"' in alone for key in MEMORY_KEYS)
    both = viz.metrics_html([imported, engine_run])
    assert 'data-mode="overlap" data-metric="prefix_hit_rate" data-value="0.25">25.0%' in both
    assert 'data-mode="overlap" data-metric="retractions" data-value="3">3<' in both
    assert 'data-mode="imported" data-metric="retractions" data-value="">–<' in both
    assert t("en", "m_retractions") in both
    assert t("zh", "m_prefix_hit_rate") in viz.metrics_html([engine_run], "zh")


def test_every_memory_string_has_a_chinese_one():
    keys = [k for k in texts.STRINGS["en"]
            if k.startswith(("mem_", "memory_", "m_prefix", "m_retractions", "hover_cached"))]
    assert len(keys) >= 15
    for key in keys:
        en, zh = t("en", key), t("zh", key)
        assert zh != en and CJK_TEXT.search(zh), key
        # the same placeholders in both languages
        assert sorted(re.findall(r"\{(\w+)", en)) == sorted(re.findall(r"\{(\w+)", zh)), key
        assert sorted(re.findall(r"%\{[^}]+\}", en)) == sorted(re.findall(r"%\{[^}]+\}", zh)), key


# ---- a real engine run under memory pressure ---------------------------------------------------

@pytest.fixture(scope="module")
def pressured_runs(make_checkpoint):
    """The serial and the overlap loop on 16 requests behind one 24-token system prompt, 8 rows
    on a pool of three full requests' pages: the cache serves the system prompt again and
    requests retract."""
    from conftest import VOCAB

    from engine import Engine, EngineConfig, SamplingParams

    rng = random.Random(42)
    system = [rng.randrange(4, VOCAB) for _ in range(24)]
    prompts = [system + [rng.randrange(4, VOCAB) for _ in range(rng.randrange(1, 8))]
               for _ in range(16)]
    full = -(-(32 + 40) // PS)
    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cpu", max_batch_size=8,
                       max_seq_len=96, page_size=PS, num_pages=3 * full)
    runs = []
    with Engine(cfg) as eng:
        for overlap in (False, True):
            eng.clear_prefix_cache()
            res = eng.generate(prompts, SamplingParams(max_new_tokens=40, ignore_eos=True), loop_of(overlap))
            runs.append(json.loads(json.dumps(res.to_run_dict())))    # as a record holds it
    return runs


def test_a_pressured_run_draws_its_pool_and_every_retraction(pressured_runs):
    fig = _figure(pressured_runs)
    _assert_pool_whole(fig, pressured_runs)
    marks = _retraction_marks(fig)
    assert len(marks) == len(pressured_runs)
    for run, mark, title in zip(pressured_runs, marks, fig.layout.annotations):
        count = run["metrics"]["retractions"]
        assert count > 0 and len(mark.x) == count == len(run["memory"]["retractions"])
        step, t_us, rid = run["memory"]["retractions"][0]
        assert f"request {rid} retracted while step {step} was built" in mark.hovertext[0]
        assert list(mark.x) == pytest.approx([r[1] / 1000 for r in run["memory"]["retractions"]])
        assert f"{count} retractions" in title.text
        rate = 100 * run["metrics"]["prefix_hit_rate"]
        assert rate > 0 and f"served {rate:.0f}% of prompt tokens" in title.text
    # x is the timeline's clock: the panel ends where the run's last span ends
    last_end = max(s["end_us"] for s in pressured_runs[0]["spans"]) / 1000
    used = _areas(fig)["y"]["used"]
    assert used.x[-1] == pytest.approx(last_end) and used.x[0] < used.x[-1]


def test_a_pressured_run_in_chinese(pressured_runs):
    fig = _figure(pressured_runs, "zh")
    _assert_pool_whole(fig, pressured_runs)
    assert all(CJK.search(a.text) and "撤回" in a.text for a in fig.layout.annotations)
    named = [tr.name for tr in fig.data if tr.showlegend]
    assert named and all(CJK.search(name) for name in named)
    assert "请求" in _retraction_marks(fig)[0].hovertext[0]
    assert "第 %{customdata[0]} 步" in _areas(fig)["y"]["used"].hovertemplate


def test_a_pressured_runs_prefills_show_their_cache_hits(pressured_runs):
    for run in pressured_runs:
        hits = [s for s in run["spans"] if s["phase"] == "prefill" and s.get("cached_tokens")]
        assert hits, "the shared system prompt was found again"
        fig = viz.side_by_side_figure([run]).to_plotly()
        (trace,) = [tr for tr in fig.data if tr.name == "prefill"]
        lines = [c[7] for c in trace.customdata if c[7]]
        want = {f"<br>{s['cached_tokens']:,} of {s['cached_tokens'] + s['num_tokens']:,} "
                "prompt tokens from the prefix cache" for s in hits}
        assert set(lines) == want
    table = viz.metrics_html(pressured_runs)
    for run in pressured_runs:
        mode = run["loop"]
        assert (f'data-mode="{mode}" data-metric="retractions" '
                f'data-value="{run["metrics"]["retractions"]}"') in table
        assert f'data-mode="{mode}" data-metric="prefix_hit_tokens"' in table
