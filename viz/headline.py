"""The run's one line above everything else: how long the GPU idled in each loop and how much
faster overlap was per decode step (said plainly when it was not); on a machine too busy to compare
(``record.host_load``), a refusal, then the same work's quiet recording. An imported trace gets a
line of its own kind."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from record.gpu_time import gpu_time
from record.host_load import MachineLoad, busiest, machine_load
from record.imported import loop_verdict
from record.metrics import compare_runs
from record.run_record import loop_of
from record.schema import ENGINE_LOOPS, Loop, RunDict
from texts import count, t
from viz.formula import compared_pair, trace_predicted, wait_us
from viz.labels import display_labels, label_detail

_MS = 1e-3
HIDDEN_BUSY = 0.9     # steady GPU busy at which the CPU's work counts as hidden under the forward


def look_for_key(record: Mapping[str, Any] | None) -> str:
    """The "What to look for" panel's text key: an import's lanes are its trace's own."""
    runs = (record or {}).get("runs") or []
    return "timeline_help_import" if runs and all(
        loop_of(run)[0] == Loop.IMPORTED for run in runs) else "timeline_help"


def headline_html(record: Mapping[str, Any] | None, lang: str = "en",
                  quiet: Mapping[str, Any] | None = None) -> str:
    """The headline of a record's runs ('' for none or an unknown loop). ``quiet``: a quiet
    machine's recording of the same work, said after runs the machine's load disturbed."""
    text, verdict = _line(record, lang)
    if not text:
        return ""
    line = _block(text, verdict)
    if verdict == "busy" and quiet is not None:
        recorded, quiet_verdict = _line(quiet, lang)
        if recorded and quiet_verdict != "busy":
            line += _block(t(lang, "headline_quiet") + recorded, "quiet")
    return line


def _line(record: Mapping[str, Any] | None, lang: str) -> tuple[str, str]:
    """The headline's text and its verdict ("" where there is none)."""
    runs = [run for run in (record or {}).get("runs") or [] if run.get("metrics")]
    loops = [loop_of(run)[0] for run in runs]
    if runs and Loop.IMPORTED in loops and set(loops) <= {*ENGINE_LOOPS, Loop.IMPORTED}:
        return _imported(runs, lang)
    if not runs or not set(loops) <= set(ENGINE_LOOPS):
        return "", ""
    kind = str(((record or {}).get("env") or {}).get("device_kind", "cuda"))
    gpu = t(lang, f"gpu_{kind}") if f"gpu_{kind}" in _KINDS else t(lang, "gpu_cuda")
    names = [html.escape(name) for name in display_labels(runs, lang)]
    idle = [_ms(gpu_time(run).idle_us) for run in runs]
    if Loop.NORMAL not in loops or len(runs) == 1:
        first = gpu_time(runs[0])
        return t(lang, "headline_single").format(gpu=gpu, idle_a=idle[0], name=names[0],
                                                 gaps=count(lang, first.gap_count, "gaps")), "single"
    base = loops.index(Loop.NORMAL)
    others = [i for i in range(len(runs)) if i != base]
    main = loops.index(Loop.OVERLAP) if Loop.OVERLAP in loops else others[0]
    words = {"gpu": gpu, "idle_a": idle[base], "idle_b": idle[main], "name": names[main]}
    if not all(runs[i]["metrics"].get("steady_step_us") for i in (base, main)):
        return t(lang, "headline_no_steady").format(**words), "short"
    speedup = _speedup(runs[base], runs[main])
    load = busiest([runs[base], runs[main]])
    if load is not None:
        return t(lang, "headline_busy").format(why=busy_why(load, lang), speedup=speedup,
                                               **words), "busy"
    # "Now runs under the forward" only where some loop kept the GPU busy (else it still waited).
    known = [float(b) for run in runs if (b := run["metrics"].get("steady_busy_frac")) is not None]
    hidden = max(known, default=1.0)            # a record without the figure: no such doubt
    key = ("headline_not_faster" if speedup <= 1.0 else
           "headline_faster" if hidden >= HIDDEN_BUSY else "headline_faster_partly")
    text = t(lang, key).format(speedup=speedup, busy=100 * hidden, **words)
    # The other loops of the same engine (beside other engines' records, theirs are not ours).
    engine = label_detail(runs[base])
    also = [t(lang, "headline_also").format(name=names[i], speedup=_speedup(runs[base], runs[i]))
            for i in others if i != main and runs[i]["metrics"].get("steady_step_us")
            and label_detail(runs[i]) == engine]
    if also:                          # the other loops' gains, after the main one's bold part
        head, bold_end, rest = text.partition("</b>")
        text = head + "".join(also) + bold_end + rest
    return text, "faster" if speedup > 1.0 else "not-faster"


