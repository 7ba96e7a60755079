"""Each hazard switch removes one safeguard, and the lab's checks must catch the fault it causes;
the safe engine must pass the same checks every time."""

from __future__ import annotations

import pytest
from conftest import requires_cuda

from engine import Engine, EngineConfig
from engine.teach.hazard_lab import HAZARDS, run_hazard


@pytest.fixture(scope="module")
def base(make_checkpoint):
    return EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                        max_seq_len=96)


@pytest.fixture(scope="module")
def reference(base):
    from dataclasses import replace
    with Engine(replace(base, max_batch_size=4, overlap=False)) as eng:
        yield eng


@pytest.mark.parametrize("switch", ["single_host_buffer", "no_finished_guard"])
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
    assert report.differing or report.double_free or report.after_stop


@pytest.mark.parametrize("seed", range(4))
def test_safe_engine_shows_no_fault(base, reference, seed):
    report = run_hazard(base, None, seed=seed, ref_engine=reference)
    assert not report.fault_found, report


@pytest.mark.parametrize("switch", ["no_wait_stream", "no_deferred_free"])
def test_gpu_only_hazards_say_so_on_cpu(base, reference, switch):
    report = run_hazard(base, switch, ref_engine=reference)
    assert not report.fault_found and report.needs_cuda


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("switch", list(HAZARDS))
def test_cuda_hazard_is_detected(make_checkpoint, switch):
    base = EngineConfig(model=str(make_checkpoint("llama")), device="cuda", dtype="float32",
                        max_seq_len=96)
    report = run_hazard(base, switch, seed=1)
    assert report.fault_found, report


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("seed", range(3))
def test_cuda_safe_engine_shows_no_fault(make_checkpoint, seed):
    base = EngineConfig(model=str(make_checkpoint("llama")), device="cuda", dtype="float32",
                        max_seq_len=96)
    assert not run_hazard(base, None, seed=seed).fault_found
