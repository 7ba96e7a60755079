"""Step-through replay: one step of a finished run, its linked spans, its caption.

forward(Bn) waits for Bn's upload, its tokens come back by the result copy, the CPU blocks on the
copy's ``copy_done`` a step later, and process_last(Bn-1) hides under it. ``record.steps`` finds
those spans; this module names each one's partners (``links``) and says what the step did
(``step_caption``)."""

from __future__ import annotations

import html
from typing import Final

from record.imported.trace_steps import trace_step
from record.lag import extra_steps, lag_marks
from record.run_record import loop_of
from record.schema import Lane, Loop, Phase, RunDict, SpanDict
from record.steps import (
    StepParts,
    copy_placement,
    hidden_roles,
    idle_after,
    is_hidden_role,
    loop_kind,
    overlap_us,
    step_parts,
)
from record.window import step_range
from texts import label_colon, t
from viz.labels import display_labels

HIDDEN_SHARE = 0.25     # below this share of process_last under the forward, say it was missed
ROLES: Final = ("forward", "upload", "copy", "wait", "process")     # a step's own spans
DRAWN: Final = ("forward", "upload", "copy", "wait")   # drawn in every loop (process: ``spans_of``)


def role_name(role: str, span: SpanDict, step: int, lang: str) -> str:
    """A role's span as the step view names it: "forward(B3)", "process_last(B2)"."""
    if is_hidden_role(role):
        return t(lang, f"role_{span['phase']}").format(n=span["step"])
    return t(lang, f"role_{role}").format(n=step)


def links(parts: StepParts, step: int, kind: str, lang: str,
          placement: str = "engine") -> dict[str, list[str]]:
    """role -> the sentences naming its partners (its hover); what the upload guards depends on
    where the result copy ran (``copy_placement``)."""
    hidden = hidden_roles(parts)
    names = {role: t(lang, f"role_{role}").format(n=step) for role in ROLES}
    names.update({role: role_name(role, span, step, lang) for role, span in hidden.items()})
    present = {role for role in ROLES if parts[role]} | set(hidden)
    said: dict[str, list[str]] = {role: [] for role in present}

    def pair(a: str, b: str, a_says: str, b_says: str, **extra: str) -> None:
        if a in present and b in present:
            said[a].append(t(lang, a_says).format(other=names[b], **extra))
            said[b].append(t(lang, b_says).format(other=names[a], **extra))

    pair("forward", "upload", "rel_waits_for", f"rel_guards_{placement}")
    pair("forward", "copy", "rel_copied_by", "rel_copies", partner=names["wait"])
    if "copy" in present and "wait" in present:
        said["wait"].append(t(lang, "rel_waits_copy").format(other=names["copy"]))
    for role in hidden:
        pair("forward", role, "rel_hides", "rel_hidden_under")
    if kind == Loop.NORMAL:
        pair("process", "forward", "rel_after", "rel_before")
    return said


def spans_of(parts: StepParts, kind: str) -> dict[str, SpanDict]:
    """role -> span, for the roles drawn for this loop (process(Bn) only in the normal loop)."""
    roles = {role: span for role in DRAWN if (span := parts[role])}
    if kind == Loop.NORMAL and parts["process"]:
        roles["process"] = parts["process"]
    roles.update(hidden_roles(parts))
    return roles


def _ms(span: SpanDict | None) -> float:
    return (span["end_us"] - span["start_us"]) / 1000.0 if span else 0.0


