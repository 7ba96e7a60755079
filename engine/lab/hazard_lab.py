"""The hazard lab: remove one safeguard, run the overlap loop, and let checks find what broke.

Each ``HazardSwitches`` switch turns off one protection production engines learned the hard way. A
lab run compares the faulty overlap run with the safe normal loop on the same workload and reports
what the checks found, never what we expected. Races depend on timing: the lab widens the window
(``inject_delay_us``) and says plainly when a run did not show the fault."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from engine.config import NORMAL, OVERLAP, EngineConfig, HazardSwitches
from engine.scheduler.kv_cache import DoubleFreeError
from engine.workloads import stop_params_from_probe

LAB_PAGE_SIZE = 4               # the memory workloads' pages: 4 rows of up to 68 tokens need
LAB_SMALL_POOL = 40             # up to 68 pages at full length; this pool holds about 60% of it
LAB_TINY_POOL = 28              # and this 40%: requests retract every few steps


@dataclass(frozen=True)
class Hazard:
    """One safeguard the lab can remove (its names for people live in ``viz.lab_report``)."""

    switch: str
    cuda_only: bool                 # the race needs two real CUDA streams
    delay_us: int                   # widens the race window (HazardSwitches.inject_delay_us)
    config: dict = field(default_factory=dict)
    workload: str = "slots"         # "slots": slot reuse; "memory": shared prefixes, a small pool
    # False where this engine's stage order already closes the window: the lab then shows the
    # windows the switch opened and that no fault followed (see no_deferred_retract_free).
    can_fault: bool = True
    # Does the engine count this safeguard's race windows (frees under a forward that still
    # reads, tokens a guard drops or would drop)? Where not, the lab says nothing of them.
    counted: bool = False
    # Each request's length limit one token past its stop token, so the lag-one step computes
    # its last allowed token (no_finished_guard: the length check then ends it a second time).
    stop_before_limit: bool = False


HAZARDS = {
    # The forward waits for its upload (engine_stream.wait_stream(scheduler_stream)).
    "no_wait_stream": Hazard("no_wait_stream", True, 2000),
    # The slot hold: a finished request's slot freed at once, its token_pool row rewritten with
    # the next request's prompt (scheduler stream) while the lag-one forward still reads and
    # writes it (engine stream). Its pages go back at once either way (only forwards write them).
    "no_deferred_free": Hazard("no_deferred_free", True, 20000, {"result_copy_stream": "engine"},
                               counted=True),
    # The result-buffer ring: one host buffer is overwritten by the next step's copy too early.
    "single_host_buffer": Hazard("single_host_buffer", False, 20000),
    # The finished-request guard (Mini-SGLang's finished_reqs only skips the second free): a
    # stopped request's lag-one token is processed as if it still ran: appended, and the length
    # check ends it again (a double free of its slot).
    "no_finished_guard": Hazard("no_finished_guard", False, 0, counted=True,
                                stop_before_limit=True),
    # Cache locks: prefix pages a running request reads are evicted and reused under it.
    "no_cache_lock": Hazard("no_cache_lock", False, 0, {"num_pages": LAB_SMALL_POOL},
                            workload="memory"),
    # SGLang's race (SGLang PR 38140): a prefill's prefix inserted after the next batch was built.
    "late_prefix_insert": Hazard("late_prefix_insert", False, 0, workload="memory"),
    # The retraction guard: the token computed for a request retracted meanwhile is appended.
    "no_retract_guard": Hazard("no_retract_guard", False, 0, {"num_pages": LAB_TINY_POOL},
                               workload="memory", counted=True),
    # The result ring: a copy on its own stream reads the graph's output, shared by every replay,
    # while the next forward already runs (vLLM gives each step its own output row likewise).
    "no_result_ring": Hazard("no_result_ring", True, 2000,
                             {"cuda_graph": True, "result_copy_stream": "copy"}),
    # A retracted request's slot given back at once: here its next owner is a prefill built after
    # stage 4, so nothing breaks (an engine that mixes prefill and decode would); the lab shows
    # the windows opened and no fault.
    "no_deferred_retract_free": Hazard("no_deferred_retract_free", True, 20000,
                                       {"num_pages": LAB_TINY_POOL}, workload="memory",
                                       can_fault=False, counted=True),
}
SAFE = Hazard("safe", False, 0, counted=True)     # every safeguard acting, counted


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
    windows_counted: bool = True            # False: this switch's windows are not counted
    remapped: list[tuple[int, int]] = field(default_factory=list)  # (request, position)
    cache_problems: list[str] = field(default_factory=list)
    retractions: int = 0
    prefix_hit_tokens: int = 0
    stalled: str = ""                       # the run could not go on (the scheduler says why)


def lab_workload(vocab_size: int, n: int = 24, seed: int = 0, kind: str = "slots"):
    """``slots``: many requests for few slots (slot reuse). ``memory``: prompts of three families
    sharing system prompts, pairs identical (the prefix cache finds them)."""
    rng = random.Random(seed)
    if kind == "memory":
        systems = [[rng.randrange(4, vocab_size) for _ in range(16)] for _ in range(3)]
        prompts = []
        for i in range(n):
            tail = [rng.randrange(4, vocab_size) for _ in range(rng.randrange(1, 12))]
            prompts.append(systems[i % 3] + tail if i % 4 else list(prompts[-1] if prompts
                                                                        else systems[0] + tail))
        return prompts
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
    # The safe engine alternates between the two kinds of workload (odd seeds: memory).
    memory = hazard.workload == "memory" or switch is None and seed % 2 == 1
    sizes = {"num_pages": (LAB_TINY_POOL if seed % 4 == 3 else LAB_SMALL_POOL) if memory else None,
             "page_size": LAB_PAGE_SIZE if memory else base.page_size}
    cfg = replace(base, max_batch_size=min(base.max_batch_size, 4),
                  debug_checks=True, **{**sizes, **hazard.config}, hazards=switches)
    own_ref = ref_engine is None
    ref_engine = ref_engine or Engine(replace(cfg, hazards=HazardSwitches()))
    try:
        device = ref_engine.device_name
        if hazard.cuda_only and device != "cuda":
            return LabReport(hazard.switch, device, needs_cuda=True)
        prompts = lab_workload(ref_engine.spec.vocab_size, seed=seed,
                               kind="memory" if memory else "slots")
        new = 40 if memory else 12
        params, probe = stop_params_from_probe(ref_engine, prompts, new,
                                               lo=1 if not memory else 8,
                                               hi=4 if not memory else new, seed=seed)
        if hazard.stop_before_limit:
            params = [replace(p, max_new_tokens=min(new, o.token_ids.index(p.stop_token_ids[0])
                                                    + 2)) for p, o in zip(params, probe.outputs)]
        reference = [o.token_ids for o in ref_engine.generate(prompts, params, NORMAL).outputs]
    finally:
        if own_ref:
            ref_engine.close()
    report = LabReport(hazard.switch, device, windows_counted=hazard.counted)
    with Engine(cfg) as eng:
        try:
            res = eng.generate(prompts, params, OVERLAP)
            # Each time a safeguard acted, or would have: frees under a reader, tokens a guard
            # dropped, and tokens a switched-off guard let through.
            report.windows = (res.metrics["unsafe_frees"] + res.metrics["wasted_tokens"]
                              + res.metrics["unguarded_tokens"])
            report.differing, report.after_stop = compare(reference, [o.token_ids for o in
                                                                      res.outputs], params)
            report.remapped = [(rid, position) for rid, position, _, _ in res.mapping_faults]
            report.retractions = res.metrics["retractions"]
            report.prefix_hit_tokens = res.metrics["prefix_hit_tokens"] or 0
        except DoubleFreeError as err:
            report.double_free = err.details()
        except RuntimeError as err:
            if "stalled" not in str(err):
                raise
            report.stalled = str(err)
        s = eng.stats()
        if report.double_free is None:
            # Pages only the prefix cache keeps are not leaked: it gives them back on demand.
            report.leaked_pages = s["kv_pages_total"] - s["kv_pages_free"] - s["kv_pages_cached"]
            report.leaked_slots = s["req_slots_total"] - s["req_slots_free"]
            report.cache_problems = eng.memory_problems()
    report.fault_found = bool(report.differing or report.double_free or report.after_stop
                              or report.leaked_pages or report.leaked_slots or report.remapped
                              or report.cache_problems or report.stalled)
    return report
