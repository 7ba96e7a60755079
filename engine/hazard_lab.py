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

from engine.config import EngineConfig, HazardSwitches
from engine.kv_cache import DoubleFreeError
from engine.workload import stop_params_from_probe


@dataclass(frozen=True)
class Hazard:
    switch: str
    title: str
    guards: str                     # what the safeguard protects, in the article's terms
    cuda_only: bool
    delay_us: int
    config: dict = field(default_factory=dict)


HAZARDS = {
    "no_wait_stream": Hazard(
        "no_wait_stream", "Remove engine_stream.wait_stream(scheduler_stream)",
        "metadata -> forward: the forward may read a batch's slots, positions and page table "
        "before their upload has landed", True, 2000),
    "no_deferred_free": Hazard(
        "no_deferred_free", "Free a finished request's slot and pages at once",
        "a slot/page freed at step n is handed to a new request and written on the scheduler "
        "stream while the lag-one forward(n), already queued, still writes into it", True, 20000,
        {"result_copy_stream": "engine"}),
    "single_host_buffer": Hazard(
        "single_host_buffer", "One host result buffer instead of a ring",
        "the async copy of batch n+1 lands in the buffer the CPU is still reading for batch n",
        False, 20000),
    "no_finished_guard": Hazard(
        "no_finished_guard", "Drop the finished_reqs guard",
        "the lag-one extra token of a request that already stopped is appended and the request "
        "is finished (and freed) a second time", False, 0),
}


@dataclass
class LabReport:
    switch: str
    device: str
    fault_found: bool
    findings: list[str]
    differing: list[tuple[int, int]]        # (request, first differing output position)
    double_free: str = ""
    after_stop: list[int] = field(default_factory=list)
    leak: str = ""
    note: str = ""
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


SAFE = Hazard("safe", "All safeguards on", "nothing: the engine as shipped", False, 0)


def run_hazard(base: EngineConfig, switch: str | None, seed: int = 0,
               ref_engine=None) -> LabReport:
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
            return LabReport(switch, device, False, [], [], note=(
                "needs two CUDA streams: on the CPU backend the device process executes commands "
                "in order, like a single stream, so this race cannot happen there"))
        prompts = lab_workload(ref_engine.spec.vocab_size, seed=seed)
        params = stop_params_from_probe(ref_engine, prompts, 12, lo=1, hi=4, seed=seed)
        reference = [o.token_ids for o in ref_engine.generate(prompts, params).outputs]
    finally:
        if own_ref:
            ref_engine.close()
    report = LabReport(hazard.switch, device, False, [], [])
    with Engine(cfg) as eng:
        try:
            res = eng.generate(prompts, params, overlap=True)
            report.windows = res.metrics["unsafe_frees"] + res.metrics["wasted_tokens"]
            report.differing, report.after_stop = compare(reference, [o.token_ids for o in
                                                                      res.outputs], params)
        except DoubleFreeError as err:
            report.double_free = str(err)
        s = eng.stats()
        if not report.double_free and (s["kv_pages_free"] != s["kv_pages_total"]
                                       or s["req_slots_free"] != s["req_slots_total"]):
            report.leak = f"{s['kv_pages_total'] - s['kv_pages_free']} pages, " \
                          f"{s['req_slots_total'] - s['req_slots_free']} slots still held"
    _summarise(report)
    return report


def _summarise(r: LabReport) -> None:
    if r.differing:
        rid, pos = r.differing[0]
        r.findings.append(f"{len(r.differing)} request(s) differ from the normal loop; first: "
                          f"request {rid} from output token {pos}")
    if r.double_free:
        r.findings.append(f"double free caught by the allocator: {r.double_free}")
    if r.after_stop:
        r.findings.append(f"tokens after a stop token in request(s) {r.after_stop[:8]}")
    if r.leak:
        r.findings.append(f"leak: {r.leak}")
    r.fault_found = bool(r.findings)
    if not r.fault_found and r.switch == "safe":
        r.note = "no fault: every check passed with all safeguards on"
    elif not r.fault_found and not r.note:
        r.note = ("no fault this time: the race window did not open in this run (timing "
                  "dependent). Run it again, or raise the injected delay.")