def step_caption(run: RunDict, step: int, lang: str = "en",
                 placement: str | None = None) -> str:
    """What step ``step`` did, in the article's terms and measured durations (markdown)."""
    if loop_of(run)[0] == Loop.IMPORTED:
        return trace_caption(run, step, lang)
    placement = placement or copy_placement(run)
    parts, kind = step_parts(run, step), loop_kind(run)
    forward = parts["forward"]
    if forward is None:
        return t(lang, "cap_none").format(n=step)
    first, last = step_range(run)
    fwd = _ms(forward)
    if kind == Loop.NORMAL:
        text = t(lang, "cap_normal").format(n=step, fwd=fwd, proc=_ms(parts["process"]),
                                            idle=idle_after(run, forward, step) / 1000.0)
    elif kind == Loop.MULTISTEP:
        k = loop_of(run)[1]
        text = t(lang, "cap_multistep").format(n=step, fwd=fwd, k=k)
        batches = ", ".join(f"B{s['step']}" for s in parts["hidden"])
        hidden = sum(overlap_us(s, forward) for s in parts["hidden"]) / 1000.0
        text += (t(lang, "cap_multistep_under").format(batches=batches, hidden=hidden)
                 if batches else t(lang, "cap_multistep_none"))
    elif parts["hidden"]:
        prev = parts["hidden"][0]
        # Under forward(Bn) the CPU processes B(n-1), then builds and launches B(n+1): the work
        # overlap hides. When little of it ran under the forward, do not claim it was hidden.
        following = [s for s in run.get("spans", []) if s["lane"] == Lane.CPU
                     and s.get("step") == step + 1 and s["phase"] in (Phase.SCHEDULE, Phase.LAUNCH)]
        after = sum(_ms(s) for s in following)
        hidden = sum(overlap_us(s, forward) for s in hidden_roles(parts).values()) / 1000.0
        key = "cap_overlap" if hidden >= HIDDEN_SHARE * (_ms(prev) + after) \
            else "cap_overlap_missed"
        waited = t(lang, f"waited_{placement}").format(n=step, prev=prev["step"])
        then = t(lang, "cap_then").format(m=step + 1, next=after) if following else ""
        text = t(lang, key).format(n=step, prev=prev["step"], fwd=fwd, proc=_ms(prev),
                                   hidden=hidden, loop=run_name(run, lang), waited=waited,
                                   then=then)
    else:
        waited = t(lang, "waited_first").format(n=step)
        text = t(lang, "cap_fill").format(n=step, fwd=fwd, loop=run_name(run, lang),
                                          waited=waited)
    text += _extra_sentence(run, parts, kind, lang)
    if parts["wait"]:
        text += t(lang, "cap_copy").format(n=step, wait=_ms(parts["wait"]))
    if step == last and kind != Loop.NORMAL:
        text += t(lang, "cap_drain")
    return text + _lag_sentences(run, step, lang)


LATE_SAID = 0.1        # share of a step's GPU work run after the next step began worth saying


def trace_caption(run: RunDict, step: int, lang: str = "en") -> str:
    """An imported step in words: the GPU's work and wait, its work after the next step began,
    and the host's named phases."""
    found = trace_step(run, step)
    if found is None:
        return t(lang, "cap_trace_none").format(n=step)
    text = t(lang, "cap_trace").format(n=step, busy=found["busy_us"] / 1000.0,
                                       step=found["step_us"] / 1000.0, items=found["items"],
                                       wait=found["wait_us"] / 1000.0)
    late = sum(b - a for a, b in found["late"])
    if found["busy_us"] > 0 and late >= LATE_SAID * found["busy_us"]:
        text += t(lang, "cap_trace_late").format(late=late / 1000.0, m=found["next"])
    totals: dict[tuple[str, str], float] = {}
    for name, role, us in found["host"]:
        totals[(name, role)] = totals.get((name, role), 0.0) + us
    if totals:
        colon, comma = label_colon(lang), ("，" if lang == "zh" else ", ")
        left, right = ("（", "）") if lang == "zh" else (" (", ")")
        phases = comma.join(f"`{html.escape(name)}`{left}{role}{right}{colon}{us / 1000.0:.2f} ms"
                            for (name, role), us in totals.items())
        text += t(lang, "cap_trace_host").format(phases=phases)
    return text


def _extra_sentence(run: RunDict, parts: StepParts, kind: str, lang: str) -> str:
    """How much of the captioned process_last is the run's extra CPU work (not reading tokens)."""
    extra_us = run["extra_cpu_us"]
    span = parts["process"] if kind == Loop.NORMAL else next(iter(parts["hidden"]), None)
    if not extra_us or span is None or kind not in (Loop.NORMAL, Loop.OVERLAP):
        return ""
    proc = _ms(span)
    if proc * 1000.0 < extra_us:
        return ""
    return t(lang, "cap_extra").format(m=span["step"], proc=proc, extra=extra_us / 1000.0)


def run_name(run: RunDict, lang: str = "en") -> str:
    """The run's name in the reader's language ("overlap", "重叠"), escaped."""
    return html.escape(display_labels([run], lang)[0])


def _lag_sentences(run: RunDict, step: int, lang: str) -> str:
    marks = lag_marks(run)
    text = ""
    riders = extra_steps(marks).get(step)
    if riders:
        items = ", ".join(t(lang, "cap_lag_item").format(req=req, stop=stop)
                          for req, stop, _ in riders)
        key = "cap_lag_one" if len(riders) == 1 else "cap_lag"
        text += t(lang, key).format(items=items, n=step)
    stopped = [m["request"] for m in marks if m["stop_step"] == step]
    if stopped:
        key = "cap_stopped_one" if len(stopped) == 1 else "cap_stopped"
        text += t(lang, key).format(reqs=", ".join(map(str, stopped)), n=step)
    return text
