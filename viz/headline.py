"""The run's one line: what a reader should take away, above everything else on the page.

"GPU idle 469 → 94 ms, overlap 1.38× faster per decode step: the CPU's work now runs under the
GPU's forward." It names the GPU for what it is (on a CPU, the device process playing it), says
so plainly when overlap was not faster, and refuses to compare when the machine was too busy for
the runs' times to mean anything (``record.machine_load``). The badge for a busy machine, in a panel's
title, is said here too.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from record.gpu_time import gpu_time
from record.machine_load import MachineLoad, busiest, machine_load
from record.metrics import compare_runs
from record.run_record import loop_of
from record.schema import ENGINE_LOOPS, Loop
from texts import count, t
from viz.labels import display_labels


def headline_html(record: dict[str, Any] | None, lang: str = "en") -> str:
    """The headline of a record's runs ('' for none, or for runs that are not our loops)."""
    runs = [run for run in (record or {}).get("runs") or [] if run.get("metrics")]
    loops = [loop_of(run)[0] for run in runs]
    if not runs or not set(loops) <= set(ENGINE_LOOPS):
        return ""
    kind = str(((record or {}).get("env") or {}).get("device_kind", "cuda"))
    gpu = t(lang, f"gpu_{kind}") if f"gpu_{kind}" in _KINDS else t(lang, "gpu_cuda")
    names = [html.escape(name) for name in display_labels(runs, lang)]
    idle = [_ms(gpu_time(run).idle_us) for run in runs]
    if Loop.NORMAL not in loops or len(runs) == 1:
        first = gpu_time(runs[0])
        text = t(lang, "headline_single").format(gpu=gpu, idle_a=idle[0], name=names[0],
                                                 gaps=count(lang, first.gap_count, "gaps"))
        return _block(text, "single")
    base = loops.index(Loop.NORMAL)
    others = [i for i in range(len(runs)) if i != base]
    main = loops.index(Loop.OVERLAP) if Loop.OVERLAP in loops else others[0]
    words = {"gpu": gpu, "idle_a": idle[base], "idle_b": idle[main], "name": names[main]}
    if not all(runs[i]["metrics"].get("steady_step_us") for i in (base, main)):
        return _block(t(lang, "headline_no_steady").format(**words), "short")
    speedup = _speedup(runs[base], runs[main])
    load = busiest([runs[base], runs[main]])
    if load is not None:
        text = t(lang, "headline_busy").format(why=busy_why(load, lang), speedup=speedup, **words)
        return _block(text, "busy")
    key = "headline_faster" if speedup > 1.0 else "headline_not_faster"
    text = t(lang, key).format(speedup=speedup, **words)
    also = [t(lang, "headline_also").format(name=names[i], speedup=_speedup(runs[base], runs[i]))
            for i in others if i != main and runs[i]["metrics"].get("steady_step_us")]
    if also:                          # the other loops' gains, after the main one's bold part
        head, bold_end, rest = text.partition("</b>")
        text = head + "".join(also) + bold_end + rest
    return _block(text, "faster" if speedup > 1.0 else "not-faster")


def busy_reasons(load: MachineLoad, lang: str) -> list[str]:
    """What made the machine too busy, one phrase a reason: other programs' share of the cores,
    the device process's wait for its core."""
    parts = []
    if load.others_busy:
        parts.append(t(lang, "busy_other").format(share=100 * (load.other_share or 0.0),
                                                  cpus=load.cpus))
    if load.device_starved:
        parts.append(t(lang, "busy_device").format(share=100 * (load.device_share or 0.0)))
    return parts


def _joined(lang: str, phrases: list[str]) -> str:
    return ("；" if lang == "zh" else "; ").join(phrases)


def busy_why(load: MachineLoad, lang: str) -> str:
    """The reasons in one sentence."""
    return _joined(lang, busy_reasons(load, lang))


def busy_badge_lines(run: Mapping[str, Any], lang: str) -> list[str]:
    """A panel title's badge when the machine was too busy during this run, one line a reason
    (a chart title is too narrow for both on one line); [] otherwise."""
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
    """The headline as the page shows it (numbers and the page's own words, names escaped)."""
    return f'<div class="ov-headline ov-headline-{verdict}" data-verdict="{verdict}">{text}</div>'
