"""The schema-1 run record: made, saved, loaded and validated without losing or inventing data."""

import copy
import gzip
import json

import pytest

from record.metrics import compute_metrics
from record.recorder import Span
from record.run_record import (
    SCHEMA,
    RecordError,
    load_record,
    make_record,
    save_record,
    validate_record,
)
from record.schema import LANES

ENV = {"device_name": "cpu", "torch_version": "2.13.0+cpu"}
CONFIG = {"model": "bundled", "device": "cpu", "overlap": False, "max_batch_size": 2, "seed": 0}


def run(loop: str = "normal") -> dict:
    spans = [Span("cpu", "schedule", 0, 0.0, 10.0, 2, 2, [0, 1]),
             Span("engine_stream", "decode", 0, 10.0, 50.0, 2, 2, [0, 1]),
             Span("scheduler_stream", "copy", 0, 50.0, 55.0, 2, 2, [0, 1])]
    outputs = [{"token_ids": [5, 7], "text": "hi", "finish_reason": "length", "prompt_tokens": 3,
                "arrival_us": 0.0, "first_token_us": 20.0, "finish_us": 55.0}]
    return {"loop": loop, "decode_steps": 1, "extra_cpu_us": 0, "spans": spans,
            "outputs": outputs, "metrics": compute_metrics(spans, outputs)}


@pytest.fixture
def record() -> dict:
    return make_record(ENV, CONFIG, [run("normal"), run("overlap")])


def test_make_record_fills_the_layout(record):
    assert record["schema"] == SCHEMA == 1
    assert {"device_name", "torch_version", "python_version", "platform", "date"} <= set(
        record["env"])
    first = record["runs"][0]
    assert first["label"] == "normal"
    assert first["lanes"] == ["cpu", "engine_stream", "scheduler_stream"]
    assert first["gpu_lanes"] == ["engine_stream", "scheduler_stream"]
    assert first["spans"][1] == {"lane": "engine_stream", "phase": "decode", "step": 0,
                                 "start_us": 10.0, "end_us": 50.0, "batch_size": 2,
                                 "num_tokens": 2, "req_ids": [0, 1]}
    json.dumps(record, allow_nan=False)


def test_given_fields_win_over_defaults():
    given = {"loop": "overlap", "label": "overlap (cuda graphs)", "lanes": list(LANES),
             "gpu_lanes": ["engine_stream"]}
    made = make_record({**ENV, "date": "2025-01-01"}, CONFIG, [{**run(), **given}])
    assert made["env"]["date"] == "2025-01-01"
    assert {k: made["runs"][0][k] for k in given} == given


@pytest.mark.parametrize("name", ["run.json", "run.json.gz"])
def test_round_trip_make_save_load_validate(record, tmp_path, name):
    path = save_record(record, tmp_path / name)
    assert path.read_bytes().startswith(b"\x1f\x8b") == name.endswith(".gz")
    loaded = load_record(path)
    assert loaded == record
    assert validate_record(loaded) == record
    assert not list(tmp_path.glob("*.partial"))


