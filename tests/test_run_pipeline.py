"""One run pipeline, one typed config: every record of our runs is made by ``engine.run`` from a
``RunConfig``, whoever asked for it (the CLI, the scheduler process's live run, the server's
session), and each setting has one name and one home (a loop's settings in its run)."""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from dataclasses import fields, replace
from pathlib import Path

import pytest

from engine.config import NORMAL, OVERLAP, EngineConfig, HazardSwitches, LoopSpec
from engine.run import run_config
from engine.scheduler.arrivals import Arrival
from engine.workloads import Workload
from record.run_record import RecordError, config_of, is_ours, load_record, validate_record
from record.schema import OURS, Loop, RunConfig

ROOT = Path(__file__).resolve().parent.parent
KEYS = {f.name for f in fields(RunConfig)}


# ---- the config, typed ------------------------------------------------------------------------

def _config(**work) -> RunConfig:
    engine = EngineConfig(model="bundled", device="cpu", device_cpus=(0, 1),
                          hazards=HazardSwitches(no_cache_lock=True, inject_delay_us=300))
    return run_config(engine, Workload(24, 48, 16, **work))


def test_a_run_config_comes_back_from_its_json_as_it_was():
    config = _config(temperature=0.5, request_rate=4.0)
    back = RunConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert back == config and set(config.to_dict()) == KEYS
    assert back.device_cpus == (0, 1) and back.hazards == ("no_cache_lock", "inject_delay_us=300")
    assert (back.prompt_tokens, back.max_new_tokens, back.shared_prefix) == (24, 48, 16)


@pytest.mark.parametrize("change, words", [
    (lambda d: d.pop("max_batch_size"), "missing key(s) 'max_batch_size'"),
    (lambda d: d.update(loops=["normal"]), "unknown key(s) 'loops'"),
    (lambda d: d.update(extra_cpu_us=200), "unknown key(s) 'extra_cpu_us'"),      # a run's
    (lambda d: d.update(shared_prefix_tokens=0), "unknown key(s) 'shared_prefix_tokens'"),
    (lambda d: d.update(max_batch_size=True), "max_batch_size must be int"),
    (lambda d: d.update(model=None), "model must not be null"),
    (lambda d: d.update(temperature="hot"), "temperature must be a finite number or null"),
    (lambda d: d.update(device_cpus=[0, "1"]), "device_cpus must be a list of int"),
])
def test_a_config_that_is_not_a_run_config_is_refused_by_the_records_gate(change, words):
    record = load_record(ROOT / "assets" / "recorded" / "h200-bundled-graph-cpu200.json")
    assert is_ours(record)
    bad = copy.deepcopy(record)
    change(bad["config"])
    with pytest.raises(RecordError, match=r"record\.config: .*" + re.escape(words)):
        validate_record(bad)
    with pytest.raises(ValueError, match=re.escape(words)):
        RunConfig.from_dict(bad["config"])


def test_only_our_records_carry_a_run_config():
    """Another engine's record, an imported trace and runs side by side keep configs of their
    own; every record of ours read from the bundled files holds a RunConfig."""
    for path in sorted((ROOT / "assets" / "recorded").glob("*.json")):
        record = load_record(path)
        ours = record["env"].get("engine") == OURS
        assert (config_of(record) is not None) == ours, path.name
        assert all("mode" not in run and isinstance(run["extra_cpu_us"], int)
                   and "extra_cpu_us" not in run["metrics"] for run in record["runs"]), path.name
    peer = load_record(ROOT / "assets" / "recorded" / "h200-minisglang-qwen05-b16.json")
    assert config_of(peer) is None and peer["config"]["prompt_tokens"] == 32
    ours = load_record(ROOT / "assets" / "recorded" / "h200-ours-qwen05-b16.json")
    sources = {**ours, "config": {"sources": ["a.json", "b.json"]},
               "runs": [{**run, "source": "a.json"} for run in ours["runs"]]}
    assert config_of(validate_record(sources)) is None


