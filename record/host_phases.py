"""The host's phases in an imported trace, where the trace names them: the scheduler's own
functions (recorded as ``python_function`` events when the profiler ran with ``with_stack=True``)
and ``record_function`` / ``user_annotation`` ranges, each given the role it plays in the
article's loop (receive, schedule, launch, process_last) so it takes that role's colour.

The functions named here are the ones each engine's loop calls once a step:

- Mini-SGLang, ``python/minisgl/scheduler/scheduler.py`` (``overlap_loop``, ``normal_loop``):
  ``receive_msg`` and ``_process_one_msg``, ``_schedule_next_batch`` (and its
  ``_prepare_batch``), ``_forward``, ``_process_last_data``; offline, ``python/minisgl/llm/llm.py``
  ``offline_receive_msg``.
- SGLang, ``python/sglang/srt/managers/scheduler.py`` (``event_loop_normal``,
  ``event_loop_overlap``): ``recv_requests``, ``process_input_requests``,
  ``get_next_batch_to_run``, ``run_batch``, ``process_batch_result``.
- vLLM, ``vllm/v1/engine/core.py`` (``EngineCore.step``): the scheduler's ``schedule`` and
  ``update_from_output``, the executor's ``execute_model``; ``vllm/v1/worker/gpu_model_runner.py``
  marks ``gpu_model_runner: preprocess`` / ``forward`` / ``postprocess`` with ``record_function``.

Any other ``record_function`` range is a phase too, under its own name and with no role. A
phase inside another is drawn only where the outer one has the same role or none of the inner
ones has a role (Mini-SGLang's ``_prepare_batch`` stays inside ``_schedule_next_batch``; vLLM's
``execute_model`` is drawn as its preprocess, forward and postprocess).

Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from record.schema import Phase

ROLES = (Phase.RECEIVE, Phase.SCHEDULE, Phase.LAUNCH, Phase.PROCESS_LAST)
_FUNCTIONS: dict[str, dict[str, Phase]] = {
    "minisgl/": {"receive_msg": Phase.RECEIVE, "offline_receive_msg": Phase.RECEIVE,
                 "_process_one_msg": Phase.RECEIVE, "_schedule_next_batch": Phase.SCHEDULE,
                 "_prepare_batch": Phase.SCHEDULE, "_forward": Phase.LAUNCH,
                 "_process_last_data": Phase.PROCESS_LAST},
    "sglang/": {"recv_requests": Phase.RECEIVE, "process_input_requests": Phase.RECEIVE,
                "get_next_batch_to_run": Phase.SCHEDULE, "run_batch": Phase.LAUNCH,
                "process_batch_result": Phase.PROCESS_LAST},
    "vllm/": {"schedule": Phase.SCHEDULE, "execute_model": Phase.LAUNCH,
              "update_from_output": Phase.PROCESS_LAST},
}
_RANGES = {"gpu_model_runner: preprocess": Phase.SCHEDULE,
           "gpu_model_runner: forward": Phase.LAUNCH,
           "gpu_model_runner: postprocess": Phase.PROCESS_LAST}
_PY_NAME = re.compile(r"(?P<file>.{0,400}?)\(\d{1,9}\): (?P<func>[\w.<>]{1,200})")
_STEP = re.compile(r"ProfilerStep#\d{1,12}")


@dataclass
class HostPhase:
    """One named phase of the host: its name as the trace gives it, its role (None: unknown)."""

    name: str
    role: str | None
    start: float
    end: float


def phase_of(name: str, cat: str) -> tuple[str, str | None] | None:
    """(phase name, role) when a host event is a named phase, else None. A python function is a
    phase only when it is one of the scheduler functions above, in that engine's package."""
    if cat == "python_function":
        match = _PY_NAME.fullmatch(name)
        if match is None:
            return None
        path, func = match.group("file").replace("\\", "/"), match.group("func")
        for package, functions in _FUNCTIONS.items():
            if func in functions and package in path and not (
                    package == "sglang/" and "minisgl/" in path):
                return func, functions[func]
        return None
    if cat == "user_annotation" and not _STEP.fullmatch(name):
        return name, _RANGES.get(name)
    return None


def phases(events: Sequence[tuple[str, str, float, float]]) -> list[HostPhase]:
    """The phases to draw on one thread's lane from its (name, category, start, end) events:
    the outermost named ones, an outer one giving way to the phases it holds where those have
    roles other than its own."""
    named = sorted((HostPhase(*found, start, end) for name, cat, start, end in events
                    if (found := phase_of(name, cat)) is not None),
                   key=lambda p: (p.start, -p.end))
    return _outermost(named)


def _outermost(named: list[HostPhase]) -> list[HostPhase]:
    out: list[HostPhase] = []
    i = 0
    while i < len(named):
        outer = named[i]
        j = i + 1
        inner = []
        while j < len(named) and named[j].start < outer.end:
            inner.append(named[j])
            j += 1
        roles = {p.role for p in inner if p.role is not None}
        if roles and roles != {outer.role}:
            out += _outermost(inner)           # drawn as the phases it holds
        else:
            out.append(outer)
        i = j
    return out


def role_share(found: Sequence[HostPhase]) -> dict[str, float]:
    """Total time of each role's phases (µs)."""
    totals: dict[str, float] = {}
    for phase in found:
        if phase.role is not None:
            totals[phase.role] = totals.get(phase.role, 0.0) + (phase.end - phase.start)
    return totals
