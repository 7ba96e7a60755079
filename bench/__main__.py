"""The benchmarks a reader runs to see the lesson's numbers: ``python -m bench NAME [flags]``.

    python -m bench loops --device cpu --quick            # normal vs overlap
    python -m bench recorder --models bundled             # span recording on vs off
    python -m bench rates --rates 2 4 8 inf               # latency against request rate
    python -m bench app-workload --repeats 5              # the page's workload, with its spread
    python -m bench classroom --visitors 30 --browsers 3  # a class presses Run at once

The lab's one-off measurements are ``python -m studies``."""

from __future__ import annotations

import sys

from bench.cli import dispatch

# A command's name -> its module (its docstring's first line is its help, ``main(argv)`` runs it).
COMMANDS = {
    "loops": "bench.decode",
    "recorder": "bench.overhead",
    "multistep": "bench.multistep",
    "rates": "bench.latency_vs_rate",
    "load": "bench.load",
    "app-workload": "bench.app_workload",
    "classroom": "bench.classroom",
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("python -m bench", __doc__ or "", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
