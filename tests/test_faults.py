"""Faults, injected for real: a killed, stopped or broken device process; a killed scheduler
process; two callers on one engine; an interrupted CLI. Each must end in a clear error within
seconds (never a hang), leave the pools whole, and let the next run work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import VOCAB
from loops import loop_of

from engine import Engine, EngineConfig, SamplingParams
from engine.config import OVERLAP
from engine.devices.cpu_process import DeviceError
from engine.engine import EngineBusyError
from engine.workloads import Workload

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = [[5 + i, 6, 7, 8] for i in range(4)]
LONG = SamplingParams(max_new_tokens=200, ignore_eos=True)
SHORT = SamplingParams(max_new_tokens=6, ignore_eos=True)


@pytest.fixture(scope="module")
def path(make_checkpoint):
    return str(make_checkpoint("llama"))


def _engine(path: str) -> Engine:
    return Engine(EngineConfig(model=path, device="cpu", max_batch_size=4, max_seq_len=256))


def _pools_whole(engine: Engine) -> bool:
    s = engine.stats()
    return s["kv_pages_free"] == s["kv_pages_total"] and s["req_slots_free"] == s["req_slots_total"]


def _fault_during_run(engine: Engine, act, at_iteration: int = 5) -> BaseException:
    """Run a long generate and do ``act(device pid)`` at its ``at_iteration``-th scheduler
    iteration (from the loop's own ``should_stop`` hook, so the fault lands mid-run whatever the
    machine's speed); return the error the run ended with."""
    pid = engine.device.proc.pid
    iterations = 0

    def fault_at_iteration() -> bool:
        nonlocal iterations
        iterations += 1
        if iterations == at_iteration:
            act(pid)
        return False

    with pytest.raises(DeviceError) as caught:
        engine.generate(PROMPTS, LONG, loop_of(True, 1, 2000), should_stop=fault_at_iteration)
    assert iterations >= at_iteration
    return caught.value


@pytest.mark.parametrize("signum, words", [(signal.SIGKILL, "died"),
                                           (signal.SIGSTOP, "stopped")])
def test_a_dead_or_stopped_device_fails_the_run_fast_and_the_next_run_works(path, signum, words):
    """The watch says how the device ended ("died", "stopped"); a run that only timed out would
    say "did not answer" after minutes instead."""
    with _engine(path) as engine:
        reference = engine.generate(PROMPTS, SHORT)
        error = _fault_during_run(engine, lambda pid: os.kill(pid, signum))
        assert words in str(error) and "did not answer" not in str(error), str(error)
        assert _pools_whole(engine)
        again = engine.generate(PROMPTS, SHORT)          # a fresh device process
        assert [o.token_ids for o in again.outputs] == [o.token_ids for o in reference.outputs]
        assert engine.stats()["device_kind"] == "cpu-process"


def test_a_device_that_cannot_start_is_said_in_the_label_at_once(path):
    """The child's own failure is in the label (a start that only timed out would say "did not
    answer", after START_TIMEOUT_S)."""
    config = EngineConfig(model=path, device="cpu", max_batch_size=2, max_seq_len=64,
                          device_cpus=(4096,))            # no such core: the child fails
    with Engine(config) as engine:
        assert engine.stats()["device_kind"] == "cpu-inline"
        result = engine.generate(PROMPTS[:2], SHORT)
        assert "device process failed to start" in result.label
        assert "did not answer" not in result.label, result.label
        assert "serial, no real overlap" in result.label


def test_a_device_that_dies_at_start_up_is_noticed_in_seconds(path, tmp_path):
    """Spawn re-imports the main module; a program read from stdin has none, so the child dies
    before it can say anything. The engine must see that at once and say so, not wait 300 s."""
    script = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r})\n"
              "from engine import Engine, EngineConfig\n"
              f"e = Engine(EngineConfig(model={path!r}, device='cpu', max_seq_len=64))\n"
              "print(e.stats()['device_kind'], 'failed to start' in e.device.label, "
              "'died' in e.device.label, 'did not answer' in e.device.label)\n")
    done = subprocess.run([sys.executable, "-"], input=script, text=True, capture_output=True,
                          timeout=600, cwd=tmp_path)
    # Its death is seen, by the watch, as a death (not waited out as a missing answer).
    assert done.stdout.split() == ["cpu-inline", "True", "True", "False"], \
        (done.stdout, done.stderr[-2000:])


def test_two_callers_on_one_engine_the_second_is_refused_clearly(path):
    """The second call comes while the first is inside its loop for sure: the first run's
    ``should_stop`` hook holds it there until the second call has been answered."""
    with _engine(path) as engine:
        inside, answered = threading.Event(), threading.Event()

        def hold_first_run() -> bool:
            inside.set()
            answered.wait(timeout=120)                  # a hang guard, not a synchronisation
            return False

        first = threading.Thread(target=lambda: engine.generate(PROMPTS, SHORT,
                                                                should_stop=hold_first_run))
        first.start()
        assert inside.wait(timeout=120)
        try:
            with pytest.raises(EngineBusyError, match="already running"):
                engine.generate(PROMPTS, SHORT)
        finally:
            answered.set()
            first.join()
        assert _pools_whole(engine)
        assert len(engine.generate(PROMPTS, SHORT).outputs) == len(PROMPTS)


