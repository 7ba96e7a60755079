"""What a run measures of the machine: the server that started the engine is counted as ours,
apart from other programs (``record.host_load``)."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import sys
import time
from contextlib import contextmanager

import pytest

from record import host_load

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _spin_then_wait(cpu_s: float, done, stop) -> None:
    """Use ``cpu_s`` seconds of CPU time (however long the machine makes that take), say so,
    then stay alive without using the CPU until told to end."""
    start = time.process_time()
    while time.process_time() - start < cpu_s:
        pass
    done.set()
    stop.wait(60)


@contextmanager
def _stand_in_server(cpu_s: float):
    """A process named as the server beside this engine, that uses ``cpu_s`` of CPU time then
    waits: yields it and its two events (``done``: the time is used; ``stop``: end now). Ended
    and forgotten on the way out."""
    ctx = mp.get_context("spawn")
    done, stop = ctx.Event(), ctx.Event()
    server = ctx.Process(target=_spin_then_wait, args=(cpu_s, done, stop), daemon=True)
    server.start()
    try:
        host_load.serve_beside(server.pid)
        yield server, done, stop
    finally:
        host_load.serve_beside(None)
        stop.set()
        server.join(30)


def test_the_server_process_is_counted_apart_from_other_programs():
    with _stand_in_server(0.3) as (server, done, _):
        assert server.pid in host_load.our_pids(None)
        start = host_load.snapshot(host_load.our_pids(None))
        assert done.wait(60), "the stand-in server never used its CPU time"
        end = host_load.snapshot(list(start.ours_s))
        report = host_load.host_report(start, end, None, 0.0)
        # The same two snapshots, the server left out of ours: its time becomes another program's.
        strip = {k: v for k, v in start.ours_s.items() if k != server.pid}
        as_other = host_load.host_report(dataclasses.replace(start, ours_s=strip), end, None, 0.0)
    wall, cpus = end.wall_s - start.wall_s, report["cpus"]
    used = end.ours_s[server.pid] - start.ours_s[server.pid]
    assert used >= 0.25                       # its 0.3 s, to the clock's tick
    assert report["server_cpu_frac"] == pytest.approx(used / (wall * cpus))
    assert "server_cpu_frac" not in as_other
    # Moving the server's time to other programs never lowers their share.
    assert as_other["other_cpu_frac"] >= report["other_cpu_frac"]
    # Neither share clamped, the difference is the server's share. On a quiet machine the other
    # programs' share can be clamped at 0: the machine's counters and a process's are read at
    # slightly different instants and rounded apart, so ours can exceed the machine's by a tick.
    if 0.0 < report["other_cpu_frac"] and as_other["other_cpu_frac"] < 1.0:
        assert as_other["other_cpu_frac"] - report["other_cpu_frac"] == pytest.approx(
            report["server_cpu_frac"], abs=1e-9)
    assert host_load.our_pids(None) == [host_load.os.getpid()]


def test_a_process_of_ours_that_ends_mid_run_keeps_the_rest_of_the_report():
    with _stand_in_server(0.05) as (server, _, stop):
        start = host_load.snapshot(host_load.our_pids(None))
        assert start is not None and server.pid in start.ours_s
        stop.set()                                  # the server stops before the run ends
        server.join(60)
        assert server.exitcode is not None, "the stand-in server did not end"
        end = host_load.snapshot(list(start.ours_s))
        report = host_load.host_report(start, end, None, 0.0)
    assert end is not None and server.pid not in end.ours_s and host_load.os.getpid() in end.ours_s
    assert report["cpus"] == float(host_load.os.cpu_count() or 1)
    # Its time is in the machine's count and can no longer be read: no share is claimed for it or
    # for the other programs, rather than one that holds the ended server's time.
    assert "server_cpu_frac" not in report and "other_cpu_frac" not in report


def test_the_device_share_is_kept_when_only_the_server_ended():
    me = host_load.os.getpid()
    start = host_load.CpuSnapshot(10.0, 100.0, {me: 1.0, 2_000_001: 5.0})
    end = host_load.CpuSnapshot(12.0, 102.0, {me: 1.5})       # the second process has ended
    report = host_load.host_report(start, end, me, 1.0)
    assert report["device_cpu_frac"] == pytest.approx(0.5)
    assert "other_cpu_frac" not in report
    whole = host_load.host_report(start, dataclasses.replace(end, ours_s={me: 1.5, 2_000_001: 5.5}),
                                  me, 1.0)
    cpus = whole["cpus"]
    assert whole["other_cpu_frac"] == pytest.approx(1.0 / (2.0 * cpus))   # 2 s busy, 1 s ours


def test_the_server_share_is_what_the_other_programs_share_loses_when_it_is_counted_as_ours():
    """The arithmetic of the test above on known counters, so it runs every time (on a real
    machine the other programs' share may be clamped at 0)."""
    me, server = host_load.os.getpid(), 2_000_002
    start = host_load.CpuSnapshot(0.0, 10.0, {me: 1.0, server: 2.0})
    # 0.8 s of the cores busy in 1 s: 0.1 ours, 0.3 the server's, 0.4 other programs'.
    end = host_load.CpuSnapshot(1.0, 10.8, {me: 1.1, server: 2.3})
    host_load.serve_beside(server)
    try:
        report = host_load.host_report(start, end, None, 0.0)
        as_other = host_load.host_report(dataclasses.replace(start, ours_s={me: 1.0}), end, None,
                                         0.0)
    finally:
        host_load.serve_beside(None)
    cpus = report["cpus"]
    assert report["server_cpu_frac"] == pytest.approx(0.3 / cpus)
    assert report["other_cpu_frac"] == pytest.approx(0.4 / cpus)
    assert as_other["other_cpu_frac"] == pytest.approx(0.7 / cpus)
    assert "server_cpu_frac" not in as_other