def test_each_setting_has_one_name_and_says_what_it_does_not_know():
    words = run_config(EngineConfig(), Workload.of_words(24, 96, texts=("a b",) * 3), chat=True)
    assert (words.prompt_words, words.prompt_tokens, words.requests, words.chat) == (24, None, 3,
                                                                                    True)
    trace = (Arrival(0.0, 5, 3), Arrival(0.2, 9, 6))
    traced = run_config(EngineConfig(), Workload(16, 64, arrivals=trace, requests=2,
                                                 arrivals_file="trace.json"))
    assert (traced.prompt_tokens, traced.max_new_tokens, traced.arrivals_file) == (
        None, None, "trace.json")
    burst = run_config(EngineConfig(), Workload(request_rate=math.inf))
    assert burst.request_rate is None                 # a burst: every request at t=0
    served = run_config(EngineConfig(), None)
    assert served.served and served.requests is None and served.max_new_tokens is None
    assert _config().hazards == ("no_cache_lock", "inject_delay_us=300")


# ---- one producer -------------------------------------------------------------------------------

def test_records_of_our_runs_are_made_in_one_place():
    """``make_record`` is called for our runs only by ``engine.run`` (the imports of other
    engines' traces make their own in ``record``); nothing else builds our record's config."""
    callers = []
    for package in ("engine", "ui", "viz"):
        for path in (ROOT / package).rglob("*.py"):
            if "make_record(" in path.read_text():
                callers.append(str(path.relative_to(ROOT)))
    assert callers == ["engine/run.py"] and "make_record(" not in (ROOT / "app.py").read_text()


@pytest.fixture(scope="module")
def cli_record(tmp_path_factory):
    from engine.__main__ import main

    out = tmp_path_factory.mktemp("cli") / "run.json"
    assert main(["--device", "cpu", "--dtype", "float64", "--mode", "both", "--requests", "2",
                 "--batch-size", "2", "--prompt-len", "5", "--max-new-tokens", "4",
                 "--extra-cpu-us", "300", "--shared-prefix", "16", "--show-text", "0",
                 "--json", str(out)]) == 0
    return load_record(out)


@pytest.fixture(scope="module")
def live_record():
    """The scheduler process's live run (its service, in this process), each loop with its
    own extra CPU work."""
    from engine.scheduler_process.messages import LiveRunRequest, LoopFinished, RunFinished
    from engine.scheduler_process.service import SchedulerService

    request = LiveRunRequest(
        engine=EngineConfig(model="bundled", device="cpu", dtype="float64", max_batch_size=2,
                            max_seq_len=96),
        workload=Workload.of_words(4, 4, 16, texts=("Once upon a time", "The license grants"),
                                   ignore_eos=True),
        loops=(LoopSpec(Loop.NORMAL, 1, 300), LoopSpec(Loop.OVERLAP, 1, 0)))
    service = SchedulerService()
    events: list = []
    try:
        service.handle(request, events.append, threading.Event())
    finally:
        service.close()
    assert isinstance(events[-1], RunFinished), events[-1]
    finished = [e.run for e in events if isinstance(e, LoopFinished)]
    assert finished == events[-1].record["runs"]          # each loop's run, as it ended
    return events[-1].record


def test_the_cli_writes_a_run_config_and_each_loops_extra_cpu_work_in_its_run(cli_record):
    config = config_of(cli_record)
    assert config is not None and set(cli_record["config"]) == KEYS
    assert (config.requests, config.prompt_tokens, config.max_new_tokens,
            config.shared_prefix, config.served) == (2, 5, 4, 16, False)
    assert [(run["loop"], run["extra_cpu_us"]) for run in cli_record["runs"]] == [
        ("normal", 300), ("overlap", 300)]


def test_the_live_run_keeps_every_loops_own_extra_cpu_work(live_record, cli_record):
    config = config_of(live_record)
    assert config is not None and set(live_record["config"]) == set(cli_record["config"])
    assert (config.requests, config.prompt_words, config.prompt_tokens, config.shared_prefix,
            config.ignore_eos) == (2, 4, None, 16, True)
    assert [(run["loop"], run["extra_cpu_us"]) for run in live_record["runs"]] == [
        ("normal", 300), ("overlap", 0)]
    assert all("extra_cpu_us" not in run["metrics"] for run in live_record["runs"])


