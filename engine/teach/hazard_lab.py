"""The hazard lab: remove one safeguard, run the overlap loop, and let checks find what broke.

Each switch in ``HazardSwitches`` turns off one protection that production engines learned the hard
way. A lab run compares the faulty overlap run against the safe *normal* loop on the same workload
and reports what the checks found -- never what we expected to find:

- tokens that differ (which requests, from which output position);
- a double free, caught by the allocator (``DoubleFreeError``);
- tokens emitted after a stop token;
- KV pages or request slots still held after the run (a leak).

Races depend on timing, so the lab widens the window on purpose (``inject_delay_us``) and says
plainly when a run happened not to show the fault.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from engine.config import EngineConfig, HazardSwitches
from engine.scheduler.kv_cache import DoubleFreeError
from engine.teach.workload import stop_params_from_probe


@dataclass(frozen=True)
class Hazard:
    """One safeguard the lab can remove (its names for people live in ``viz.lab``)."""

    switch: str
    cuda_only: bool                 # the race needs two real CUDA streams
    delay_us: int                   # widens the race window (HazardSwitches.inject_delay_us)
    config: dict = field(default_factory=dict)


HAZARDS = {
    # engine_stream.wait_stream(scheduler_stream): metadata -> forward.
    "no_wait_stream": Hazard("no_wait_stream", True, 2000),
    # Deferred free: a slot/page freed at step n is reused while forward(n+1) still writes it.
    "no_deferred_free": Hazard("no_deferred_free", True, 20000, {"result_copy_stream": "engine"}),
    # The result-buffer ring: one host buffer is overwritten by the next step's copy too early.
    "single_host_buffer": Hazard("single_host_buffer", False, 20000),
    # The finished-request guard: a stopped request's lag-one token is appended.
    "no_finished_guard": Hazard("no_finished_guard", False, 0),
}
SAFE = Hazard("safe", False, 0)


@dataclass
class LabReport:
    """What the checks found (never what we expected to find)."""

    switch: str                             # a HAZARDS key, or "safe"
    device: str
    fault_found: bool = False
    differing: list[tuple[int, int]] = field(default_factory=list)  # (request, first position)
    double_free: dict | None = None         # DoubleFreeError.details(), if one was raised
    after_stop: list[int] = field(default_factory=list)
    leaked_pages: int = 0
    leaked_slots: int = 0
    needs_cuda: bool = False                # not run: the race needs two CUDA streams
    windows: int = 0                        # times the removed safeguard would have acted


def lab_workload(vocab_size: int, n: int = 24, seed: int = 0):
    """Many requests for few slots, short prompts first and long prompts waiting (slot reuse)."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(4, vocab_size) for _ in range(rng.randrange(2, 6) if i < n // 2
                else rng.randrange(24, 48))] for i in range(n)]
    return prompts


def compare(reference, outputs, params) -> tuple[list[tuple[int, int]], list[int]]:
    differing, after_stop = [], []
    for i, (ref, out, p) in enumerate(zip(reference, outputs, params)):
        if ref != out:
            pos = next((j for j, (a, b) in enumerate(zip(ref, out)) if a != b), min(len(ref), len(out)))
            differing.append((i, pos))
        if any(t in p.stop_token_ids for t in out[:-1]):
            after_stop.append(i)
    return differing, after_stop


def run_hazard(base: EngineConfig, switch: str | None, seed: int = 0,
               ref_engine: Any = None) -> LabReport:
    """One lab run: the safe normal loop as reference, then the overlap loop with ``switch`` on
    (``None``: every safeguard on, which must never show a fault)."""
    from engine import Engine

    hazard = HAZARDS[switch] if switch else SAFE
    switches = HazardSwitches(**{switch: True}, inject_delay_us=hazard.delay_us) if switch \
        else HazardSwitches()
    cfg = replace(base, overlap=True, max_batch_size=min(base.max_batch_size, 4),
                  num_pages=None, **hazard.config, hazards=switches)
    own_ref = ref_engine is None
    ref_engine = ref_engine or Engine(replace(cfg, hazards=HazardSwitches(), overlap=False))
    try:
        device = ref_engine.device_name
        if hazard.cuda_only and device != "cuda":
            return LabReport(hazard.switch, device, needs_cuda=True)
        prompts = lab_workload(ref_engine.spec.vocab_size, seed=seed)
        params = stop_params_from_probe(ref_engine, prompts, 12, lo=1, hi=4, seed=seed)
        reference = [o.token_ids for o in ref_engine.generate(prompts, params).outputs]
    finally:
        if own_ref:
            ref_engine.close()
    report = LabReport(hazard.switch, device)
    with Engine(cfg) as eng:
        try:
            res = eng.generate(prompts, params, overlap=True)
            report.windows = res.metrics["unsafe_frees"] + res.metrics["wasted_tokens"]
            report.differing, report.after_stop = compare(reference, [o.token_ids for o in
                                                                      res.outputs], params)
        except DoubleFreeError as err:
            report.double_free = err.details()
        s = eng.stats()
        if report.double_free is None:
            report.leaked_pages = s["kv_pages_total"] - s["kv_pages_free"]
            report.leaked_slots = s["req_slots_total"] - s["req_slots_free"]
    report.fault_found = bool(report.differing or report.double_free or report.after_stop
                              or report.leaked_pages or report.leaked_slots)
    return report
