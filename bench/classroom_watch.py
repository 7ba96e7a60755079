"""What the classroom benchmark watches on the machine: the server's memory and who used the cores.

``ServerWatch`` samples the proportional set size (PSS: a shared page split between its processes)
of the web server and every process under it, and takes the machine's CPU time at the start and
the end: how busy it was, and by whom. Linux's ``/proc`` only; elsewhere it says nothing."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
SAMPLE_S = 0.25


def children_of(pid: int) -> list[int]:
    """``pid`` and every process under it, from each process's parent in ``/proc/*/stat``."""
    parents: dict[int, int] = {}
    for entry in PROC.glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def pss_mib(pid: int) -> float:
    """A process's proportional set size in MiB (0 where it has gone or cannot be read)."""
    try:
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far (0 where it has gone)."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def machine_seconds() -> tuple[float, float]:
    """(busy, all) CPU seconds of every core since boot, from ``/proc/stat``."""
    try:
        values = [int(v) for v in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)          # idle + iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(values) - idle) / tick, sum(values) / tick


@dataclass
class CpuShares:
    """Shares of the machine's CPU time over the class, in % of all its cores' time."""

    busy: float
    server: float
    browsers: float
    clients: float
    others: float


@dataclass
class ServerWatch:
    """The server's peak memory (sampled) and the machine's CPU shares between ``start`` and
    ``stop``."""

    server_pid: int
    peak_mib: float = 0.0
    loads: list[float] = field(default_factory=list)      # the 1-minute load average, sampled
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _start: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self._start = self._cpu()
        self._thread = threading.Thread(target=self._sample, name="server-watch", daemon=True)
        self._thread.start()

    def stop(self) -> CpuShares:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        end = self._cpu()
        # Per process: what it used since the start (a process started since counts whole).
        spent = {key: value - self._start.get(key, 0.0) for key, value in end.items()}
        total = max(spent["all"], 1e-9)

        def share(group: str) -> float:
            return 100.0 * sum(v for k, v in spent.items() if k.startswith(group)) / total

        busy, server, browsers, clients = (share(g) for g in ("busy", "server", "browser",
                                                              "clients"))
        return CpuShares(busy, server, browsers, clients,
                         max(busy - server - browsers - clients, 0.0))

    def _sample(self) -> None:
        while not self._stop.is_set():
            tree = children_of(self.server_pid)
            self.peak_mib = max(self.peak_mib, sum(pss_mib(pid) for pid in tree))
            self.loads.append(os.getloadavg()[0])
            self._stop.wait(SAMPLE_S)

    def _cpu(self) -> dict[str, float]:
        """CPU seconds so far: the machine's, the server's processes', the browsers' (every other
        process under this one) and this process's own."""
        busy, every = machine_seconds()
        tree = children_of(self.server_pid)
        seconds = {"busy": busy, "all": every}
        seconds.update({f"server {pid}": cpu_seconds(pid) for pid in tree})
        seconds.update({f"browser {pid}": cpu_seconds(pid) for pid in children_of(os.getpid())
                        if pid not in tree and pid != os.getpid()})
        own = os.times()
        seconds["clients"] = own.user + own.system
        return seconds