def _imported(runs: list[RunDict], lang: str) -> tuple[str, str]:
    """The headline when a trace is on screen: one trace alone, or two runs compared per step."""
    names = [html.escape(name) for name in display_labels(runs, lang)]
    pair = compared_pair(runs) if len(runs) > 1 else None
    steady = [bool(run["metrics"].get("steady_step_us")) for run in runs]
    if pair is None or not (steady[pair[0]] and steady[pair[1]]):
        i = next((i for i, run in enumerate(runs) if loop_of(run)[0] == Loop.IMPORTED), 0)
        return _one_trace(runs[i], names[i], lang)
    a, b = (runs[i]["metrics"] for i in pair)
    speedup = a["steady_step_us"] / b["steady_step_us"]
    key = "headline_traces_faster" if speedup > 1.0 else "headline_traces_not_faster"
    text = t(lang, key).format(name_a=names[pair[0]], name_b=names[pair[1]], speedup=speedup,
                               busy_a=100 * (a.get("steady_busy_frac") or 0.0),
                               busy_b=100 * (b.get("steady_busy_frac") or 0.0),
                               wait_a=wait_us(a) * _MS, wait_b=wait_us(b) * _MS)
    return text, "faster" if speedup > 1.0 else "not-faster"


def _one_trace(run: RunDict, name: str, lang: str) -> tuple[str, str]:
    """A trace alone: its loop, GPU busy share, wait per step and (not overlapped) prediction."""
    m = run["metrics"]
    if not m.get("steady_step_us"):
        return "", ""
    verdict = loop_verdict(run)
    verdict = verdict if verdict in ("serial", "overlapped") else "unknown"
    text = t(lang, f"headline_trace_{verdict}").format(
        name=name, busy=100 * (m.get("steady_busy_frac") or 0.0), step=m["steady_step_us"] * _MS,
        wait=wait_us(m) * _MS, pred=trace_predicted(run) or 0.0)
    return text, f"trace-{verdict}"


def busy_reasons(load: MachineLoad, lang: str) -> list[str]:
    """What made the machine too busy, one phrase a reason."""
    parts = []
    if load.others_busy:
        parts.append(t(lang, "busy_other").format(share=100 * (load.other_share or 0.0),
                                                  cpus=load.cpus))
    if load.device_starved:
        parts.append(t(lang, "busy_device").format(share=100 * (load.device_share or 0.0)))
    return parts


def busy_why(load: MachineLoad, lang: str) -> str:
    """The reasons in one sentence."""
    return ("；" if lang == "zh" else "; ").join(busy_reasons(load, lang))


def busy_badge_lines(run: Mapping[str, Any], lang: str) -> list[str]:
    """A panel title's badge if the machine was too busy for this run, a line a reason; else []."""
    load = machine_load(run)
    if load is None or not load.busy:
        return []
    first, *rest = busy_reasons(load, lang)
    return [t(lang, "busy_badge").format(why=first), *rest]


_KINDS = ("gpu_cuda", "gpu_cpu-process", "gpu_cpu-inline")


def _speedup(normal: dict[str, Any], other: dict[str, Any]) -> float:
    """Per decode step, serial over ``other`` (both runs have steady steps: the callers check)."""
    loop, k = loop_of(other)
    k = k if loop == Loop.MULTISTEP else 1
    return float(compare_runs(normal, other, k)["measured_speedup"] or 0.0)


def _ms(us: float) -> str:
    """Milliseconds as the panel titles give them (one decimal), whole from a second up."""
    return f"{us / 1000.0:,.0f}" if us >= 1e6 else f"{us / 1000.0:.1f}"


def _block(text: str, verdict: str) -> str:
    """The headline as the page shows it."""
    return f'<div class="ov-headline ov-headline-{verdict}" data-verdict="{verdict}">{text}</div>'
