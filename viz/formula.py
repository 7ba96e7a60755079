"""The article's formula with measured terms, the measured speedup beside it, and what a large
difference between the two was made of.

A serial step costs about ``T_fwd + T_cpu``, an overlapped one ``max(T_fwd, T_cpu)`` (``T_cpu / k``
with k steps a pass); the prediction takes the normal run's terms, the measurement is the ratio of
steady decode steps. Past ``GAP_EXPLAINED`` a note names, largest first, what the runs measured
that the formula leaves out. An imported trace's terms are its GPU's busy time and wait per step."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from record.imported import imported, loop_verdict
from record.metrics import compare_runs, overlap_speedup
from record.run_record import loop_of
from record.schema import Loop, Metrics, RunDict
from texts import sentence_gap, t
from viz.labels import display_labels

GAP_EXPLAINED = 0.10      # |measured / predicted - 1| above this gets a note
SIGNIFICANT = 0.05        # a term is named when it is at least this share of the step
OTHER_LOAD = 0.05         # other programs' share of the cores worth naming
DEVICE_CORE = 0.90        # a device process that had a core less of its working time than this
PREFILL = 0.01            # prefill's share of the steady window worth naming
_MS = 1e-3


def _loops(runs: list[RunDict]) -> list[str]:
    return [loop_of(run)[0] for run in runs]


def is_trace(run: RunDict) -> bool:
    return loop_of(run)[0] == Loop.IMPORTED


def _role(run: RunDict) -> str:
    """Our loop; for an imported trace what its timing says ("imported": it could not tell)."""
    loop = loop_of(run)[0]
    if loop != Loop.IMPORTED:
        return loop
    verdict = loop_verdict(run) or ""
    return {"serial": Loop.NORMAL, "overlapped": Loop.OVERLAP}.get(verdict, Loop.IMPORTED)


def compared_pair(runs: list[RunDict]) -> tuple[int, int] | None:
    """Indices (baseline, candidate): the normal and overlap runs, else of two runs the serial
    one first, else the first two in order."""
    loops = _loops(runs)
    if Loop.NORMAL in loops and Loop.OVERLAP in loops:
        return loops.index(Loop.NORMAL), loops.index(Loop.OVERLAP)
    if len(runs) != 2:
        return None
    return (1, 0) if [_role(run) for run in runs] == [Loop.OVERLAP, Loop.NORMAL] else (0, 1)


def ratio_pairs(runs: list[RunDict]) -> list[tuple[int, int]]:
    """(baseline, candidate) for each ratio column: every other run against the normal run."""
    loops = _loops(runs)
    if Loop.NORMAL in loops and len(runs) > 1:
        base = loops.index(Loop.NORMAL)
        return [(base, i) for i in range(len(runs)) if i != base]
    pair = compared_pair(runs)
    if pair:
        return [pair]
    if len(runs) < 2:
        return []
    roles = [_role(run) for run in runs]
    base = roles.index(Loop.NORMAL) if Loop.NORMAL in roles else 0
    return [(base, i) for i in range(len(runs)) if i != base]


def _cpu(m: Metrics) -> float:
    return m.get("t_cpu_us") or 0.0


def _comparable(a: RunDict, b: RunDict) -> bool:
    return bool(a["metrics"].get("steady_step_us")) and bool(b["metrics"].get("steady_step_us"))


def _metric(key: str, value: float | None, text: str, tag: str = "b") -> str:
    """``text`` marked with the raw number it says, for the page's checks."""
    return f'<{tag} data-metric="{key}" data-value="{value:.6g}">{text}</{tag}>'


