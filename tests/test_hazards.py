"""Each hazard switch removes one safeguard, and the lab's checks must catch the fault it causes;
the safe engine must pass the same checks every time."""

from __future__ import annotations

import pytest
from conftest import requires_cuda

from engine import Engine, EngineConfig
from engine.lab.hazard_lab import HAZARDS, run_hazard


@pytest.fixture(scope="module")
def base(make_checkpoint):
    return EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                        max_seq_len=96)


@pytest.fixture(scope="module")
def reference(base):
    from dataclasses import replace
    with Engine(replace(base, max_batch_size=4)) as eng:
        yield eng


CPU_HAZARDS = [name for name, h in HAZARDS.items() if not h.cuda_only and h.can_fault]


@pytest.mark.parametrize("switch", CPU_HAZARDS)
def test_cpu_hazard_is_detected(base, reference, switch):
    """A race shows only when its window opens: measured on up to three workloads (seeds), and
    at least one must show the fault, with evidence."""
    reports = []
    for seed in (1, 2, 3):
        reports.append(run_hazard(base, switch, seed=seed, ref_engine=reference))
        if reports[-1].fault_found:
            break
    report = reports[-1]
    assert report.fault_found, reports
    assert (report.differing or report.double_free or report.after_stop or report.remapped
            or report.stalled)
    if HAZARDS[switch].counted and report.double_free is None and not report.stalled:
        # The window the checks found a fault through was counted open (a switched-off guard
        # still counts the tokens it would have dropped).
        assert report.windows > 0, report


def test_the_memory_hazards_show_what_the_issue_names():
    """The three memory safeguards and what their absence does here."""
    assert {"no_cache_lock", "late_prefix_insert", "no_retract_guard"} <= set(CPU_HAZARDS)
    assert HAZARDS["no_deferred_retract_free"].cuda_only
    assert not HAZARDS["no_deferred_retract_free"].can_fault


def test_late_insert_is_found_as_two_mappings_of_one_position(base, reference):
    report = run_hazard(base, "late_prefix_insert", seed=0, ref_engine=reference)
    assert report.remapped and report.prefix_hit_tokens > 0
    assert not report.differing        # the two pages hold the same values: only the check sees


@pytest.mark.parametrize("seed", range(4))
def test_safe_engine_shows_no_fault(base, reference, seed):
    report = run_hazard(base, None, seed=seed, ref_engine=reference)
    assert not report.fault_found, report


@pytest.mark.parametrize("switch", [name for name, h in HAZARDS.items() if h.cuda_only])
def test_gpu_only_hazards_say_so_on_cpu(base, reference, switch):
    report = run_hazard(base, switch, ref_engine=reference)
    assert not report.fault_found and report.needs_cuda


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("switch", [name for name, h in HAZARDS.items() if h.can_fault])
def test_cuda_hazard_is_detected(make_checkpoint, switch):
    base = EngineConfig(model=str(make_checkpoint("llama")), device="cuda", dtype="float32",
                        max_seq_len=96)
    report = run_hazard(base, switch, seed=1)
    assert report.fault_found, report


@requires_cuda
@pytest.mark.cuda
def test_cuda_retracted_memory_freed_at_once_opens_windows_and_breaks_nothing(make_checkpoint):
    """The stage order closes this window here (hazard_lab: no_deferred_retract_free)."""
    base = EngineConfig(model=str(make_checkpoint("llama")), device="cuda", dtype="float32",
                        max_seq_len=96)
    report = run_hazard(base, "no_deferred_retract_free", seed=1)
    assert report.retractions > 0 and report.windows > 0
    assert not report.fault_found, report


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("seed", range(3))
def test_cuda_safe_engine_shows_no_fault(make_checkpoint, seed):
    base = EngineConfig(model=str(make_checkpoint("llama")), device="cuda", dtype="float32",
                        max_seq_len=96)
    assert not run_hazard(base, None, seed=seed).fault_found