def test_the_session_record_builds_its_config_the_same_way(cli_record):
    """The server's session record (``engine.run.session_record``, from the config the
    scheduler process sends when the session starts): a RunConfig with the same keys, said to
    be a served session, the loop's extra CPU work in its run."""
    from engine.run import session_record
    from record.recorder import Span

    config = run_config(EngineConfig(model="bundled", device="cpu"), None)
    spans = [Span("engine_stream", "decode", n, 100.0 * n, 100.0 * n + 80, 1, 1, [0])
             for n in range(1, 6)]
    outputs = [{"token_ids": [5, 6], "text": "", "finish_reason": "length", "prompt_tokens": 3,
                "arrival_us": 0.0, "first_token_us": 180.0, "finish_us": 580.0,
                "token_us": [180.0, 580.0]}]
    record = session_record({"device_name": "cpu", "torch_version": "x"}, config,
                            replace(NORMAL, extra_cpu_us=50), "normal (served)", spans, outputs,
                            spans_dropped=7)
    assert config_of(record) == config and set(record["config"]) == set(cli_record["config"])
    run = record["runs"][0]
    assert record["config"]["served"] is True and record["env"]["engine"] == OURS
    assert (run["extra_cpu_us"], run["spans_dropped"]) == (50, 7)


def test_token_id_prompts_run_as_given_and_each_loop_keeps_its_median_run():
    """What a comparison with other engines gives every engine: the same token-id prompts
    (``Workload.prompt_ids``), each loop warmed up, then run ``repeats`` times, the loops taking
    turns (a burst of other load hits them alike), the record keeping each loop's run of median
    time; the watch hears every run as it ends."""
    from engine import Engine
    from engine.run import RunOptions, compare_loops

    ids = ((5, 6, 7, 8, 9), (10, 11, 12, 13, 14))
    work = Workload(5, 4, requests=2, prompt_ids=ids, ignore_eos=True)
    with Engine(work.engine_config(model="bundled", device="cpu", dtype="float64",
                                   max_batch_size=2)) as engine:
        watch = _Counting()
        record = compare_loops(engine, work, [NORMAL, OVERLAP],
                               options=RunOptions(warm_up=True, repeats=3, watch=watch))
    assert watch.runs == [0, 1, 0, 1, 0, 1] and len(watch.kept) == 6
    for index, run in enumerate(record["runs"]):
        heard = sorted(watch.kept[index::2], key=lambda r: r["metrics"]["wall_s"])
        assert run["metrics"] == heard[1]["metrics"]            # the median of three
    config = config_of(record)
    assert config is not None and (config.prompt_tokens, config.requests) == (5, 2)
    assert [run["loop"] for run in record["runs"]] == ["normal", "overlap"]
    for run in record["runs"]:
        assert [o["prompt_tokens"] for o in run["outputs"]] == [5, 5]
        assert all(len(o["token_ids"]) == 4 for o in run["outputs"])
    with pytest.raises(ValueError, match="repeats"):
        RunOptions(repeats=0)


def test_the_quietest_round_is_kept_whole(monkeypatch):
    """With ``quietest``, the record keeps one round (a run of each loop, side by side in time):
    the one in which other programs took the least of the machine, never runs of two rounds."""
    from engine import Engine
    from engine.run import RunOptions, compare_loops
    from record import host_load

    shares = iter([0.6, 0.5, 0.1, 0.3, 0.0, 0.7])     # the middle pair: the quietest as a whole
    monkeypatch.setattr(host_load, "host_report", lambda *_args: {
        "cpus": 2.0, "other_cpu_frac": next(shares), "device_cpu_frac": 1.0})
    work = Workload(5, 4, requests=2, ignore_eos=True)
    with Engine(work.engine_config(model="bundled", device="cpu", max_batch_size=2)) as engine:
        watch = _Counting()
        record = compare_loops(engine, work, [NORMAL, OVERLAP],
                               options=RunOptions(repeats=3, quietest=True, watch=watch))
    assert [run["host"]["other_cpu_frac"] for run in record["runs"]] == [0.1, 0.3]
    assert [run["metrics"] for run in record["runs"]] == [r["metrics"] for r in watch.kept[2:4]]


class _Counting:
    """A watch that notes each run of a loop and the run the record keeps."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.kept: list = []

    def loop(self, index, _spec):
        from contextlib import nullcontext

        self.runs.append(index)
        return nullcontext(None)

    def finished(self, _index, run):
        self.kept.append(run)
