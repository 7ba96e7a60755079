"""Was the machine quiet enough for a run's times to mean something about its loop?

The article's comparison assumes the scheduler and the device each have a processor to
themselves. A run records what the machine did meanwhile (``host``, from ``engine.host_load``):
other programs' share of all cores, and the device process's CPU time over its working time.
When other programs took a large share, or the device process waited for its core, the serial and
the overlapped run did not get the same machine, and comparing their times compares the load.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BUSY_SHARE = 0.25       # other programs' share of all cores that makes a run's times unreliable
DEVICE_SHARE = 0.80     # the device process had its core less of its working time than this


@dataclass(frozen=True)
class MachineLoad:
    other_share: float | None       # other programs' share of all cores (0-1)
    cpus: int                       # cores of the machine
    device_share: float | None      # the device process's CPU time over its working time

    @property
    def others_busy(self) -> bool:
        return self.other_share is not None and self.other_share >= BUSY_SHARE

    @property
    def device_starved(self) -> bool:
        return self.device_share is not None and self.device_share < DEVICE_SHARE

    @property
    def busy(self) -> bool:
        """Too busy for this run's times to compare with another run's."""
        return self.others_busy or self.device_starved


def machine_load(run: Mapping[str, Any]) -> MachineLoad | None:
    """What the run measured of the machine; None where it measured nothing (a recording made
    elsewhere, a trace)."""
    host = run.get("host")
    if not isinstance(host, dict):
        return None
    other, device = _number(host.get("other_cpu_frac")), _number(host.get("device_cpu_frac"))
    if other is None and device is None:
        return None
    return MachineLoad(other, int(_number(host.get("cpus")) or 0), device)


def busiest(runs: Sequence[Mapping[str, Any]]) -> MachineLoad | None:
    """Of the runs that found the machine busy, the one it was busiest for (None: none did)."""
    loads = [load for load in map(machine_load, runs) if load is not None and load.busy]
    return max(loads, key=lambda load: (load.device_starved,
                                        load.other_share or 0.0)) if loads else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