def test_a_dropped_engine_and_a_killed_parent_leave_no_noise(path, tmp_path):
    """No traceback from the device process when its parent goes away without close()."""
    script = (f"import os, sys, signal; sys.path.insert(0, {str(ROOT)!r})\n"
              "from engine import Engine, EngineConfig, SamplingParams\n"
              "if __name__ == '__main__':\n"
              f"    e = Engine(EngineConfig(model={path!r}, device='cpu', max_seq_len=64))\n"
              "    e.generate([[5, 6, 7]], SamplingParams(max_new_tokens=3))\n"
              "    print(e.device.proc.pid, flush=True)\n"
              "    if sys.argv[1] == 'kill':\n"
              "        os.kill(os.getpid(), signal.SIGKILL)\n")
    (tmp_path / "drop.py").write_text(script)
    for how in ("drop", "kill"):
        done = subprocess.run([sys.executable, "drop.py", how], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)           # a hang guard
        child = int(done.stdout.split()[0])
        deadline = time.monotonic() + 120                # a hang guard
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), f"the device process outlived its parent ({how})"
        assert "Traceback" not in done.stderr, done.stderr


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_on_the_cli_prints_one_line():
    """Ctrl-C while the CLI runs (a terminal sends it to the whole process group): one line,
    exit code 130, no traceback from any process. The CLI says what it runs on before it runs,
    so the test presses Ctrl-C once that line is out, not after a guessed delay."""
    # 200 ms of extra CPU work per step: the runs last minutes, so the signal lands in them.
    proc = _as_from_a_terminal([sys.executable, "-m", "engine", "--device", "cpu", "--requests",
                                "16", "--max-new-tokens", "200", "--extra-cpu-us", "200000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        head = [proc.stdout.readline() for _ in range(2)]     # "device: ...", "start-up: ..."
        assert head[1].startswith("start-up:"), (head, proc.poll())
        os.killpg(proc.pid, signal.SIGINT)                     # as a terminal does
        out, err = proc.communicate(timeout=600)               # a hang guard, not a bound
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert err.strip().splitlines() == ["interrupted"], err[-2000:]


def test_an_output_path_that_cannot_be_written_is_refused_before_the_run():
    """Refused before the engine is even built: the CLI never said what it would run on."""
    done = subprocess.run([sys.executable, "-m", "engine", "--device", "cpu",
                           "--json", "/no/such/dir/x.json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 2 and "does not exist" in done.stderr
    assert "device:" not in done.stdout and "start-up:" not in done.stdout, done.stdout


def test_the_scheduler_process_killed_mid_run_is_said_and_the_next_request_works():
    from engine.scheduler_process.messages import LiveRunRequest, RunFinished
    from engine.scheduler_process.process import SchedulerClient, SchedulerDied

    request = LiveRunRequest(
        engine=EngineConfig(model="bundled", device="cpu", max_batch_size=4, max_seq_len=256),
        workload=Workload.of_words(3, 150, texts=("one two three",) * 4, ignore_eos=True),
        loops=(loop_of(False, 1, 3000), loop_of(True, 1, 3000)))
    client = SchedulerClient()
    try:
        client.ready()
        killed = False
        with pytest.raises(SchedulerDied) as caught:
            for event in client.submit(request):
                if not killed and type(event).__name__ == "SpanBatch":
                    killed = True
                    os.kill(client.pid, signal.SIGKILL)
        # The watch saw the death itself (a missed deadline would say "did not answer").
        assert killed and "SIGKILL" in str(caught.value), str(caught.value)
        small = replace(request, workload=replace(request.workload, max_new_tokens=6),
                        loops=(OVERLAP,))
        events = list(client.submit(small))            # a new scheduler process
        assert isinstance(events[-1], RunFinished) and client.restarts >= 1
    finally:
        client.close()


def test_a_cancelled_run_ends_at_the_next_iteration():
    from engine.scheduler_process.messages import LiveRunRequest, RequestFailed
    from engine.scheduler_process.process import SchedulerClient

    request = LiveRunRequest(
        engine=EngineConfig(model="bundled", device="cpu", max_batch_size=4, max_seq_len=256),
        workload=Workload.of_words(3, 200, texts=("one two three",) * 4, ignore_eos=True),
        loops=(loop_of(False, 1, 5000),))
    client = SchedulerClient()
    try:
        cancelled = False
        for event in client.submit(request):
            if not cancelled and type(event).__name__ == "SpanBatch":
                cancelled = True
                client.cancel()
        # 200 steps at 5 ms of extra work each: without the cancel it would have finished.
        assert cancelled and isinstance(event, RequestFailed) and event.kind == "cancelled", event
    finally:
        client.close()


def test_prompts_and_params_that_are_not_what_they_claim_are_refused(path):
    with _engine(path) as engine:
        bad = [None, [b"abc"], [[1.5, 2.0]], [[True, 3]], ["x", None]]
        for prompts in bad:
            with pytest.raises(ValueError):
                engine.generate(prompts, SHORT)
        with pytest.raises(ValueError, match="stop_token_ids"):
            engine.generate([[5, 6]], SamplingParams(stop_token_ids=(VOCAB + 5,)))
        import numpy as np

        ok = engine.generate([[np.int64(5), 6]], SamplingParams(max_new_tokens=np.int64(2)))
        assert len(ok.outputs[0].token_ids) == 2
        assert _pools_whole(engine)


def test_the_app_stopped_with_sigterm_leaves_no_noise_and_no_process(tmp_path):
    """The scheduler and device processes end with the server, quietly."""
    app, port, log = _start_app(tmp_path)
    try:
        _wait_for_page(app, port)
        deadline = time.monotonic() + 300                # a hang guard
        while len(_session(app.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)                              # the app, the scheduler, the device
        assert len(_session(app.pid)) >= 3, "the scheduler and device processes did not start"
        app.send_signal(signal.SIGTERM)
        _assert_stopped_quietly(app, log)
    finally:
        _end(app)


def test_ctrl_c_on_the_app_while_it_imports_says_stopped_and_nothing_else(tmp_path):
    """Ctrl-C in the seconds the app spends importing Gradio: nothing has started that must be
    ended, and the app says so at once (Python's own Ctrl-C printed a traceback from inside
    the imports)."""
    app, _, log = _start_app(tmp_path)
    try:
        deadline = time.monotonic() + 120                # a hang guard
        while not _took_its_signals(app.pid) and time.monotonic() < deadline:
            time.sleep(0.01)                             # its first lines have run
        os.killpg(app.pid, signal.SIGINT)                # as a terminal does
        _assert_stopped_quietly(app, log)
    finally:
        _end(app)


def test_ctrl_c_on_the_app_during_its_warm_up_says_stopped_and_nothing_else(tmp_path):
    """Ctrl-C the moment the app starts its scheduler process, as the warm-up begins: one line,
    no 'prewarm skipped: SchedulerDied', no traceback, no process left. (The process was started
    with SIGINT ignored for a moment, and a Ctrl-C in that moment was lost: the app served on.)"""
    app, port, log = _start_app(tmp_path)
    try:
        _wait_for_page(app, port)
        deadline = time.monotonic() + 300                # a hang guard
        while len(_session(app.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)                             # its first child process is starting
        os.killpg(app.pid, signal.SIGINT)                # as a terminal does
        _assert_stopped_quietly(app, log)
    finally:
        _end(app)


def _start_app(tmp_path) -> tuple[subprocess.Popen, int, Path]:
    """``python app.py`` on a free port, in a session of its own (the processes it starts stay
    in it: ``_session``), its output in ``tmp_path/app.log``."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "app.log"
    with log.open("w") as out:
        app = _as_from_a_terminal([sys.executable, "app.py", "--port", str(port)], stdout=out,
                                  stderr=subprocess.STDOUT)
    return app, port, log


def _as_from_a_terminal(args: list[str], **popen) -> subprocess.Popen:
    """Start ``args`` as a terminal starts a program: a session (and process group) of its own,
    Ctrl-C at its default action. A signal ignored here would stay ignored in the child (this
    test may run in a shell's background job, where SIGINT is ignored), and the child would
    never see the Ctrl-C sent to it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(args, cwd=ROOT, start_new_session=True, **popen)
    finally:
        signal.signal(signal.SIGINT, before)


def _wait_for_page(app: subprocess.Popen, port: int) -> None:
    import urllib.request

    deadline = time.monotonic() + 300                    # a hang guard
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read(100)
            return
        except OSError:
            assert app.poll() is None and time.monotonic() < deadline, "the page was not served"
            time.sleep(0.2)


def _assert_stopped_quietly(app: subprocess.Popen, log: Path) -> None:
    """The app ends (a hang guard, not a bound), its last line and only word on it is
    "stopped", and no process of its session outlives it (the resource tracker included)."""
    app.wait(timeout=120)
    deadline = time.monotonic() + 120                    # a hang guard
    while _session(app.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _session(app.pid), "a child outlived the app: " + ", ".join(
        _cmdline(pid) for pid in _session(app.pid))
    text = log.read_text()
    assert "Traceback" not in text and "prewarm skipped" not in text, text[-3000:]
    assert text.strip().splitlines()[-1] == "stopped" and text.count("stopped") == 1, text[-3000:]
    assert app.returncode == 128 + signal.SIGINT or app.returncode == 128 + signal.SIGTERM


def _took_its_signals(pid: int) -> bool:
    """Has the app run its first lines (``ui.stopping.take_signals``)? It then catches SIGTERM,
    which Python leaves at its default action."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def _session(sid: int) -> list[int]:
    """The live processes of session ``sid`` (from /proc, as ps does), whoever their parent is
    now: a child the app left behind is re-parented, not gone."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(stat.parent.name))
    return found


def _end(app: subprocess.Popen) -> None:
    """Whatever happened, no process of the test is left."""
    if app.poll() is None:
        app.kill()
        app.wait(timeout=30)
    for pid in _session(app.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
    except OSError:
        return ""
