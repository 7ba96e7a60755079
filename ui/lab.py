"""Hazard lab handlers: remove one safeguard, run, and show what the engine's checks found.

``engine.hazard_lab.run_hazard`` does the work: the normal loop as reference, then the overlap
loop with one switch on, compared token by token, with the allocator and the stop checks
watching. This module only picks the configuration (the model and device of the live tab), keeps
a reference engine per device, takes the same device lock and queue slot as a live run, and turns
the ``LabReport`` into HTML in both languages. It never claims a fault the checks did not find:
a run that happened not to show one says so.
"""

from __future__ import annotations

import html
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

import gradio as gr

import viz
from ui import common
from ui.common import lang_of
from viz.text_teach import HAZARD_ZH

LAB_MAX_SEQ_LEN = 96     # the lab's prompts are at most 48 tokens, and it asks for 12 more
REFERENCES: dict[str, tuple[tuple, Any]] = {}   # device -> (config key, reference Engine)
SHOWN_DIFFERING = 12


def _hazards() -> dict[str, Any]:
    from engine.hazard_lab import HAZARDS  # lazy: imports torch

    return HAZARDS


def _title(switch: str, hazard: Any, lang: str) -> str:
    """The engine names its switches in English; Chinese from ``viz.text_teach`` where known."""
    return HAZARD_ZH[switch][0] if lang == "zh" and switch in HAZARD_ZH else hazard.title


def _guards(switch: str, hazard: Any, lang: str) -> str:
    return HAZARD_ZH[switch][1] if lang == "zh" and switch in HAZARD_ZH else hazard.guards


def switch_choices(lang_choice: str, current: str | None = None) -> tuple[Any, str]:
    """The switches as (title, name) choices, and what the chosen one guards."""
    lang = lang_of(lang_choice)
    hazards = _hazards()
    value = current if current in hazards else "no_finished_guard"
    choices = [(_title(name, hazard, lang), name) for name, hazard in hazards.items()]
    return gr.update(choices=choices, value=value), describe(value, lang_choice)


def describe(switch: str | None, lang_choice: str) -> str:
    lang = lang_of(lang_choice)
    hazard = _hazards().get(switch or "")
    if hazard is None:
        return ""
    text = viz.t(lang, "lab_guards").format(guards=_guards(switch, hazard, lang))
    return text + (viz.t(lang, "lab_cuda_only") if hazard.cuda_only else "")


def run_lab(switch: str | None, model: str, device: str, seed: Any, lang_choice: str):
    """One lab run with ``switch`` on (``None``: the safe engine): a stream of (HTML, the
    report as a plain dict, kept so a language switch can redraw it)."""
    lang = lang_of(lang_choice)
    try:
        device = common.resolve_device(device)
        seed = int(seed or 0)
        what = (_title(switch, _hazards()[switch], lang) if switch else viz.t(lang, "lab_all_on"))
        lock = common.device_lock(device)
        if not lock.acquire(blocking=False):
            yield common.status(viz.t(lang, "status_waiting"), "running"), None
            lock.acquire()
        try:
            yield common.status(viz.t(lang, "lab_running").format(device=device.upper(),
                                                                  what=html.escape(what)),
                                "running"), None
            report = lab_report(switch, model, device, seed)
        finally:
            lock.release()
    except Exception as error:  # noqa: BLE001 - any failure must reach the user
        message = viz.t(lang, "lab_failed").format(error=html.escape(common.error_text(error)))
        gr.Warning(message)
        yield common.status(message, "error"), None
        return
    shown = {"report": asdict(report), "model": model, "seed": seed}
    yield report_html(report, what, model, seed, lang), shown


def redraw(shown: dict[str, Any] | None, lang_choice: str) -> Any:
    """The last lab report again, in the chosen language (nothing to redraw: unchanged)."""
    lang = lang_of(lang_choice)
    if not shown:
        return common.status(viz.t(lang, "lab_idle"))
    report = SimpleNamespace(**shown["report"])
    hazard = _hazards().get(report.switch)
    what = _title(report.switch, hazard, lang) if hazard else viz.t(lang, "lab_all_on")
    return report_html(report, what, shown["model"], shown["seed"], lang)


