"""HTML panels beside the timelines: the metrics table, the formula, the generated texts.

Numbers come from each run's ``metrics`` (computed once by the engine and carried in the
record); this module only formats them. The one thing it derives is the ratio of two given
numbers: overlap over normal, and measured speedup next to the article's predicted one.
Every value cell carries ``data-mode`` / ``data-metric`` / ``data-value`` so tests (and curious
readers of the page source) can read the raw number rather than parse formatted text.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from viz.spans import display_labels
from viz.text import t

_MS = 1e-3
_ROWS: list[tuple[str, Callable[[float], str]]] = [
    ("tokens_per_s", lambda v: f"{v:,.1f}"),
    ("decode_tokens_per_s", lambda v: f"{v:,.1f}"),
    ("output_tokens", lambda v: f"{v:,.0f}"),
    ("wall_s", lambda v: f"{v:.2f}"),
    ("steps", lambda v: f"{v:,.0f}"),
    ("gpu_busy_frac", lambda v: f"{100 * v:.1f}%"),
    ("idle_us_total", lambda v: f"{v * _MS:,.1f}"),
    ("idle_gap_count", lambda v: f"{v:,.0f}"),
    ("mean_step_us", lambda v: f"{v * _MS:.2f}"),
    ("mean_idle_per_step_us", lambda v: f"{v * _MS:.2f}"),
    ("t_fwd_us", lambda v: f"{v * _MS:.2f}"),
    ("t_cpu_us", lambda v: f"{v * _MS:.2f}"),
    ("ttft_ms_mean", lambda v: f"{v:.1f}"),
    ("tpot_ms_mean", lambda v: f"{v:.2f}"),
]

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
.ov-text {font-family: ui-monospace, Menlo, monospace; font-size: 12px;}
</style>"""


