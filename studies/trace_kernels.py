"""Where another engine's decode forward goes, kernel by kernel, from its own profiler trace.

    python -m studies trace-kernels tests/data/traces/sglang-overlap-b1.trace.json.gz

Each kind of step the trace marks (SGLang's ``step[DECODE bs=16]``) gets the account that
``python -m studies forward-gap`` prints for our graph replays (``studies.kernel_account``), so
the two forwards compare kind by kind. Torch-free.
"""

from __future__ import annotations

from pathlib import Path

from bench import cli
from record.imported.profiler_events import TraceImportError
from studies.kernel_account import format_account, trace_accounts


def run(paths: list[str], skip: int = 1) -> int:
    """Every file's accounts, printed (of each kind of step, the first ``skip`` are left out
    where there are more); 2 if a file could not be read as a trace."""
    code = 0
    for path in paths:
        try:
            accounts = trace_accounts(path, skip)
        except (TraceImportError, OSError) as error:
            print(f"{path}: {error}")
            code = 2
            continue
        if not accounts:
            print(f"{path}: no step marks (SGLang's step[DECODE bs=N]) to read steps from")
            continue
        for label, acc in sorted(accounts.items()):
            print(f"\n### {Path(path).name}: {label}\n\n" + format_account(acc))
    return code


def main(argv: list[str]) -> int:
    p = cli.parser("python -m studies trace-kernels", __doc__)
    p.add_argument("traces", nargs="+", metavar="FILE", help="profiler traces (.json or .json.gz)")
    return run(p.parse_args(argv).traces)
