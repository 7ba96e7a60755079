"""What else the machine did during a run, and whether it was quiet enough for the run's times to
mean something about its loop. A run reads ``/proc`` at its start and end and keeps other
programs' share of the cores and the device process's CPU time over its working time; where others
took a large share or the device waited for its core, the loops did not get the same machine."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from record.schema import is_number

_server_pid: int | None = None      # the server process beside this engine, if there is one


def serve_beside(pid: int | None) -> None:
    """Name the server process that started this engine's process (``None``: none)."""
    global _server_pid
    _server_pid = pid


def our_pids(device_pid: int | None) -> list[int]:
    """The processes a run counts as its own: this one, the device's, the server's."""
    return [os.getpid()] + [p for p in (device_pid, _server_pid) if p]


@dataclass(frozen=True)
class CpuSnapshot:
    wall_s: float
    machine_busy_s: float          # every core's non-idle time, all programs
    ours_s: dict[int, float]       # CPU time of each of our processes, by pid


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def _machine_busy_s() -> float:
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)      # idle + iowait
    return (sum(fields[:8]) - idle) / _ticks()                       # guest time is inside user


def _process_s(pid: int) -> float | None:
    """A process's CPU time so far; ``None`` once it has ended (or cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (float(fields[11]) + float(fields[12])) / _ticks()    # utime + stime
    except (OSError, ValueError, IndexError):
        return None


def snapshot(pids: list[int]) -> CpuSnapshot | None:
    """CPU counters now (ended processes left out); ``None`` where ``/proc`` cannot be read."""
    try:
        machine = _machine_busy_s()
    except (OSError, ValueError, IndexError):
        return None
    read = {p: _process_s(p) for p in pids}
    return CpuSnapshot(time.monotonic(), machine, {p: s for p, s in read.items() if s is not None})


def host_report(start: CpuSnapshot | None, end: CpuSnapshot | None, device_pid: int | None,
                device_busy_s: float) -> dict[str, float]:
    """``other_cpu_frac`` (other programs' share of all cores), ``device_cpu_frac`` (the device
    process's CPU time over its working time), ``server_cpu_frac`` and ``cpus``. Where a process
    of ours ended meanwhile, the others' share cannot be told and is left out."""
    if start is None or end is None or end.wall_s <= start.wall_s:
        return {}
    cpus = os.cpu_count() or 1
    wall = end.wall_s - start.wall_s
    used = {pid: end.ours_s[pid] - t for pid, t in start.ours_s.items() if pid in end.ours_s}
    report = {"cpus": float(cpus)}
    if len(used) == len(start.ours_s):
        other = max(0.0, (end.machine_busy_s - start.machine_busy_s) - sum(used.values()))
        report["other_cpu_frac"] = min(1.0, other / (wall * cpus))
    if device_pid is not None and device_pid in used and device_busy_s > 0:
        report["device_cpu_frac"] = min(1.0, used[device_pid] / device_busy_s)
    if _server_pid is not None and _server_pid in used:
        report["server_cpu_frac"] = min(1.0, used[_server_pid] / (wall * cpus))
    return report


# ---- reading a run's report ------------------------------------------------------------------

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


def machine_load(run: Mapping[str, object]) -> MachineLoad | None:
    """What the run measured of the machine; None where it measured nothing."""
    host = run.get("host")
    if not isinstance(host, dict):
        return None
    other, device = _number(host.get("other_cpu_frac")), _number(host.get("device_cpu_frac"))
    if other is None and device is None:
        return None
    return MachineLoad(other, int(_number(host.get("cpus")) or 0), device)


def busiest(runs: Sequence[Mapping[str, object]]) -> MachineLoad | None:
    """Of the runs that found the machine busy, the one it was busiest for (None: none did)."""
    loads = [load for load in map(machine_load, runs) if load is not None and load.busy]
    return max(loads, key=lambda load: (load.device_starved,
                                        load.other_share or 0.0)) if loads else None


def _number(value: object) -> float | None:
    return float(value) if is_number(value) else None