def compared_pair(runs: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Indices (baseline, candidate): the normal and overlap runs, else the first two runs."""
    modes = [run.get("mode") for run in runs]
    if "normal" in modes and "overlap" in modes:
        return modes.index("normal"), modes.index("overlap")
    return (0, 1) if len(runs) == 2 else None


def metrics_html(runs: list[dict[str, Any]], lang: str = "en") -> str:
    """One table (a column per run, plus their ratio) and the formula with measured terms."""
    runs = [run for run in runs if run.get("metrics")]
    if not runs:
        return ""
    pair = compared_pair(runs)
    labels = [html.escape(label) for label in display_labels(runs)]
    head = "".join(f'<th class="num">{label}</th>' for label in labels)
    if pair:
        ratio = t(lang, "ratio").format(a=labels[pair[0]], b=labels[pair[1]])
        head += f'<th class="num">{ratio}</th>'
    rows = []
    for key, fmt in _ROWS:
        values = [run["metrics"].get(key) for run in runs]
        if all(v is None for v in values):
            continue
        cells = "".join(_value_cell(run, key, v, fmt) for run, v in zip(runs, values))
        if pair:
            cells += _ratio_cell(values[pair[0]], values[pair[1]])
        rows.append(f"<tr><td>{html.escape(t(lang, 'm_' + key))}</td>{cells}</tr>")
    table = (f'<table class="ov-table"><thead><tr><th>{t(lang, "metric")}</th>{head}</tr></thead>'
             f"<tbody>{''.join(rows)}</tbody></table>")
    return _STYLE + _formula_html(runs, pair, lang) + table


def _value_cell(run: dict[str, Any], key: str, value: Any, fmt: Callable[[float], str]) -> str:
    text = "–" if value is None else fmt(float(value))
    raw = "" if value is None else f"{float(value):.6g}"
    mode = html.escape(str(run.get("mode", "")))
    return (f'<td class="num" data-mode="{mode}" data-metric="{key}" data-value="{raw}">'
            f"{text}</td>")


def _ratio_cell(a: Any, b: Any) -> str:
    if a is None or b is None or float(a) == 0.0:
        return '<td class="num ratio">–</td>'
    return f'<td class="num ratio">{float(b) / float(a):.2f}×</td>'


def _formula_html(runs: list[dict[str, Any]], pair: tuple[int, int] | None, lang: str) -> str:
    base = runs[pair[0]] if pair else runs[0]
    names = display_labels(runs)
    base_name = names[pair[0]] if pair else names[0]
    m = base["metrics"]
    if base.get("mode") == "imported" or m.get("t_fwd_us") is None or m.get("t_cpu_us") is None:
        return ""  # a profiler trace has no scheduler phases to fill in T_sched + T_post
    fwd, cpu = m["t_fwd_us"] * _MS, m["t_cpu_us"] * _MS
    best = max(fwd, cpu)
    predicted = m.get("predicted_overlap_speedup")
    if predicted is None:
        predicted = (fwd + cpu) / best if best > 0 else 0.0
    lines = [
        f"<i>{html.escape(t(lang, 'formula_terms').format(label=base_name))}</i>",
        t(lang, "formula_serial").format(fwd=fwd, cpu=cpu, total=fwd + cpu),
        t(lang, "formula_overlap").format(fwd=fwd, cpu=cpu, best=best),
        "<b>" + t(lang, "formula_predicted").format(pred=predicted) + "</b>",
    ]
    if pair:
        a, b = runs[pair[0]]["metrics"], runs[pair[1]]["metrics"]
        if a.get("tokens_per_s") and b.get("tokens_per_s") is not None:
            measured = b["tokens_per_s"] / a["tokens_per_s"]
            text = t(lang, "formula_measured").format(
                a=html.escape(names[pair[0]]), b=html.escape(names[pair[1]]), meas=measured)
            lines.append(f'<b data-metric="measured_speedup" data-value="{measured:.6g}">'
                         f"{text}</b>")
    return '<div class="ov-formula">' + "<br>".join(lines) + "</div>"


def texts_html(runs: list[dict[str, Any]], lang: str = "en", limit: int = 4) -> str:
    """The first ``limit`` generated texts with finish reasons, and whether the runs agree."""
    runs = [run for run in runs if run.get("outputs")]
    if not runs:
        return ""
    shown = runs[-1]["outputs"][:limit]
    rows = []
    for i, out in enumerate(shown):
        reason = str(out.get("finish_reason", ""))
        badge = f'<span class="ov-badge ov-{html.escape(reason)}">{html.escape(reason)}</span>'
        text = " ".join(str(out.get("text", "")).split())  # one line per request
        text = text or _ids_preview(out.get("token_ids", []))
        text = text if len(text) <= 240 else text[:240] + " …"
        tokens = f"{out.get('prompt_tokens', '–')} → {len(out.get('token_ids', []))}"
        rows.append(f'<tr><td class="num">{i}</td><td>{badge}</td><td class="num">{tokens}</td>'
                    f'<td class="ov-text">{html.escape(text)}</td></tr>')
    head = "".join(f"<th>{t(lang, key)}</th>" for key in
                   ("col_request", "col_finish", "col_tokens", "col_text"))
    note = ""
    if len(runs) >= 2:
        ids = [[out.get("token_ids") for out in run["outputs"]] for run in runs]
        same = all(other == ids[0] for other in ids[1:])
        note = f"<p>{t(lang, 'texts_same' if same else 'texts_differ')}</p>"
    return (_STYLE + note + f'<table class="ov-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _ids_preview(token_ids: list[int]) -> str:
    """What a model without a tokenizer (random-weight presets) produced: its first ids."""
    shown = ", ".join(str(i) for i in token_ids[:16])
    return f"token ids [{shown}{', …' if len(token_ids) > 16 else ''}]"


def record_label(record: dict[str, Any]) -> str:
    """"NVIDIA H200 · torch 2.11.0 · 2025-06-01": where and when a record was made."""
    env = record.get("env") or {}
    parts = [env.get("device_name"), env.get("torch_version") and f"torch {env['torch_version']}",
             env.get("date")]
    return " · ".join(str(p) for p in parts if p) or "unknown hardware"
