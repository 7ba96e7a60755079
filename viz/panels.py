"""HTML panels beside the timelines: the metrics table, the formula, the generated texts. Numbers
come from each run's ``metrics``; this module only formats them and divides two of them. Every
value cell carries ``data-mode`` / ``data-metric`` / ``data-value``: the raw number."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from record.gpu_time import gpu_time
from record.kernel_lanes import is_kernel_lane
from record.run_record import loop_of
from record.schema import Loop, RecordDict, RunDict
from texts import STRINGS, t
from viz.formula import formula_html, multistep_html, ratio_pairs
from viz.labels import display_labels, label_detail


def _fmt(spec: str, scale: float = 1.0, suffix: str = "") -> Callable[[float], str]:
    return lambda v: f"{v * scale:{spec}}{suffix}"


_COUNT, _PCT, _US_AS_MS, _MS = _fmt(",.0f"), _fmt(".1f", 100, "%"), _fmt(".2f", 1e-3), _fmt(".2f")
_ROWS: list[tuple[str, Callable[[float], str]]] = [
    ("tokens_per_s", _fmt(",.1f")), ("decode_tokens_per_s", _fmt(",.1f")),
    ("output_tokens", _COUNT),
    ("wall_s", lambda v: f"{v:.3g}" if v < 100 else f"{v:,.0f}"),   # 0.0283, 1.83, 12.3
    ("steps", _COUNT),
    ("gpu_busy_frac", _PCT),                  # all stream lanes
    ("engine_busy_frac", _PCT),               # the engine stream alone
    ("active_busy_frac", _PCT),               # only while requests were in
    ("idle_us_total", _fmt(",.1f", 1e-3)), ("idle_gap_count", _COUNT),
    ("mean_step_us", _US_AS_MS), ("steady_step_us", _US_AS_MS),
    ("steady_busy_frac", _PCT), ("steady_engine_busy_frac", _PCT),
    ("decode_gap_us_p50", _fmt(".3f", 1e-3)), ("mean_idle_per_step_us", _US_AS_MS),
    ("t_fwd_us", _US_AS_MS), ("t_cpu_us", _US_AS_MS),
    ("gpu_wait_us", _US_AS_MS),               # an imported trace's, not CPU work
    ("ttft_ms_mean", _fmt(".1f")), ("itl_ms_mean", _MS), ("itl_ms_p99", _MS),
    ("tpot_ms_mean", _MS), ("wasted_tokens", _COUNT),
    # KV memory (runs of an engine with the prefix cache; a trace has none: "–")
    ("prefix_hit_rate", _PCT), ("prefix_hit_tokens", _COUNT), ("retractions", _COUNT),
]

# The rows a student needs, in the order they ask; the rest are one click away ("All metrics").
KEY_ROWS = ("idle_us_total", "gpu_busy_frac", "steady_step_us", "t_fwd_us", "t_cpu_us",
            "decode_tokens_per_s")

_STYLE = """<style>
.ov-table {border-collapse: collapse; width: 100%; font-size: 13px; margin: 4px 0 10px 0;}
.ov-table th, .ov-table td {padding: 4px 10px; border-bottom: 1px solid rgba(128,128,128,.25);}
.ov-table th {text-align: left; font-weight: 600;}
.ov-table td.num, .ov-table th.num {text-align: right; font-variant-numeric: tabular-nums;}
.ov-table td.ratio {font-weight: 600;}
.ov-formula {font-size: 13px; line-height: 1.6; padding: 8px 12px; border-radius: 6px;
  background: rgba(49,130,189,.08); border-left: 3px solid #3182bd; margin-bottom: 8px;}
.ov-formula b {font-variant-numeric: tabular-nums;}
.ov-badge {padding: 1px 7px; border-radius: 9px; font-size: 11px; font-weight: 600;}
.ov-stop {background: rgba(49,163,84,.18);} .ov-length {background: rgba(253,141,60,.22);}
.ov-text {font-family: ui-monospace, Menlo, monospace; font-size: 12px; overflow-wrap: anywhere;
  word-break: break-word;}
.ov-scroll {max-height: 420px; overflow-y: auto;}
details.ov-fold {margin: 4px 0 10px 0;}
details.ov-fold > summary {cursor: pointer; font-weight: 600; font-size: 13px; padding: 4px 0;}
</style>"""


def metrics_html(runs: list[RunDict], lang: str = "en") -> str:
    """One table (a column per run, plus ratios to the normal run) and the formula with
    measured terms."""
    runs = [run for run in runs if run.get("metrics")]
    if not runs:
        return ""
    pairs = ratio_pairs(runs)
    # Busy while requests were in says something only where a run had time without any.
    quiet = any(gpu_time(run).active_share is not None for run in runs)
    labels = [html.escape(label) for label in display_labels(runs, lang)]
    head = "".join(f'<th class="num">{label}</th>' for label in labels)
    for a, b in pairs:
        ratio = t(lang, "ratio").format(a=labels[a], b=labels[b])
        head += f'<th class="num">{ratio}</th>'
    rows: dict[str, str] = {}
    for key, fmt in _ROWS:
        values = [run["metrics"].get(key) for run in runs]
        if all(v is None for v in values) or (key == "active_busy_frac" and not quiet):
            continue
        cells = "".join(_value_cell(run, key, v, fmt) for run, v in zip(runs, values))
        cells += "".join(_ratio_cell(values[a], values[b]) for a, b in pairs)
        rows[key] = f"<tr><td>{html.escape(t(lang, 'm_' + key))}</td>{cells}</tr>"
    other_rows = [row for key, row in rows.items() if key not in KEY_ROWS]
    table = _table(head, [rows[key] for key in KEY_ROWS if key in rows], lang)
    if pairs:                       # which way a ratio is better depends on the row
        table += f'<div class="ov-why" data-block="ratio-note">{t(lang, "ratio_note")}</div>'
    if other_rows:
        table += _fold(t(lang, "fold_all_metrics").format(n=len(other_rows)),
                       _table(head, other_rows, lang), "all-metrics")
    why = formula_html(runs, lang) + multistep_html(runs, lang)
    if why:                         # the lesson's claim, open above the table
        why = _fold(t(lang, "fold_formula"), why, "formula", opened=True)
    return _STYLE + _profiled_html(runs, lang) + why + table


def _table(head: str, rows: list[str], lang: str) -> str:
    return (f'<table class="ov-table"><thead><tr><th>{t(lang, "metric")}</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _fold(title: str, body: str, name: str, opened: bool = False) -> str:
    """``body`` under ``title``, one click away (or ``opened``: shown, one click folds it)."""
    return (f'<details class="ov-fold" data-fold="{name}"{" open" if opened else ""}>'
            f"<summary>{title}</summary>{body}</details>")


def _profiled_html(runs: list[RunDict], lang: str) -> str:
    """A recording with kernel lanes ran torch.profiler over a few steps: say what that costs."""
    steps = [s["step"] for run in runs for s in run.get("spans", [])
             if is_kernel_lane(s["lane"]) and s.get("step", -1) >= 0]
    if not steps:
        return ""
    text = t(lang, "profiled_note").format(first=min(steps), last=max(steps))
    return f'<div class="ov-why" data-block="profiled">{text}</div>'


def _loop_name(run: RunDict) -> str:
    """"normal", "overlap", "multistep-3": a run's loop as a page attribute."""
    loop, k = loop_of(run)
    return f"{loop}-{k}" if loop == Loop.MULTISTEP else loop


def _value_cell(run: RunDict, key: str, value: Any, fmt: Callable[[float], str]) -> str:
    text = "–" if value is None else fmt(float(value))
    raw = "" if value is None else f"{float(value):.6g}"
    mode = html.escape(_loop_name(run))
    return (f'<td class="num" data-mode="{mode}" data-metric="{key}" data-value="{raw}">'
            f"{text}</td>")


def _ratio_cell(a: Any, b: Any) -> str:
    if a is None or b is None or float(a) == 0.0:
        return '<td class="num ratio">–</td>'
    return f'<td class="num ratio">{float(b) / float(a):.2f}×</td>'


def texts_html(runs: list[RunDict], lang: str = "en", limit: int = 256) -> str:
    """Every request's generated text (up to ``limit``), finish reasons, and whether runs agree."""
    runs = [run for run in runs if run.get("outputs")]
    if not runs:
        return ""
    outputs = runs[-1]["outputs"]
    shown = outputs[:limit]
    lagged = [(label, run) for label, run in zip(display_labels(runs, lang), runs)
              if any(out.get("wasted_steps") for out in run["outputs"])]
    rows = []
    for i, out in enumerate(shown):
        reason = str(out.get("finish_reason", ""))
        shown_as = t(lang, f"finish_{reason}") if f"finish_{reason}" in STRINGS["en"] else reason
        badge = (f'<span class="ov-badge ov-{html.escape(reason)}" title="{html.escape(reason)}">'
                 f'{html.escape(shown_as)}</span>')
        text = " ".join(str(out.get("text", "")).split())  # one line per request
        text = text or _ids_preview(out.get("token_ids", []))
        text = text if len(text) <= 240 else text[:240] + " …"
        tokens = f"{html.escape(str(out.get('prompt_tokens', '–')))} → {len(out.get('token_ids', []))}"
        wasted = "".join(f'<td class="num" data-wasted="{html.escape(_loop_name(run))}">'
                         f'{_wasted(run, i)}</td>' for _, run in lagged)
        rows.append(f'<tr><td class="num">{i}</td><td>{badge}</td><td class="num">{tokens}</td>'
                    f'{wasted}<td class="ov-text">{html.escape(text)}</td></tr>')
    head = "".join(f"<th>{t(lang, key)}</th>" for key in
                   ("col_request", "col_finish", "col_tokens"))
    head += "".join(f"<th>{html.escape(t(lang, 'col_wasted').format(label=label))}</th>"
                    for label, _ in lagged)
    head += f"<th>{t(lang, 'col_text')}</th>"
    note = f"<p>{t(lang, 'texts_count').format(shown=len(shown), total=len(outputs))}"
    if len(runs) >= 2:              # the loops of one engine against each other
        ids: dict[str, list[list]] = {}
        for run in runs:
            ids.setdefault(label_detail(run), []).append(
                [out.get("token_ids") for out in run["outputs"]])
        same = all(other == group[0] for group in ids.values() for other in group[1:])
        each = "_each" if len(ids) > 1 else ""      # engines side by side: theirs apart
        note += " " + t(lang, ("texts_same" if same else "texts_differ") + each)
    note += "</p>"
    return (_STYLE + note + f'<div class="ov-scroll"><table class="ov-table"><thead><tr>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _wasted(run: RunDict, i: int) -> str:
    outputs = run["outputs"]
    return html.escape(str(outputs[i].get("wasted_steps", 0))) if i < len(outputs) else "–"


def _ids_preview(token_ids: list[int]) -> str:
    """What a model without a tokenizer (random-weight presets) produced: its first ids."""
    shown = ", ".join(str(i) for i in token_ids[:16])
    return f"token ids [{shown}{', …' if len(token_ids) > 16 else ''}]"


def record_where(record: RecordDict) -> str:
    """"NVIDIA H200 · torch 2.11.0 · 2025-06-01": where and when a record was made."""
    env = record.get("env") or {}
    torch_version = env.get("torch_version")
    parts = [env.get("device_name"),
             torch_version and torch_version != "unknown" and f"torch {torch_version}",
             env.get("date") and str(env["date"])[:10]]      # the day (some records keep the time)
    return " · ".join(str(p) for p in parts if p and p != "unknown")


def record_maker(record: RecordDict) -> dict[str, str]:
    """Who made a record, as text keys and their values: ``engine_key`` where it names its engine
    (or a commit: then it is ours), ``code_key`` and ``commit`` or ``release``."""
    env = record.get("env") or {}
    commit = str(env.get("engine_commit") or "")
    commit = "" if commit == "unknown" else commit
    engine = env.get("engine") or (commit and "ours")
    out: dict[str, str] = {}
    if engine:
        out["engine_key"] = (f"engine_{engine}" if f"engine_{engine}" in STRINGS["en"]
                             else "engine_named")
        out["engine_name"] = str(engine)
    bare = commit.rstrip("+")
    if bare and all(c in "0123456789abcdef" for c in bare):       # a git commit, ``+``: edited
        out.update(code_key="record_commit", commit=bare[:7] + commit[len(bare):])
    elif commit:                                                     # a release: SGLang's wheel
        out.update(code_key="record_release", release=commit)
    return out


def record_label(record: RecordDict, lang: str = "en") -> str:
    """Who made a record in ``lang``, then where and when: "Mini-SGLang (the article's code) ·
    commit 20fcd7f · NVIDIA H200 · 2025-06-01"."""
    maker = record_maker(record)
    parts = [t(lang, key).format(**maker) for key in (maker.get("engine_key"),
                                                       maker.get("code_key")) if key]
    where = record_where(record)
    return " · ".join([*parts, where] if where else parts)
