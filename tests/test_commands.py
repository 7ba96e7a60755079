"""``python -m bench`` and ``python -m studies``: one command a module, each listed with one line.

Every command names a module with a ``main(argv)``, the help lists each by the first line of its
module's docstring, and a name that is not a command, or a bad value, gets a message and exit
status 2, never a traceback."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import bench.__main__ as bench_main
import studies.__main__ as studies_main
from bench import cli

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = {"python -m bench": bench_main, "python -m studies": studies_main}


def _tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


@pytest.mark.parametrize("prog", ENTRIES)
def test_every_command_is_a_module_with_a_main_and_a_line_of_help(prog, capsys):
    commands = ENTRIES[prog].COMMANDS
    for module in commands.values():
        tree = _tree(module)
        assert any(isinstance(node, ast.FunctionDef) and node.name == "main"
                   for node in tree.body), f"{module} has no main(argv)"
        assert ast.get_docstring(tree), f"{module} has no docstring to list it by"
    assert ENTRIES[prog].main(["--help"]) == 0
    listed = capsys.readouterr().out
    for name, module in commands.items():
        line = next(line for line in listed.splitlines() if line.split()[:1] == [name])
        assert cli.summary(module) and line.endswith(cli.summary(module))


@pytest.mark.parametrize("prog", ENTRIES)
def test_a_name_that_is_no_command_gets_a_message(prog, capsys):
    assert ENTRIES[prog].main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert "no command 'no-such-command'" in err and all(n in err for n in ENTRIES[prog].COMMANDS)
    assert ENTRIES[prog].main([]) == 2                      # no name: the list, and a failure


def test_the_studies_and_the_benchmarks_are_two_lists():
    """A measurement lives in one place: the lab's are not the reader's benchmarks."""
    assert not set(bench_main.COMMANDS.values()) & set(studies_main.COMMANDS.values())
    assert all(m.startswith("bench.") for m in bench_main.COMMANDS.values())
    assert all(m.startswith("studies.") for m in studies_main.COMMANDS.values())


def test_a_bad_rate_is_said_not_raised(capsys):
    assert bench_main.main(["rates", "--rates", "-1", "--device", "cpu"]) == 2
    assert "--rates must be a number of requests per second" in capsys.readouterr().err


def test_a_command_runs_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "studies", "trace-kernels",
                           str(ROOT / "tests" / "data" / "traces" / "sglang-overlap-b1.trace.json.gz")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "DECODE bs=1" in done.stdout and "matmul (GEMM / GEMV)" in done.stdout
