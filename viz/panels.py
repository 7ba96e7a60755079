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

from record.metrics import compare_runs, overlap_speedup
from record.run_record import loop_of
from viz.spans import display_labels
from viz.text import t

BELOW_PREDICTION = 0.8     # a measured speedup under this share of the prediction is explained

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
    ("steady_step_us", lambda v: f"{v * _MS:.2f}"),
    ("steady_busy_frac", lambda v: f"{100 * v:.1f}%"),
    ("mean_idle_per_step_us", lambda v: f"{v * _MS:.2f}"),
    ("t_fwd_us", lambda v: f"{v * _MS:.2f}"),
    ("t_cpu_us", lambda v: f"{v * _MS:.2f}"),
    ("ttft_ms_mean", lambda v: f"{v:.1f}"),
    ("itl_ms_mean", lambda v: f"{v:.2f}"),
    ("itl_ms_p99", lambda v: f"{v:.2f}"),
    ("tpot_ms_mean", lambda v: f"{v:.2f}"),
    ("wasted_tokens", lambda v: f"{v:,.0f}"),
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
.ov-text {font-family: ui-monospace, Menlo, monospace; font-size: 12px; overflow-wrap: anywhere;
  word-break: break-word;}
.ov-scroll {max-height: 420px; overflow-y: auto;}
</style>"""


def _loops(runs: list[dict[str, Any]]) -> list[str]:
    return [loop_of(run)[0] for run in runs]


def compared_pair(runs: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Indices (baseline, candidate): the normal and overlap runs, else the first two runs."""
    loops = _loops(runs)
    if "normal" in loops and "overlap" in loops:
        return loops.index("normal"), loops.index("overlap")
    return (0, 1) if len(runs) == 2 else None