def test_load_tolerates_gzip_whatever_the_name(record, tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(gzip.compress(json.dumps(record).encode()))
    assert load_record(path) == record


def test_wrong_schema_is_refused_with_the_version(record):
    with pytest.raises(RecordError, match="schema 2 is not supported"):
        validate_record({**record, "schema": 2})
    with pytest.raises(RecordError, match=r"missing key.*'schema'"):
        validate_record({k: v for k, v in record.items() if k != "schema"})
    with pytest.raises(RecordError, match="expected an object"):
        validate_record([record])
    assert issubclass(RecordError, ValueError)


def broken(record: dict, change) -> dict:
    bad = copy.deepcopy(record)
    change(bad)
    return bad


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("runs"), r"record: missing key\(s\) 'runs'"),
    (lambda r: r["env"].pop("torch_version"), r"record.env: missing key\(s\) 'torch_version'"),
    (lambda r: r["runs"][1].pop("metrics"), r"record.runs\[1\]: missing key\(s\) 'metrics'"),
    (lambda r: r["runs"][0]["metrics"].pop("gpu_busy_frac"), r"metrics: missing.*gpu_busy_frac"),
    (lambda r: r["runs"][0]["metrics"].update(tokens_per_s=float("nan")), "finite number"),
    (lambda r: r["runs"][0]["spans"][2].pop("end_us"), r"spans\[2\]: missing key\(s\) 'end_us'"),
    (lambda r: r["runs"][0]["spans"][0].update(end_us=-1.0), "end_us is before start_us"),
    (lambda r: r["runs"][0]["spans"][0].update(step="3"), "step must be an integer"),
    (lambda r: r["runs"][0]["outputs"][0].pop("text"), r"outputs\[0\]: missing key\(s\) 'text'"),
    (lambda r: r["runs"][0].update(lanes="cpu"), "lanes must be a list"),
    (lambda r: r["runs"][0].update(memory=[1]), r"runs\[0\].memory: expected an object"),
    (lambda r: r["runs"][0].update(memory={"total_pages": 0, "steps": []}),
     r"memory: total_pages must be a positive number"),
    (lambda r: r["runs"][1].update(memory={"total_pages": 8, "steps": [[1, 0.0, 2, 1]]}),
     r"runs\[1\].memory: steps\[0\] must be 5 finite numbers"),
    (lambda r: r["runs"][0].update(memory={"total_pages": 8, "steps": [[1, 0.0, 2, 1, 5]],
                                           "retractions": [[1, "soon", 3]]}),
     r"memory: retractions\[0\] must be 3 finite numbers"),
])
def test_invalid_records_say_where_and_why(record, change, message):
    with pytest.raises(RecordError, match=message):
        validate_record(broken(record, change))


def test_save_refuses_an_invalid_record(record, tmp_path):
    with pytest.raises(RecordError):
        save_record({**record, "schema": 0}, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.parametrize("data, message", [
    (b"{not json", "not a JSON run record"),
    (gzip.compress(b"{}")[:12], "cannot read record"),
    (b'{"schema": 1}', "missing key"),
])
def test_load_refuses_broken_files(tmp_path, data, message):
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(RecordError, match=message):
        load_record(path)
    with pytest.raises(RecordError, match="cannot read record"):
        load_record(tmp_path / "missing.json")


def test_an_imported_trace_is_a_valid_run():
    from record.imported.profiler_import import import_profiler_trace

    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5},
              {"ph": "X", "cat": "gpu_memcpy", "name": "m", "pid": 0, "tid": 8, "ts": 20, "dur": 5}]
    imported = import_profiler_trace(json.dumps({"traceEvents": events}).encode())
    made = make_record(ENV, {"source": "trace"}, [imported])
    assert made["runs"][0] == imported


@pytest.mark.parametrize("field, value, words", [
    ("wasted_steps", "<b>", "wasted_steps must be an integer"),
    ("prompt_tokens", 1.5, "prompt_tokens must be an integer"),
    ("text", 7, "text and finish_reason must be strings"),
    ("token_ids", ["a"], "token_ids must be a list of integers"),
])
def test_output_fields_the_page_draws_are_checked(record, field, value, words):
    import copy

    bad = copy.deepcopy(record)
    bad["runs"][0]["outputs"] = [{"token_ids": [1], "text": "", "finish_reason": "stop",
                                  field: value}]
    with pytest.raises(RecordError, match=words):
        validate_record(bad)


def test_a_memory_trace_as_the_engine_writes_it_is_valid(record):
    good = copy.deepcopy(record)
    good["runs"][1]["memory"] = {"total_pages": 8, "steps": [[1, 0.0, 2, 1, 5], [2, 9.5, 3, 1, 4]],
                                 "retractions": [[2, 9.5, 7]]}
    assert validate_record(good)["runs"][1]["memory"]["total_pages"] == 8