def formula_html(runs: list[RunDict], lang: str) -> str:
    """The formula with our loops' measured terms, each imported trace's terms, and, for two runs
    of which one is a trace, the measured ratio of their step times."""
    names = [html.escape(n) for n in display_labels(runs, lang)]
    traces = [i for i, run in enumerate(runs) if is_trace(run)]
    ours = [i for i in range(len(runs)) if i not in traces]
    parts = [_loops_html([runs[i] for i in ours], [names[i] for i in ours], lang)] if ours else []
    parts += [_trace_html(runs[i], names[i], lang) for i in traces]
    pair = compared_pair(runs)
    if pair and set(pair) & set(traces) and _comparable(runs[pair[0]], runs[pair[1]]):
        a, b = names[pair[0]], names[pair[1]]
        meas = compare_runs(runs[pair[0]], runs[pair[1]])["measured_speedup"]
        why = trace_why_html(runs[pair[0]], runs[pair[1]], a, b, lang)
        parts.append('<div class="ov-formula" data-block="traces-measured">'
                     + _metric("measured_speedup", meas, t(lang, "trace_measured").format(
                         a=a, b=b, meas=meas)) + (f"<br>{why}" if why else "") + "</div>")
    return "".join(part for part in parts if part)


def _loops_html(runs: list[RunDict], names: list[str], lang: str) -> str:
    """Our loops: the formula with the baseline's terms, the prediction, the measured speedup per
    steady decode step, the whole run's tokens/s ratio, and why they differ where they do."""
    pair = compared_pair(runs)
    base_i = pair[0] if pair else 0
    base = runs[base_i]
    m = base["metrics"]
    loop = loop_of(base)[0]
    if loop not in (Loop.NORMAL, Loop.OVERLAP) or m.get("t_fwd_us") is None \
            or m.get("t_cpu_us") is None:
        return ""  # a multi-step run's CPU time per step is already shared by k forwards
    fwd, cpu = m["t_fwd_us"] * _MS, _cpu(m) * _MS
    lines = [
        f"<i>{t(lang, 'formula_terms').format(label=names[base_i])}</i>",
        t(lang, "formula_serial").format(fwd=fwd, cpu=cpu, total=fwd + cpu),
        t(lang, "formula_overlap").format(fwd=fwd, cpu=cpu, best=max(fwd, cpu)),
        "<b>" + t(lang, "formula_predicted").format(
            pred=overlap_speedup(m["t_fwd_us"], _cpu(m))) + "</b>",
    ]
    if pair and _comparable(runs[pair[0]], runs[pair[1]]):
        a, b = names[pair[0]], names[pair[1]]
        c = compare_runs(runs[pair[0]], runs[pair[1]])
        meas, whole = c["measured_speedup"], c["whole_run_speedup"]
        lines.append(_metric("measured_speedup", meas,
                             t(lang, "formula_measured").format(a=a, b=b, meas=meas)))
        if whole is not None:
            lines.append(_metric("whole_run_speedup", whole,
                                 t(lang, "formula_whole").format(a=a, b=b, meas=whole), "span"))
        lines.append(why_html(runs[pair[0]], runs[pair[1]], a, b, 1, lang))
    return '<div class="ov-formula">' + "<br>".join(line for line in lines if line) + "</div>"


def _notes(run: RunDict, lang: str) -> dict[str, list[str]]:
    """The import's notes in ``lang``, grouped: ``sglang``, ``loop``, ``cost`` and ``rest``."""
    groups: dict[str, list[str]] = {"sglang": [], "loop": [], "cost": [], "rest": []}
    for note in imported(run).get("notes") or []:
        key = note.get("key") if isinstance(note, dict) else None
        if isinstance(key, str) and key.startswith("note_"):
            values = {k: html.escape(str(v)) for k, v in note.items() if k != "key"}
            try:
                text = t(lang, key).format(**values)
            except (KeyError, IndexError):
                continue                              # a note this version does not know
            group = "loop" if key.startswith("note_loop_") else \
                "sglang" if key.startswith("note_sglang_") else \
                "cost" if key == "note_profiler_cost" else "rest"
            groups[group].append(text)
    return groups