def ratio_pairs(runs: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(baseline, candidate) for each ratio column: every other run against the normal run."""
    loops = _loops(runs)
    if "normal" in loops and len(runs) > 1:
        base = loops.index("normal")
        return [(base, i) for i in range(len(runs)) if i != base]
    pair = compared_pair(runs)
    return [pair] if pair else []


def metrics_html(runs: list[dict[str, Any]], lang: str = "en") -> str:
    """One table (a column per run, plus ratios to the normal run) and the formula with
    measured terms; with a multi-step run, its formula and its lag cost too."""
    runs = [run for run in runs if run.get("metrics")]
    if not runs:
        return ""
    pair = compared_pair(runs)
    pairs = ratio_pairs(runs)
    labels = [html.escape(label) for label in display_labels(runs, lang)]
    head = "".join(f'<th class="num">{label}</th>' for label in labels)
    for a, b in pairs:
        ratio = t(lang, "ratio").format(a=labels[a], b=labels[b])
        head += f'<th class="num">{ratio}</th>'
    rows = []
    for key, fmt in _ROWS:
        values = [run["metrics"].get(key) for run in runs]
        if all(v is None for v in values):
            continue
        cells = "".join(_value_cell(run, key, v, fmt) for run, v in zip(runs, values))
        cells += "".join(_ratio_cell(values[a], values[b]) for a, b in pairs)
        rows.append(f"<tr><td>{html.escape(t(lang, 'm_' + key))}</td>{cells}</tr>")
    table = (f'<table class="ov-table"><thead><tr><th>{t(lang, "metric")}</th>{head}</tr></thead>'
             f"<tbody>{''.join(rows)}</tbody></table>")
    return (_STYLE + _profiled_html(runs, lang) + _formula_html(runs, pair, lang)
            + multistep_html(runs, lang) + table)


def _profiled_html(runs: list[dict[str, Any]], lang: str) -> str:
    """A recording with kernel lanes ran torch.profiler over a few steps: say what that costs."""
    steps = [s["step"] for run in runs for s in run.get("spans", [])
             if str(s.get("lane", "")).startswith("kernels") and s.get("step", -1) >= 0]
    if not steps:
        return ""
    text = t(lang, "profiled_note").format(first=min(steps), last=max(steps))
    return f'<div class="ov-why" data-block="profiled">{text}</div>'


def _loop_name(run: dict[str, Any]) -> str:
    """"normal", "overlap", "multistep-3" (k included): a run's loop as a page attribute."""
    loop, k = loop_of(run)
    return f"{loop}-{k}" if loop == "multistep" else loop


def _value_cell(run: dict[str, Any], key: str, value: Any, fmt: Callable[[float], str]) -> str:
    text = "–" if value is None else fmt(float(value))
    raw = "" if value is None else f"{float(value):.6g}"
    mode = html.escape(_loop_name(run))
    return (f'<td class="num" data-mode="{mode}" data-metric="{key}" data-value="{raw}">'
            f"{text}</td>")


def _ratio_cell(a: Any, b: Any) -> str:
    if a is None or b is None or float(a) == 0.0:
        return '<td class="num ratio">–</td>'
    return f'<td class="num ratio">{float(b) / float(a):.2f}×</td>'


def _formula_html(runs: list[dict[str, Any]], pair: tuple[int, int] | None, lang: str) -> str:
    """The article's formula with the baseline's measured terms, the prediction, and the measured
    speedup beside it: both per decode step over the steady window (like with like). The whole
    run's tokens/s ratio follows, named as such, and a measurement far below its prediction is
    explained with what the run could see."""
    base_i = pair[0] if pair else 0
    base, names = runs[base_i], display_labels(runs, lang)
    m = base["metrics"]
    loop = loop_of(base)[0]
    if loop == "imported" or "notes" in base:
        return _trace_html(base, lang)
    if loop not in ("normal", "overlap") or m.get("t_fwd_us") is None or m.get("t_cpu_us") is None:
        return ""  # a multi-step run's CPU time per step is already shared by k forwards
    fwd, cpu = m["t_fwd_us"] * _MS, m["t_cpu_us"] * _MS
    predicted = overlap_speedup(m["t_fwd_us"], m["t_cpu_us"])
    lines = [
        f"<i>{html.escape(t(lang, 'formula_terms').format(label=names[base_i]))}</i>",
        t(lang, "formula_serial").format(fwd=fwd, cpu=cpu, total=fwd + cpu),
        t(lang, "formula_overlap").format(fwd=fwd, cpu=cpu, best=max(fwd, cpu)),
        "<b>" + t(lang, "formula_predicted").format(pred=predicted) + "</b>",
    ]
    if pair and _comparable(runs[pair[0]], runs[pair[1]]):
        a, b = html.escape(names[pair[0]]), html.escape(names[pair[1]])
        c = compare_runs(runs[pair[0]], runs[pair[1]])
        lines.append(f'<b data-metric="measured_speedup" data-value="{c["measured_speedup"]:.6g}">'
                     + t(lang, "formula_measured").format(a=a, b=b, meas=c["measured_speedup"])
                     + "</b>")
        lines.append(f'<span data-metric="whole_run_speedup" '
                     f'data-value="{c["whole_run_speedup"]:.6g}">'
                     + t(lang, "formula_whole").format(a=a, b=b, meas=c["whole_run_speedup"])
                     + "</span>")
        if c["measured_speedup"] < BELOW_PREDICTION * c["predicted_speedup"]:
            lines.append(_why_below(runs[pair[1]], b, lang))
    return '<div class="ov-formula">' + "<br>".join(lines) + "</div>"


def _trace_html(run: dict[str, Any], lang: str) -> str:
    """An imported trace: what the import found (its notes), and the formula with the terms the
    trace allows (the GPU's busy and waiting time per step), as a question: what would overlap
    give this engine?"""
    lines = []
    for note in run.get("notes") or []:
        if isinstance(note, dict) and isinstance(note.get("key"), str) \
                and note["key"].startswith("note_"):
            values = {k: html.escape(str(v)) for k, v in note.items() if k != "key"}
            try:
                lines.append(t(lang, note["key"]).format(**values))
            except (KeyError, IndexError):
                continue                              # a note this version does not know
    m = run["metrics"]
    fwd, cpu = (m.get("t_fwd_us") or 0.0) * _MS, (m.get("t_cpu_us") or 0.0) * _MS
    if fwd > 0:
        lines += [t(lang, "formula_serial").format(fwd=fwd, cpu=cpu, total=fwd + cpu),
                  t(lang, "formula_overlap").format(fwd=fwd, cpu=cpu, best=max(fwd, cpu)),
                  "<b>" + t(lang, "formula_trace_pred").format(
                      pred=overlap_speedup(m["t_fwd_us"], m.get("t_cpu_us") or 0.0)) + "</b>"]
    return ('<div class="ov-formula" data-block="trace">' + "<br>".join(lines) + "</div>"
            if lines else "")


def _comparable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["metrics"].get("steady_step_us")) and bool(b["metrics"].get("steady_step_us"))


