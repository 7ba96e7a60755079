"""The command line: every loop it is asked for runs, lands in the record, and bad flags get a
one-line error and exit code 2, not a traceback."""

from __future__ import annotations

import json

import pytest

from engine.__main__ import main


def test_mode_all_runs_three_loops_and_records_them(tmp_path, capsys):
    out = tmp_path / "run.json"
    rc = main(["--device", "cpu", "--model", "bundled", "--dtype", "float64", "--mode", "all",
               "--decode-steps", "2", "--requests", "3", "--batch-size", "3", "--prompt-len", "5",
               "--max-new-tokens", "6", "--show-text", "0", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "max(T_fwd, T_cpu / 2)" in text and "max(T_fwd, T_cpu)" in text
    runs = json.loads(out.read_text())["runs"]
    assert [(r["loop"], r["decode_steps"]) for r in runs] == [("normal", 1), ("overlap", 1),
                                                              ("multistep", 2)]
    tokens = [[o["token_ids"] for o in r["outputs"]] for r in runs]
    assert tokens[0] == tokens[1] == tokens[2]


def test_bad_flags_give_an_error_line(capsys):
    assert main(["--device", "cpu", "--mode", "all"]) == 2
    assert "--decode-steps" in capsys.readouterr().err
    assert main(["--device", "cpu", "--requests", "0"]) == 2
    assert "--requests" in capsys.readouterr().err


def test_arrivals_trace_runs_both_loops_on_its_times_and_lengths(tmp_path, capsys):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps([{"arrival_s": 0.0, "prompt_tokens": 5, "output_tokens": 3},
                                 {"arrival_s": 0.25, "prompt_tokens": 9, "output_tokens": 6},
                                 {"arrival_s": 0.3, "prompt_tokens": 2, "output_tokens": 4}]))
    out = tmp_path / "run.json"
    rc = main(["--device", "cpu", "--dtype", "float64", "--mode", "both", "--arrivals",
               str(trace), "--batch-size", "2", "--ignore-eos", "--show-text", "0",
               "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "arrivals: 3 requests over 0.3 s" in text and "TTFT ms mean / p50 / p99" in text
    runs = json.loads(out.read_text())["runs"]
    for run in runs:
        outs = run["outputs"]
        assert [len(o["token_ids"]) for o in outs] == [3, 6, 4]
        assert [o["prompt_tokens"] for o in outs] == [5, 9, 2]
        gaps = [outs[i]["arrival_us"] - outs[0]["arrival_us"] for i in (1, 2)]
        assert gaps == [pytest.approx(250_000, abs=1), pytest.approx(300_000, abs=1)]
        assert run["metrics"]["itl_ms_p99"] > 0
    assert [o["token_ids"] for o in runs[0]["outputs"]] == [o["token_ids"] for o in runs[1]["outputs"]]


def test_bad_arrival_flags_give_an_error_line(tmp_path, capsys):
    assert main(["--device", "cpu", "--request-rate", "0"]) == 2
    assert "--request-rate" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('[{"arrival_s": -2}]')
    assert main(["--device", "cpu", "--arrivals", str(bad)]) == 2
    assert "arrival_s" in capsys.readouterr().err
    assert main(["--device", "cpu", "--arrivals", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_an_arrivals_file_that_is_no_list_names_the_two_shapes_it_takes(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert main(["--device", "cpu", "--arrivals", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ('error: empty.json: expected a non-empty list of requests, or an object '
                   'with one: {"requests": [...]}'), err