def _trace_html(run: RunDict, name: str, lang: str) -> str:
    """An imported trace: its terms per step, what its timing says about its loop, a prediction
    only for a loop not seen to overlap already, the profiler's cost; how it was read, folded."""
    notes = _notes(run, lang)
    m = run["metrics"]
    fwd = (m.get("t_fwd_us") or 0.0) * _MS
    wait = m.get("gpu_wait_us")
    lines = [t(lang, "trace_head").format(label=name)]
    if notes["sglang"]:
        lines.append(sentence_gap(lang).join(notes["sglang"]))
    if notes["loop"]:                      # its readings end as one sentence
        said = sentence_gap(lang).join(notes["loop"])
        lines.append(said[:-1] + "." if said.endswith(";") else
                     said[:-1] + "。" if said.endswith("；") else said)
    if fwd > 0 and wait is not None:
        wait *= _MS
        lines.append(t(lang, "trace_terms").format(step=(m.get("steady_step_us") or 0.0) * _MS,
                                                   fwd=fwd, wait=wait))
        if _role(run) == Loop.OVERLAP:
            lines.append(t(lang, "trace_no_pred").format(wait=wait))
        else:
            pred = trace_predicted(run) or 0.0
            lines.append(_metric("trace_predicted", pred, t(lang, "trace_pred").format(
                fwd=fwd, wait=wait, best=max(fwd, wait), pred=pred), "span"))
    lines += notes["cost"]
    if notes["rest"]:
        lines.append(f"<details><summary>{t(lang, 'trace_found')}</summary>"
                     + sentence_gap(lang).join(notes["rest"]) + "</details>")
    return '<div class="ov-formula" data-block="trace">' + "<br>".join(lines) + "</div>"


def trace_predicted(run: RunDict) -> float | None:
    """An imported trace's predicted speedup, its GPU wait read as the host's part; None for a
    loop seen to overlap already, or without terms."""
    m = run["metrics"]
    wait = m.get("gpu_wait_us")
    if not m.get("t_fwd_us") or wait is None or _role(run) == Loop.OVERLAP:
        return None
    return overlap_speedup(m["t_fwd_us"], wait)


def wait_us(m: Mapping[str, Any]) -> float:
    """The GPU's wait for the host per step: a trace's own term, else the step less T_fwd."""
    if m.get("gpu_wait_us") is not None:
        return float(m["gpu_wait_us"])
    return max(float(m.get("steady_step_us") or 0.0) - float(m.get("t_fwd_us") or 0.0), 0.0)


def trace_why_html(base: RunDict, other: RunDict, a: str, b: str, lang: str) -> str:
    """``why_html`` for two runs of which one is an imported trace, in the terms a trace has: the
    GPU's busy time per step, the wait against what the prediction leaves, the profiler's cost."""
    predicted = trace_predicted(base) if is_trace(base) else \
        compare_runs(base, other)["predicted_speedup"] if loop_of(base)[0] == Loop.NORMAL else None
    n, o = base["metrics"], other["metrics"]
    if not predicted or not n.get("steady_step_us") or not o.get("steady_step_us"):
        return ""
    measured = n["steady_step_us"] / o["steady_step_us"]
    if abs(measured / predicted - 1) <= GAP_EXPLAINED:
        return ""
    step = o["steady_step_us"]
    f_n, w_n = n["t_fwd_us"], n.get("gpu_wait_us") or n.get("t_cpu_us") or 0.0
    f_o = o.get("t_fwd_us") or 0.0
    w_o = wait_us(o)
    found: list[tuple[float, str, bool]] = []
    if abs(f_o - f_n) > SIGNIFICANT * step:
        found.append((abs(f_o - f_n), t(lang, "why_trace_forward").format(
            a=a, b=b, ms_b=f_o * _MS, ms_a=f_n * _MS), f_o < f_n))
    left = max(w_n - f_n, 0.0)               # the prediction's own wait: max(T_fwd, wait) - T_fwd
    if abs(w_o - left) > SIGNIFICANT * step:
        found.append((abs(w_o - left), t(lang, "why_trace_wait").format(
            b=b, ms_b=w_o * _MS, ms_left=left * _MS), w_o < left))
    reasons = _said(found, lang)
    events = [float(seen.get("events_per_step") or 0.0) if (seen := imported(run).get("loop_seen"))
              else 0.0 for run in (base, other)]
    if min(events) > 0 and max(events) > 1.25 * min(events):
        reasons.append(t(lang, "why_trace_events").format(a=a, b=b, ev_a=f"{events[0]:,.0f}",
                                                          ev_b=f"{events[1]:,.0f}"))
    return _why_span(b, measured, predicted, reasons, lang)