def _why_below(run: dict[str, Any], name: str, lang: str) -> str:
    """What the run itself saw that the formula leaves out: other load on the machine, a device
    process that did not get its CPU, prefill inside the measured window."""
    host, m = run.get("host") or {}, run["metrics"]
    reasons = []
    if _is_number(host.get("other_cpu_frac")):
        reasons.append(t(lang, "why_other_load").format(
            share=100 * host["other_cpu_frac"], cpus=int(host.get("cpus") or 0)))
    if _is_number(host.get("device_cpu_frac")):
        reasons.append(t(lang, "why_device_cpu").format(share=100 * host["device_cpu_frac"]))
    if _is_number(m.get("steady_prefill_frac")) and m["steady_prefill_frac"] > 0:
        reasons.append(t(lang, "why_prefill").format(share=100 * m["steady_prefill_frac"]))
    text = t(lang, "why_below").format(label=name)
    if reasons:
        text += " " + t(lang, "why_measured") + " " + "; ".join(reasons) + "."
    return f'<span class="ov-why" data-block="why-below">{text}</span>'


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def multistep_html(runs: list[dict[str, Any]], lang: str = "en") -> str:
    """With a multi-step run: ``max(T_fwd, (T_sched + T_post) / k)`` with the terms measured in
    the normal (else the overlap) run, the measured gain, and beside it the lag cost: wasted
    tokens and time to first token of every run."""
    loops = _loops(runs)
    multi = [i for i, loop in enumerate(loops) if loop == "multistep"]
    if not multi:
        return ""
    names = [html.escape(name) for name in display_labels(runs, lang)]
    base = loops.index("normal") if "normal" in loops else (
        loops.index("overlap") if "overlap" in loops else None)
    lines = []
    m = runs[base]["metrics"] if base is not None else {}
    if m.get("t_fwd_us") is not None and m.get("t_cpu_us") is not None:
        fwd, cpu = m["t_fwd_us"] * _MS, m["t_cpu_us"] * _MS
        for i in multi:
            k = loop_of(runs[i])[1]
            lines.append(t(lang, "formula_multistep").format(fwd=fwd, cpu=cpu, k=k,
                                                             best=max(fwd, cpu / k)))
            pred = overlap_speedup(m["t_fwd_us"], m["t_cpu_us"], k)
            lines.append("<b>" + t(lang, "formula_multistep_pred").format(label=names[i], pred=pred)
                         + "</b>")
            if loops[base] == "normal" and _comparable(runs[base], runs[i]):
                meas = compare_runs(runs[base], runs[i], k)["measured_speedup"]
                text = t(lang, "formula_measured").format(a=names[base], b=names[i], meas=meas)
                lines.append(f'<b data-metric="measured_speedup_multistep" '
                             f'data-value="{meas:.6g}">{text}</b>')
    wasted, ttft = [], []
    for i, run in enumerate(runs):
        metrics = run["metrics"]
        if metrics.get("wasted_tokens") is not None:
            entry = f"{names[i]} {metrics['wasted_tokens']:.0f}"
            total = metrics.get("output_tokens")
            if i in multi and total:
                share = 100.0 * metrics["wasted_tokens"] / total
                entry += " (" + t(lang, "cost_share").format(share=share, total=f"{total:.0f}") + ")"
            wasted.append(entry)
        if metrics.get("ttft_ms_mean") is not None:
            ttft.append(f"{names[i]} {metrics['ttft_ms_mean']:.1f} ms")
    cost = [f"{t(lang, 'cost_wasted')}: {' · '.join(wasted)}" if wasted else "",
            f"{t(lang, 'cost_ttft')}: {' · '.join(ttft)}" if ttft else ""]
    lines.append(f"<i>{t(lang, 'cost_title')}</i>: " + "; ".join(c for c in cost if c))
    return '<div class="ov-formula" data-block="multistep">' + "<br>".join(lines) + "</div>"


def texts_html(runs: list[dict[str, Any]], lang: str = "en", limit: int = 256) -> str:
    """Every request's generated text (up to ``limit``, and the count says how many there are),
    with finish reasons, and whether the runs agree."""
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
        badge = f'<span class="ov-badge ov-{html.escape(reason)}">{html.escape(reason)}</span>'
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
    if len(runs) >= 2:
        ids = [[out.get("token_ids") for out in run["outputs"]] for run in runs]
        same = all(other == ids[0] for other in ids[1:])
        note += " " + t(lang, "texts_same" if same else "texts_differ")
    note += "</p>"
    return (_STYLE + note + f'<div class="ov-scroll"><table class="ov-table"><thead><tr>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _wasted(run: dict[str, Any], i: int) -> str:
    outputs = run["outputs"]
    return html.escape(str(outputs[i].get("wasted_steps", 0))) if i < len(outputs) else "–"


def _ids_preview(token_ids: list[int]) -> str:
    """What a model without a tokenizer (random-weight presets) produced: its first ids."""
    shown = ", ".join(str(i) for i in token_ids[:16])
    return f"token ids [{shown}{', …' if len(token_ids) > 16 else ''}]"


def record_label(record: dict[str, Any]) -> str:
    """"NVIDIA H200 · torch 2.11.0 · 2025-06-01": where and when a record was made (what is
    unknown is left out)."""
    env = record.get("env") or {}
    torch_version = env.get("torch_version")
    parts = [env.get("device_name"),
             torch_version and torch_version != "unknown" and f"torch {torch_version}",
             env.get("date")]
    return " · ".join(str(p) for p in parts if p and p != "unknown") or "?"
