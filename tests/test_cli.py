"""The command line: every loop it is asked for runs, lands in the record, and bad flags get a
one-line error and exit code 2, not a traceback."""

from __future__ import annotations

import json

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