def multistep_html(runs: list[RunDict], lang: str = "en") -> str:
    """With a multi-step run: ``max(T_fwd, T_cpu / k)`` with the normal (else overlap) run's
    terms, the measured gain, and the lag cost: wasted tokens and TTFT of every run."""
    loops = _loops(runs)
    multi = [i for i, loop in enumerate(loops) if loop == Loop.MULTISTEP]
    if not multi:
        return ""
    names = [html.escape(name) for name in display_labels(runs, lang)]
    base = loops.index(Loop.NORMAL) if Loop.NORMAL in loops else (
        loops.index(Loop.OVERLAP) if Loop.OVERLAP in loops else None)
    lines = []
    m: Metrics = runs[base]["metrics"] if base is not None else {}
    if base is not None and m.get("t_fwd_us") is not None and m.get("t_cpu_us") is not None:
        fwd, cpu = m["t_fwd_us"] * _MS, _cpu(m) * _MS
        if cpu <= fwd:               # nothing left for k steps to hide: say what it is for
            lines.append(f'<span class="ov-why" data-block="multistep-no-gain">'
                         f'{t(lang, "multistep_no_gain").format(cpu=cpu, fwd=fwd)}</span>')
        for i in multi:
            k = loop_of(runs[i])[1]
            lines.append(t(lang, "formula_multistep").format(fwd=fwd, cpu=cpu, k=k,
                                                             best=max(fwd, cpu / k)))
            pred = overlap_speedup(m["t_fwd_us"], _cpu(m), k)
            lines.append("<b>" + t(lang, "formula_multistep_pred").format(label=names[i], pred=pred)
                         + "</b>")
            if loops[base] == Loop.NORMAL and _comparable(runs[base], runs[i]):
                meas = compare_runs(runs[base], runs[i], k)["measured_speedup"]
                lines.append(_metric("measured_speedup_multistep", meas, t(
                    lang, "formula_measured").format(a=names[base], b=names[i], meas=meas)))
                lines.append(why_html(runs[base], runs[i], names[base], names[i], k, lang))
    lines.append(_lag_cost(runs, names, multi, lang))
    return ('<div class="ov-formula" data-block="multistep">'
            + "<br>".join(line for line in lines if line) + "</div>")


def _lag_cost(runs: list[RunDict], names: list[str], multi: list[int], lang: str) -> str:
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
    return f"<i>{t(lang, 'cost_title')}</i>: " + "; ".join(c for c in cost if c)


def why_html(normal: RunDict, other: RunDict, a: str, b: str, k: int,
             lang: str) -> str:
    """The note for a measured speedup off the prediction by more than ``GAP_EXPLAINED``: which way,
    by how much, and what the runs measured that the formula leaves out, largest first."""
    c = compare_runs(normal, other, k)
    predicted, measured = c["predicted_speedup"], c["measured_speedup"] or 0.0
    if predicted is None or predicted <= 0 or measured <= 0 \
            or abs(measured / predicted - 1) <= GAP_EXPLAINED:
        return ""
    reasons = _said(_step_terms(normal, other, a, b, k, lang), lang) + _machine(other, lang)
    return _why_span(b, measured, predicted, reasons, lang)


