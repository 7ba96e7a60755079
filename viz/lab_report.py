"""The hazard lab in words: each switch's title and what it guards, and a lab report as HTML.

A report is a plain dict (``asdict`` of ``engine.lab.hazard_lab.LabReport``): the verdict, each
check's evidence, how often the window opened. It never claims a fault the checks did not find."""

from __future__ import annotations

import html
from typing import Any

from texts import label_colon, sentence_gap, t
from texts.teach import HAZARD_NAMES

SHOWN_DIFFERING = 12


def hazard_title(switch: str | None, lang: str) -> str:
    """The switch's name for people ("every safeguard on" for none; else its identifier)."""
    if not switch:
        return t(lang, "lab_all_on")
    names = HAZARD_NAMES.get(lang, HAZARD_NAMES["en"])
    return names.get(switch, HAZARD_NAMES["en"].get(switch, (html.escape(switch), "")))[0]


def describe(switch: str | None, cuda_only: bool, lang: str, blocked: str | None = None) -> str:
    """What the switch's safeguard guards (markdown), whether it needs CUDA, and why it cannot
    run (``blocked``: a text key)."""
    if not switch:
        return ""
    names = HAZARD_NAMES.get(lang, HAZARD_NAMES["en"])
    guards = names.get(switch, HAZARD_NAMES["en"].get(switch, ("", "")))[1]
    text = t(lang, "lab_guards").format(guards=guards) if guards else ""
    if cuda_only:
        text += t(lang, "lab_cuda_only")
    if blocked:
        text += sentence_gap(lang) + t(lang, blocked)
    return text.strip()


def report_html(report: dict[str, Any], model: str, seed: int, lang: str) -> str:
    """The verdict first, then each check's evidence, then how often the window opened."""
    safe = report["switch"] == "safe"
    title = html.escape(hazard_title(None if safe else report["switch"], lang))
    if report["fault_found"]:
        kind, verdict = "error", t(lang, "lab_fault").format(title=title)
    elif safe:
        kind, verdict = "ok", t(lang, "lab_safe_ok")
    elif report["needs_cuda"]:
        kind, verdict = "info", t(lang, "lab_needs_cuda")
    else:
        kind, verdict = "warn", t(lang, "lab_not_shown")
    where = t(lang, "lab_where").format(device=html.escape(str(report["device"]).upper()),
                                        model=html.escape(str(model)), seed=int(seed))
    parts = [f'<div class="status status-{kind} lab-verdict" '
             f'data-fault="{str(bool(report["fault_found"])).lower()}" '
             f'data-switch="{html.escape(str(report["switch"]))}"><b>{verdict}</b><br>'
             f"<small>{where}</small></div>"]
    parts += _evidence(report, lang)
    if report["needs_cuda"]:
        parts.append(f'<p class="lab-note">{t(lang, "lab_note_cuda")}</p>')
    elif not report["fault_found"] and not safe:
        parts.append(f'<p class="lab-note">{t(lang, "lab_note_not_shown")}</p>')
    if not report["needs_cuda"] and (safe or report.get("windows_counted", True)):
        # Only where the engine counts the switch's windows (else a 0 would deny a found fault).
        parts.append(f'<p class="lab-windows" data-windows="{int(report["windows"])}">'
                     f"{_windows(report, safe, lang)}</p>")
    return "".join(parts)


def _evidence(report: dict[str, Any], lang: str) -> list[str]:
    out, colon = [], label_colon(lang)
    differing = report["differing"]
    if differing:
        rows = "".join(f'<tr><td class="num">{int(request)}</td><td class="num">{int(position)}'
                       "</td></tr>" for request, position in differing[:SHOWN_DIFFERING])
        more = len(differing) - SHOWN_DIFFERING
        out.append(f"<p><b>{t(lang, 'lab_differ')}{colon}{len(differing)}</b></p>"
                   f'<table class="ov-table lab-differing"><thead><tr>'
                   f"<th>{t(lang, 'col_request')}</th>"
                   f"<th>{t(lang, 'col_first_diff')}</th></tr></thead><tbody>{rows}"
                   "</tbody></table>" + (f"<p>… +{more}</p>" if more > 0 else ""))
    free = report["double_free"]
    if free:
        what = t(lang, "lab_what_page" if "page" in str(free["what"]) else "lab_what_slot")
        state = t(lang, "lab_held_by_other" if free["held_by_other"] else "lab_already_free")
        detail = t(lang, "lab_double_free_detail").format(
            what=what, item=int(free["item"]), request=int(free["request"]), state=state)
        out.append(f'<p class="lab-double-free"><b>{t(lang, "lab_double_free")}{colon}</b>'
                   f"{detail}</p>")
    if report["after_stop"]:
        requests = ", ".join(str(int(r)) for r in report["after_stop"])
        out.append(f"<p><b>{t(lang, 'lab_after_stop')}{colon}</b>{requests}</p>")
    if report["leaked_pages"] or report["leaked_slots"]:
        leak = t(lang, "lab_leak_detail").format(pages=int(report["leaked_pages"]),
                                                 slots=int(report["leaked_slots"]))
        out.append(f"<p><b>{t(lang, 'lab_leak')}{colon}</b>{leak}</p>")
    return out + _memory_evidence(report, lang)


def _memory_evidence(report: dict[str, Any], lang: str) -> list[str]:
    """The memory checks' findings (prefix cache, retraction), where the report has them."""
    out, colon = [], label_colon(lang)
    # A position is read through both pages at every step until the request ends: each once.
    remapped = list(dict.fromkeys((int(r), int(p)) for r, p in report.get("remapped") or []))
    if remapped:
        listed = "; ".join(t(lang, "lab_remapped_item").format(request=int(r), position=int(p))
                           for r, p in remapped[:SHOWN_DIFFERING])
        more = f" … +{len(remapped) - SHOWN_DIFFERING}" if len(remapped) > SHOWN_DIFFERING else ""
        out.append(f'<p class="lab-remapped"><b>{t(lang, "lab_remapped")}{colon}{len(remapped)}</b>'
                   f" ({listed}{more})</p>")
    found: list[tuple[str, list[Any]]] = [
        ("lab_cache", report.get("cache_problems") or []),
        ("lab_stalled", [report["stalled"]] if report.get("stalled") else [])]
    for key, items in found:
        if items:                   # the engine's own words, as technical detail
            detail = "".join(f"<li><code>{html.escape(str(item))}</code></li>" for item in items)
            out.append(f"<p><b>{t(lang, key)}:</b></p><ul>{detail}</ul>")
    if report.get("retractions") or report.get("prefix_hit_tokens"):
        out.append('<p class="lab-memory">' + t(lang, "lab_memory").format(
            retractions=int(report.get("retractions") or 0),
            hits=int(report.get("prefix_hit_tokens") or 0)) + "</p>")
    return out


def _windows(report: dict[str, Any], safe: bool, lang: str) -> str:
    if report["double_free"] or report.get("stalled"):      # the run ended before its counts
        return t(lang, "lab_windows_aborted")
    return t(lang, "lab_windows_safe" if safe else "lab_windows").format(n=int(report["windows"]))
