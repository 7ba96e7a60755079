"""The scheduler service runs the app's live runs with arrivals and chat: what the UI will send.

A ``LiveRunRequest`` with a request rate gives every loop the same Poisson arrival times; the
record says the rate, carries per-token times, and becomes latency-vs-rate rows for the figure.
A chat request goes through the model's chat template (the bundled model ships a plain one).
"""

from __future__ import annotations

import threading

from engine.config import NORMAL, OVERLAP, EngineConfig
from engine.scheduler_process.messages import LiveRunRequest, RunFinished
from engine.scheduler_process.service import SchedulerService
from engine.workloads import Workload
from record.latency_rows import rows_from_record
from viz.latency import latency_figure


def _run(service: SchedulerService, shared_prefix: int = 0, **extra) -> list:
    events: list = []
    request = LiveRunRequest(
        engine=EngineConfig(model="bundled", device="cpu", dtype="float64", max_batch_size=4,
                            max_seq_len=96),
        workload=Workload.of_words(
            8, 6, shared_prefix, ignore_eos=True,
            texts=("Once upon a time", "The license grants", "This module provides") * 2,
            **extra),
        loops=(NORMAL, OVERLAP))
    service.handle(request, events.append, threading.Event())
    return events


def test_live_run_with_a_request_rate_and_the_latency_rows():
    service = SchedulerService()
    try:
        events = _run(service, request_rate=30.0, seed=2)
        final = events[-1]
        assert isinstance(final, RunFinished), final
        record = final.record
        assert record["config"]["request_rate"] == 30.0
        normal, overlap = record["runs"]
        arrivals = [[o["arrival_us"] for o in run["outputs"]] for run in (normal, overlap)]
        gaps = [[a - run[0] for a in run] for run in arrivals]
        assert max(abs(x - y) for x, y in zip(*gaps)) < 1.0       # the same arrival times
        assert gaps[0][-1] > 0                                     # ... and not all at t=0
        assert [o["token_ids"] for o in normal["outputs"]] == \
            [o["token_ids"] for o in overlap["outputs"]]
        rows = rows_from_record(record, record["config"]["request_rate"])
        assert [r["loop"] for r in rows] == ["normal", "overlap"]
        assert all(r["itl_ms_p50"] > 0 and r["request_rate"] == 30.0 for r in rows)
        assert len(latency_figure(rows)["data"]) == 10

        # The bundled model ships a plain chat template: the prompts go in as user messages,
        # and the record says which way they went in (the page says so).
        chat = _run(service, chat=True)[-1]
        assert isinstance(chat, RunFinished) and chat.record["config"]["chat"] is True
    finally:
        service.close()


def test_a_shared_system_prompt_is_computed_once_per_loop():
    """Six prompts after one 48-token system prompt, four slots: the first batch computes it,
    the requests admitted later find it in the prefix cache, in every loop alike (each loop
    starts from an empty cache)."""
    service = SchedulerService()
    try:
        final = _run(service, shared_prefix=48)[-1]
        assert isinstance(final, RunFinished), final
        assert final.record["config"]["shared_prefix"] == 48
        normal, overlap = final.record["runs"]
        hits = [run["metrics"]["prefix_hit_tokens"] for run in (normal, overlap)]
        assert hits[0] == hits[1] >= 2 * 32, hits       # two late requests, whole pages each
        assert [o["token_ids"] for o in normal["outputs"]] == \
            [o["token_ids"] for o in overlap["outputs"]]
    finally:
        service.close()


def test_the_gpu_warm_up_measures_the_device_from_warm_serial_runs(monkeypatch):
    """``_warm_loops`` (what a GPU page load sizes its controls by) runs the request's loops once,
    then measures ``MEASURE_RUNS`` more serial runs: the profile is their median, of this
    engine and workload (run here on the CPU, where the same code runs)."""
    from engine.scheduler_process import service as service_module

    service = SchedulerService()
    try:
        request = LiveRunRequest(
            engine=EngineConfig(model="bundled", device="cpu", dtype="float32", max_batch_size=4,
                                max_seq_len=64),
            workload=Workload.of_words(8, 8, texts=("Once upon a time", "The license grants") * 2,
                                       stop_early=True),
            loops=(NORMAL, OVERLAP))
        engine = service._engine(request.engine, service.engines)
        measured = []
        real = service_module._run_reported

        def counting(engine, prompts, params, loop, *rest, **kw):
            result = real(engine, prompts, params, loop, *rest, **kw)
            measured.append((loop.loop, result.metrics["t_fwd_us"], result.metrics["t_cpu_us"]))
            return result

        monkeypatch.setattr(service_module, "_run_reported", counting)
        profile = service._warm_loops(engine, request)
        loops = [loop for loop, _, _ in measured]
        assert loops == ["normal", "overlap"] + ["normal"] * service_module.MEASURE_RUNS
        last = measured[2:]
        assert profile.t_fwd_us == sorted(f for _, f, _ in last)[len(last) // 2]
        assert profile.t_cpu_us == sorted(c for _, _, c in last)[len(last) // 2]
        assert (profile.model, profile.batch, profile.device_kind) == ("bundled", 4, "cpu-process")
    finally:
        service.close()