def _said(found: list[tuple[float, str, bool]], lang: str) -> list[str]:
    """The terms, largest first, each saying which way it moves the measured speedup."""
    return [text + t(lang, "why_raises" if raises else "why_lowers")
            for _, text, raises in sorted(found, key=lambda item: -item[0])]


def _why_span(label: str, measured: float, predicted: float, reasons: list[str],
              lang: str) -> str:
    below = measured < predicted
    head = t(lang, "why_below" if below else "why_above").format(
        label=label, pct=100 * abs(measured / predicted - 1), meas=measured, pred=predicted)
    tail = (t(lang, "why_measured") + " " + t(lang, "why_join").join(reasons)
            + t(lang, "why_end") if reasons else t(lang, "why_none"))
    return (f'<span class="ov-why" data-block="why" data-direction="{"below" if below else "above"}"'
            f">{head} {tail}</span>")


def _step_terms(normal: RunDict, other: RunDict, a: str, b: str, k: int,
                lang: str) -> list[tuple[float, str, bool]]:
    """(µs per step, sentence, whether it raises the measured speedup over the prediction) for
    each term of the steps that the formula leaves out."""
    n, o = normal["metrics"], other["metrics"]
    f_n, c_n, s_n = n["t_fwd_us"], _cpu(n), n["steady_step_us"]
    f_o, c_o, s_o = o["t_fwd_us"], _cpu(o), o["steady_step_us"]
    found: list[tuple[float, str, bool]] = []
    rest_n = s_n - (f_n + c_n)                    # serial: neither forward nor CPU work
    if rest_n < -SIGNIFICANT * s_n:
        found.append((-rest_n, t(lang, "why_serial_overlapped").format(
            label=a, ms=-rest_n * _MS, step=s_n * _MS, total=(f_n + c_n) * _MS), False))
    elif rest_n > SIGNIFICANT * s_n:
        found.append((rest_n, t(lang, "why_serial_waited").format(
            label=a, ms=rest_n * _MS, step=s_n * _MS), True))
    longer = max(f_o, c_o)                        # the overlapped step's own bound
    rest_o = s_o - longer
    if rest_o > SIGNIFICANT * s_o:
        text = t(lang, "why_overlap_rest").format(label=b, ms=rest_o * _MS, step=s_o * _MS,
                                                  longer=longer * _MS)
        if (gap := o.get("decode_gap_us_p50")) is not None:
            text += t(lang, "why_gap_p50").format(gap=gap * _MS)
        found.append((rest_o, text, False))
    if f_o >= c_o and abs(f_o - f_n) > SIGNIFICANT * s_o:         # the forward bounds it
        found.append((abs(f_o - f_n), t(lang, "why_forward").format(
            a=a, b=b, ms_b=f_o * _MS, ms_a=f_n * _MS), f_o < f_n))
    if c_o > f_o and abs(c_o - c_n / k) > SIGNIFICANT * s_o:       # the CPU's work bounds it
        found.append((abs(c_o - c_n / k), t(lang, "why_cpu").format(
            a=a, b=b, ms_b=c_o * _MS, ms_a=c_n / k * _MS), c_o < c_n / k))
    return found


def _machine(run: RunDict, lang: str) -> list[str]:
    host, m = run.get("host") or {}, run["metrics"]
    reasons = []
    if _is_number(host.get("other_cpu_frac")) and host["other_cpu_frac"] >= OTHER_LOAD:
        reasons.append(t(lang, "why_other_load").format(
            share=100 * host["other_cpu_frac"], cpus=int(host.get("cpus") or 0)))
    if _is_number(host.get("device_cpu_frac")) and host["device_cpu_frac"] < DEVICE_CORE:
        reasons.append(t(lang, "why_device_cpu").format(share=100 * host["device_cpu_frac"]))
    if _is_number(m.get("steady_prefill_frac")) and m["steady_prefill_frac"] >= PREFILL:
        reasons.append(t(lang, "why_prefill").format(share=100 * m["steady_prefill_frac"]))
    return reasons


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