def run_safe(model: str, device: str, seed: Any, lang_choice: str):
    yield from run_lab(None, model, device, seed, lang_choice)


def lab_report(switch: str | None, model: str, device: str, seed: int) -> Any:
    """``run_hazard`` against a cached reference engine built like the one it would build."""
    from engine import EngineConfig
    from engine.hazard_lab import run_hazard

    # float32 everywhere: the faulty run is compared token for token with the normal loop, and
    # bfloat16 rounding can differ with batch composition, which lag one changes.
    base = EngineConfig(model=model, device=device, max_seq_len=LAB_MAX_SEQ_LEN, seed=0,
                        dtype="float32")
    reference = common.engine_for({"model": model, "device": device, "seed": 0,
                                   "dtype": "float32", "max_seq_len": LAB_MAX_SEQ_LEN,
                                   "overlap": False,
                                   "max_batch_size": min(base.max_batch_size, 4)},
                                  cache=REFERENCES)
    return run_hazard(base, switch, seed=seed, ref_engine=reference)


def report_html(report: Any, what: str, model: str, seed: int, lang: str) -> str:
    """The verdict first, then each check's evidence, then how often the window opened."""
    safe = report.switch == "safe"
    if report.fault_found:
        kind, verdict = "error", viz.t(lang, "lab_fault").format(title=html.escape(what))
    elif safe:
        kind, verdict = "ok", viz.t(lang, "lab_safe_ok")
    elif report.note and "CUDA" in report.note:
        kind, verdict = "info", viz.t(lang, "lab_needs_cuda")
    else:
        kind, verdict = "warn", viz.t(lang, "lab_not_shown")
    where = viz.t(lang, "lab_where").format(device=html.escape(report.device.upper()),
                                            model=html.escape(model), seed=seed)
    parts = [f'<div class="status status-{kind} lab-verdict" data-fault="{str(report.fault_found).lower()}"'
             f' data-switch="{html.escape(report.switch)}"><b>{verdict}</b><br>'
             f"<small>{where}</small></div>"]
    parts += _evidence(report, lang)
    if report.note and not safe:
        parts.append(f'<p class="lab-note">{html.escape(report.note)}</p>')
    if not (report.note and "CUDA" in report.note):
        parts.append(f'<p class="lab-windows" data-windows="{report.windows}">'
                     f"{_windows(report, safe, lang)}</p>")
    return "".join(parts)


def _evidence(report: Any, lang: str) -> list[str]:
    out = []
    if report.differing:
        rows = "".join(f'<tr><td class="num">{request}</td><td class="num">{position}</td></tr>'
                       for request, position in report.differing[:SHOWN_DIFFERING])
        more = len(report.differing) - SHOWN_DIFFERING
        out.append(f"<p><b>{viz.t(lang, 'lab_differ')}: {len(report.differing)}</b></p>"
                   f'<table class="ov-table lab-differing"><thead><tr>'
                   f"<th>{viz.t(lang, 'col_request')}</th>"
                   f"<th>{viz.t(lang, 'col_first_diff')}</th></tr></thead><tbody>{rows}"
                   f"</tbody></table>" + (f"<p>… +{more}</p>" if more > 0 else ""))
    if report.double_free:
        out.append(f'<p class="lab-double-free"><b>{viz.t(lang, "lab_double_free")}:</b> '
                   f"<code>{html.escape(report.double_free)}</code></p>")
    if report.after_stop:
        requests = ", ".join(str(r) for r in report.after_stop)
        out.append(f"<p><b>{viz.t(lang, 'lab_after_stop')}:</b> {requests}</p>")
    if report.leak:
        out.append(f"<p><b>{viz.t(lang, 'lab_leak')}:</b> {html.escape(report.leak)}</p>")
    return out


def _windows(report: Any, safe: bool, lang: str) -> str:
    if report.double_free:
        return viz.t(lang, "lab_windows_aborted")
    return viz.t(lang, "lab_windows_safe" if safe else "lab_windows").format(n=report.windows)
