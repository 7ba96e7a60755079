"""The app's default workload through the CLI, several times: each loop's figures with their spread.

    python -m bench app-workload --repeats 5                       # what the page's Run does
    python -m bench app-workload --repeats 5 -- --mode all --decode-steps 4 --extra-cpu-us 20000

Each run is one ``python -m engine`` call on the page's starting workload (flags after ``--``
win). Per loop, as "median (min-max)": GPU busy, output tok/s, and against the normal loop the
speedup per step, the formula's prediction and the whole-run ratio."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import cli

ROOT = Path(__file__).resolve().parent.parent
APP_WORKLOAD = ["--device", "cpu", "--requests", "16", "--batch-size", "16", "--prompt-words",
                "24", "--max-new-tokens", "96", "--extra-cpu-us", "4000", "--stop-early",
                "--show-text", "0"]


def one_run(extra: list[str]) -> list[dict[str, Any]]:
    """The runs of one CLI call (its record's ``runs``)."""
    from record.run_record import load_record

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "engine", *APP_WORKLOAD, *extra, "--json", str(out)]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the CLI failed ({done.returncode}): {done.stderr[-2000:]}")
        return [dict(r) for r in load_record(out)["runs"]]


def loop_name(run: dict[str, Any]) -> str:
    from record.schema import loop_label

    return loop_label(run.get("loop", "?"), run.get("decode_steps", 1))


def figures(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per loop: busy, steady busy, output tok/s, other load; against normal: the speedups."""
    from record.metrics import compare_runs
    from record.schema import Loop

    by_name = {loop_name(r): r for r in runs}
    normal = by_name.get(Loop.NORMAL)
    out = {}
    for name, run in by_name.items():
        m = run["metrics"]
        row = {"busy": m.get("gpu_busy_frac", 0.0), "steady_busy": m.get("steady_busy_frac", 0.0),
               "tok_s": m.get("tokens_per_s", 0.0),
               "other_load": run.get("host", {}).get("other_cpu_frac", float("nan"))}
        if normal is not None and name != Loop.NORMAL:
            c = compare_runs(normal["metrics"], m, decode_steps=run.get("decode_steps", 1))
            row.update(speedup=c["measured_speedup"], predicted=c["predicted_speedup"],
                       whole=c["whole_run_speedup"])
        out[name] = row
    return out


def spread(values: list[float], fmt: str, unit: str = "") -> str:
    """ "median (min-max)" of ``values``, each formatted with ``fmt`` and followed by ``unit``;
    "-" when nothing was measured (NaN)."""
    values = [v for v in values if v == v]
    if not values:
        return "-"
    cell = [format(v, fmt) + unit for v in (statistics.median(values), min(values), max(values))]
    return cell[0] if len(values) == 1 else f"{cell[0]} ({cell[1]}-{cell[2]})"


def table(results: list[dict[str, dict[str, float]]]) -> str:
    names = list(dict.fromkeys(name for result in results for name in result))
    lines = ["| loop | GPU busy | steady busy | output tok/s | speedup / step | predicted | "
             "whole run | other load |", "|---|---|---|---|---|---|---|---|"]
    for name in names:
        rows = [r[name] for r in results if name in r]

        def cell(key: str, fmt: str, unit: str = "", rows=rows) -> str:
            return spread([r[key] for r in rows if key in r], fmt, unit)

        lines.append(f"| {name} | {cell('busy', '.1%')} | {cell('steady_busy', '.1%')} | "
                     f"{cell('tok_s', '.0f')} | {cell('speedup', '.2f', 'x')} | "
                     f"{cell('predicted', '.2f', 'x')} | {cell('whole', '.2f', 'x')} | "
                     f"{cell('other_load', '.0%')} |")
    return "\n".join(lines)


def run(repeats: int, engine_args: list[str]) -> int:
    results = []
    for i in range(repeats):
        results.append(figures(one_run(engine_args)))
        print(f"run {i + 1}/{repeats} done", file=sys.stderr, flush=True)
    print(f"python -m engine {' '.join(APP_WORKLOAD + engine_args)}  ({repeats} runs; "
          "median (min-max))")
    print(table(results))
    return 0


def main(argv: list[str]) -> int:
    p = cli.parser("python -m bench app-workload", __doc__)
    p.add_argument("--repeats", type=int, default=3, help="CLI calls, each a fresh process")
    p.add_argument("engine_args", nargs="*", metavar="-- ENGINE_ARGS",
                   help="more flags for python -m engine, after --")
    args = p.parse_args(argv)
    return run(args.repeats, args.engine_args)
