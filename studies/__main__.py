"""The lab's measurements, one command each: ``python -m studies NAME [flags]``.

Each backs one figure of docs/benchmarks.md (the command is beside it there) and imports the
lesson's packages; nothing in the lesson imports them. ``bash studies/gpu.sh`` runs them (and
the CUDA tests, and the recorded runs) on a GPU machine.
"""

from __future__ import annotations

import sys

from bench.cli import dispatch

# A command's name -> its module (its docstring's first line is its help, ``main(argv)`` runs it).
COMMANDS = {
    "peers": "studies.peers.benchmark",
    "forward-gap": "studies.forward_gap",
    "decode-kernels": "studies.decode_kernels",
    "trace-kernels": "studies.trace_kernels",
    "launch-cost": "studies.launch_cost",
    "host-cost": "studies.host_cost",
    "copy-placement": "studies.copy_placement",
    "ttft-bound": "studies.ttft_bound",
    "gpu-first-click": "studies.gpu_first_click",
    "click-beside-busy-loop": "studies.click_beside_busy_loop",
    "clicks-in-a-browser": "studies.clicks_in_a_browser",
    "profile-traces": "studies.profile_traces",
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("python -m studies", __doc__ or "", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
