"""The engine's line, as a specification: runs take turns in the order they came; a visitor's
Stop reaches their own ticket and nobody else's (waiting: it leaves the line; its turn: its run is
cancelled); a page that goes away leaves the line; a waiting page is told its place and an
estimate that counts down, in both languages, and is shown the same work recorded meanwhile.

The line's own tests use a clock the test moves. The handler's tests drive two or three
visitors' Run handlers at once against a stand-in scheduler whose runs end when the test says
(or when they are cancelled), so nothing depends on how fast or busy the machine is."""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")

from ui import live_runs, scheduler_link, waiting  # noqa: E402
from ui.controls import Controls  # noqa: E402
from ui.state import APP  # noqa: E402
from ui.turns import LEAST_LEFT_S, State, Turns  # noqa: E402
from ui.view import MainView  # noqa: E402

NAMES = [f.name for f in fields(MainView)]
BOUND_S = 120.0              # a generous bound on every wait: a hang fails, a slow machine passes


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ---- the line ------------------------------------------------------------------------------------

def test_turns_go_in_the_order_tickets_came_and_each_waiting_one_knows_its_place():
    clock = Clock()
    turns = Turns(clock=clock)
    a, b, c = (turns.join("run", name, "defaults") for name in "abc")
    assert a.state is State.TURN and b.waiting and c.waiting
    assert turns.place(a) is None
    assert [turns.place(t)[0] for t in (b, c)] == [1, 2]
    turns.leave(a, finished=True)
    assert b.state is State.TURN and turns.place(c)[0] == 1
    turns.leave(b, finished=True)
    turns.leave(c, finished=True)
    assert turns.holder() is None and turns.waiting() == 0


def test_the_estimate_counts_down_with_the_turn_in_progress_and_learns_from_finished_turns():
    clock = Clock()
    turns = Turns(clock=clock)
    first = turns.join("run", "a", "defaults", steps=100)
    clock.now += 4.0
    turns.leave(first, finished=True)              # defaults take 4 s here; 0.04 s a step
    a, b, c = (turns.join("run", name, "defaults", steps=100) for name in "abc")
    assert turns.place(b) == (1, pytest.approx(4.0))
    assert turns.place(c) == (2, pytest.approx(8.0))
    clock.now += 1.5
    assert turns.place(c) == (2, pytest.approx(6.5))              # counts down as a runs
    clock.now += 10.0                                              # a outlasts its estimate
    assert turns.place(c) == (2, pytest.approx(4.0 + LEAST_LEFT_S))
    other = turns.join("run", "d", "other work", steps=50)        # new work: by its steps
    assert turns.place(other)[1] == pytest.approx(LEAST_LEFT_S + 4.0 + 4.0)
    assert turns.durations.expected(other) == pytest.approx(2.0)
    arrivals = turns.join("run", "e", "arrivals", steps=10, least_s=30.0)
    assert turns.durations.expected(arrivals) == 30.0              # arrivals take their time


def test_a_stop_reaches_its_own_ticket_only():
    turns = Turns(clock=Clock())
    cancels: list[str] = []
    a, b, c = (turns.join("run", name, "w") for name in "abc")
    turns.on_stop(a, lambda: cancels.append("a"))
    assert turns.stop(b) == "left"                                  # waiting: it leaves
    assert b.state is State.LEFT and turns.place(c)[0] == 1
    assert cancels == [] and not a.stop_asked.is_set()              # a runs on
    assert turns.stop(a) == "stopping" and cancels == ["a"]         # a's own Stop: a only
    assert not c.stop_asked.is_set()
    turns.leave(a)
    assert c.state is State.TURN and turns.stop(b) == ""            # b has nothing left to stop
    turns.on_stop(c, lambda: cancels.append("c"))
    turns.on_stop(c, None)                                          # c's request has ended
    assert turns.stop(c) == "stopping" and cancels == ["a"]         # a late Stop reaches none


def test_a_stop_before_the_run_reached_the_engine_is_passed_on_when_it_does():
    turns = Turns(clock=Clock())
    a = turns.join("run", "a", "w")
    cancels: list[int] = []
    assert turns.stop(a) == "stopping" and cancels == []
    turns.on_stop(a, lambda: cancels.append(1))
    assert cancels == [1]


def test_a_page_that_goes_away_stops_its_own_tickets_of_the_kind_asked():
    turns = Turns(clock=Clock())
    cancels: list[str] = []
    a = turns.join("run", "page-1", "w")
    lab = turns.join("lab", "page-2", "lab")
    b = turns.join("run", "page-2", "w")
    c = turns.join("run", "page-3", "w")
    turns.on_stop(a, lambda: cancels.append("a"))
    assert turns.stop_session("page-2", kind="run") == "left"       # the live tab's Stop
    assert b.state is State.LEFT and lab.waiting and c.waiting
    assert turns.stop_session("page-2") == "left" and lab.state is State.LEFT   # page closed
    assert turns.stop_session("page-1") == "stopping" and cancels == ["a"]
    assert turns.stop_session("nobody") == "" and c.waiting


def test_a_full_line_says_so():
    turns = Turns(most_waiting=2, clock=Clock())
    tickets = [turns.join("run", str(i), "w") for i in range(3)]    # one turn, two waiting
    assert all(tickets) and turns.join("run", "late", "w") is None


def test_many_visitors_at_once_never_share_the_engine_and_a_left_ticket_never_runs():
    """Threads join, wait, run or stop at random (seeded): at most one turn at a time, every
    ticket ends, and no ticket that left the line ever got a turn."""
    turns = Turns()
    rng = random.Random(7)
    holding, most, ran, left = [0], [0], set(), set()
    lock = threading.Lock()

    def visitor(i: int, stop_while_waiting: bool) -> None:
        ticket = turns.join("run", f"page-{i}", "w")
        if stop_while_waiting and ticket.waiting and turns.stop(ticket) == "left":
            with lock:
                left.add(i)
            turns.leave(ticket)
            return
        assert turns.wait(ticket, BOUND_S)
        if ticket.state is State.TURN:
            with lock:
                holding[0] += 1
                most[0] = max(most[0], holding[0])
                ran.add(i)
            threading.Event().wait(0.001)
            with lock:
                holding[0] -= 1
        turns.leave(ticket, finished=True)

    threads = [threading.Thread(target=visitor, args=(i, rng.random() < 0.3)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND_S)
    assert not any(thread.is_alive() for thread in threads)
    assert most[0] == 1 and not (ran & left) and len(ran | left) == 40
    assert turns.holder() is None and turns.waiting() == 0


def test_a_coroutine_in_line_wakes_when_its_turn_comes_from_another_thread():
    turns = Turns()
    a = turns.join("run", "a", "w")
    b = turns.join("run", "b", "w")

    async def wait_for_turn() -> None:
        threading.Timer(0.05, turns.leave, args=(a,)).start()
        while b.waiting:
            await turns.changed(b, BOUND_S)

    asyncio.run(asyncio.wait_for(wait_for_turn(), BOUND_S))
    assert b.state is State.TURN


def test_places_read_in_both_languages():
    assert waiting.place_text((12, 24.2), "en") == "You are <b>12th</b> in line; about <b>25 s</b>."
    assert waiting.place_text((1, 0.3), "en").startswith("You are <b>1st</b>")
    assert [waiting.texts.ordinal("en", n) for n in (2, 3, 11, 13, 21, 112)] == [
        "2nd", "3rd", "11th", "13th", "21st", "112th"]
    assert waiting.place_text((12, 24.2), "zh") == "你排在第 <b>12</b> 位；大约 <b>25 秒</b>。"


# ---- two and three visitors through the Run handler ---------------------------------------------

@dataclass
class FakeRun:
    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)


class GatedScheduler:
    """Stands in for the scheduler process's client: each request says it is loading, then
    holds the engine until the test releases it (it then finishes with the bundled recording of
    the defaults) or until it is cancelled (it then ends as a cancelled run does)."""

    def __init__(self) -> None:
        self.runs: list[FakeRun] = []
        self.record = json.loads((ROOT / "assets/recorded/cpu-2core-defaults.json").read_text())

    def ready(self):
        from engine.scheduler_process.messages import SchedulerReady

        return SchedulerReady(0, False, "CPU", "")

    def cancel(self) -> None:
        self.runs[-1].cancelled.set()

    def submit(self, _request):
        from engine.scheduler_process.messages import Progress, RequestFailed, RunFinished

        run = FakeRun()
        self.runs.append(run)
        yield Progress("loading")
        run.started.set()
        for _ in range(int(BOUND_S / 0.02)):
            if run.release.is_set() or run.cancelled.is_set():
                break
            threading.Event().wait(0.02)
        if run.cancelled.is_set():
            yield RequestFailed("cancelled", "the run was stopped before it finished")
        else:
            yield RunFinished(self.record)


@dataclass
class Request:
    session_hash: str


class Visitor:
    """One page: its Run handler as Gradio drives it, and every view it was sent."""

    def __init__(self, session: str, lang: str = "English") -> None:
        self.session = session
        self.controls = Controls.page_defaults(lang_choice=lang)
        self.views: list[dict] = []
        self.gone = False                  # the page was closed: Gradio closes its handler
        self.handler = waiting.in_line(self.controls, session,
                                       lambda ticket: live_runs.run_live(self.controls, ticket))

    async def run(self) -> None:
        """Read the views as Gradio does; a page gone is noticed at the next view sent to it,
        and its handler is closed there."""
        async for values in self.handler:
            self.views.append(dict(zip(NAMES, values)))
            if self.gone:
                break
        if self.gone:
            await self.handler.aclose()

    def stop(self):
        return live_runs.stop_run(self.controls.lang_choice, Request(self.session))

    def status(self) -> str:
        said = [v["status"] for v in self.views if isinstance(v["status"], str)]
        return said[-1] if said else ""

    def places(self) -> list[tuple[int, int]]:
        """The places and estimates its views said (the Run handler says it once)."""
        return [place for v in self.views if (place := _place(v["status"]))]

    def tick(self) -> tuple[int, int] | None:
        """What the page's line timer is told now (None: nothing, it is not waiting)."""
        said = waiting.line_said(self.controls.lang_choice, Request(self.session))
        if said == {"__type__": "update"}:
            return None
        return _place(said)


def _place(status) -> tuple[int, int] | None:
    import re

    found = re.search(r'data-line-place="(\d+)" data-line-eta="(\d+)"', status) \
        if isinstance(status, str) else None
    return (int(found.group(1)), int(found.group(2))) if found else None


async def until(check, what: str) -> None:
    for _ in range(int(BOUND_S / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within {BOUND_S} s: {what}")


@pytest.fixture
def engine(monkeypatch):
    fake = GatedScheduler()
    monkeypatch.setattr(scheduler_link, "scheduler", lambda: fake)
    monkeypatch.setattr(APP, "turns", Turns())
    monkeypatch.setattr(APP, "profiles", {})
    monkeypatch.setattr(APP, "step_seconds", {})
    monkeypatch.setattr(live_runs, "HOLD_S", 0.0)
    return fake


def test_b_stops_while_a_runs_a_runs_on_and_b_leaves_the_line(engine):
    a, b = Visitor("page-a"), Visitor("page-b")

    async def scenario() -> None:
        run_a = asyncio.create_task(a.run())
        await until(lambda: engine.runs and engine.runs[0].started.is_set(), "A's run started")
        assert b.stop() == {"__type__": "update"}           # B has no run: nothing to stop
        run_b = asyncio.create_task(b.run())
        await until(lambda: b.places(), "B told its place")
        first = b.views[0]
        assert b.places()[0][0] == 1 and "You are <b>1st</b> in line" in first["status"]
        # Meanwhile the same work, recorded: on the canvas, marked as a recording.
        payload = json.loads(first["live"]["value"])
        assert payload["recording"].startswith("Recording, not your run")
        assert first["live"]["visible"] and first["timeline"]["visible"] is False
        assert "Press Run" not in json.dumps([first["status"], first["zoomed"].plot])
        assert "Stopped: your run left the line" in b.stop()    # B's Stop while B waits
        await asyncio.wait_for(run_b, BOUND_S)
        assert "Stopped: your run left the line" in b.status()
        assert not engine.runs[0].cancelled.is_set()          # A's run goes on
        assert "Stopping" not in a.status() and "Stopped" not in a.status()
        engine.runs[0].release.set()
        await asyncio.wait_for(run_a, BOUND_S)

    asyncio.run(scenario())
    assert "Done" in a.status()
    assert len(engine.runs) == 1                             # B's run never reached the engine
    assert APP.turns.holder() is None and APP.turns.waiting() == 0


def test_a_visitors_own_stop_ends_their_run_and_the_next_in_line_goes_ahead(engine):
    a, b = Visitor("page-a"), Visitor("page-b", lang="中文")

    async def scenario() -> None:
        run_a = asyncio.create_task(a.run())
        await until(lambda: engine.runs and engine.runs[0].started.is_set(), "A's run started")
        run_b = asyncio.create_task(b.run())
        await until(lambda: b.places(), "B told its place")
        assert "你排在第 <b>1</b> 位" in b.views[0]["status"]
        assert "录制，不是你的运行" in json.loads(b.views[0]["live"]["value"])["recording"]
        assert "Stopping" in a.stop()
        await asyncio.wait_for(run_a, BOUND_S)
        await until(lambda: len(engine.runs) == 2 and engine.runs[1].started.is_set(),
                    "B's turn")
        assert not engine.runs[1].cancelled.is_set()
        engine.runs[1].release.set()
        await asyncio.wait_for(run_b, BOUND_S)

    asyncio.run(scenario())
    assert engine.runs[0].cancelled.is_set()
    assert "Stopped: the run was ended before it finished" in a.status()
    assert "完成" in b.status()
    live = [v["live"] for v in b.views if isinstance(v["live"], dict)]
    assert live[-1]["value"] == "" or "recording" not in live[-1]["value"]  # its own run now


def test_pages_that_go_away_leave_the_line_and_end_their_run(engine):
    a, b, c, d = (Visitor(f"page-{name}") for name in "abcd")

    async def scenario() -> None:
        run_a = asyncio.create_task(a.run())
        await until(lambda: engine.runs and engine.runs[0].started.is_set(), "A's run started")
        run_b = asyncio.create_task(b.run())
        await until(lambda: b.places(), "B in line")
        run_c = asyncio.create_task(c.run())
        await until(lambda: c.places(), "C in line")
        assert c.tick()[0] == 2
        # B's tab is closed: the page's unload takes its ticket out of line, and Gradio closes
        # its handler at the view that says so.
        b.gone = True
        live_runs.leave_page(Request("page-b"))
        await asyncio.wait_for(run_b, BOUND_S)
        assert APP.turns.waiting() == 1 and c.tick()[0] == 1
        assert not engine.runs[0].cancelled.is_set()          # A's run goes on
        # A's tab is reloaded while its run is on: the unload stops its run, its handler is
        # closed, the run is wound down, and C's turn comes.
        a.gone = True
        live_runs.leave_page(Request("page-a"))
        await asyncio.wait_for(run_a, BOUND_S)
        await until(lambda: engine.runs[0].cancelled.is_set(), "A's run cancelled")
        await until(lambda: len(engine.runs) == 2 and engine.runs[1].started.is_set(),
                    "C's turn")
        assert not engine.runs[1].cancelled.is_set() and c.tick() is None
        # D joins and goes away with no word (a caller without a page): at its turn Gradio
        # closes its handler at the first view, before its run has reached the engine.
        run_d = asyncio.create_task(d.run())
        await until(lambda: d.places(), "D in line")
        d.gone = True
        engine.runs[1].release.set()
        await asyncio.wait_for(run_c, BOUND_S)
        await asyncio.wait_for(run_d, BOUND_S)
        await until(lambda: APP.turns.holder() is None, "D's turn given back")

    asyncio.run(scenario())
    assert "Done" in c.status()
    assert len(engine.runs) == 2               # neither B's run nor D's reached the engine


def test_every_waiting_page_is_told_where_it_stands_and_the_estimate_counts_down(engine):
    """Three in line behind a run of known length: each is told its place and an estimate,
    from the line's own clock, by its Run handler once and by its line timer each second after;
    the estimates only go down while the run goes on; the timer stops at the page's turn."""
    clock = Clock()
    APP.turns = Turns(clock=clock)
    warm = APP.turns.join("run", "teacher", waiting.prepare(Controls.page_defaults(), "en").work,
                          steps=1)
    clock.now += 6.0
    APP.turns.leave(warm, finished=True)                      # the defaults take 6 s here
    visitors = [Visitor(f"page-{i}") for i in range(4)]
    told: dict[int, list[tuple[int, int]]] = {i: [] for i in range(1, 4)}

    async def scenario() -> None:
        tasks = [asyncio.create_task(visitors[0].run())]
        await until(lambda: engine.runs and engine.runs[0].started.is_set(), "first run")
        for visitor in visitors[1:]:
            tasks.append(asyncio.create_task(visitor.run()))
            await until(lambda v=visitor: v.places(), "told its place")
        for _ in range(4):                                     # four ticks of the page's timer
            for i in range(1, 4):
                told[i].append(visitors[i].tick())
            clock.now += 1.0
        engine.runs[0].release.set()
        for i in range(1, 4):                                  # each in turn, as they come
            await until(lambda i=i: len(engine.runs) > i and engine.runs[i].started.is_set(),
                        "the next turn")
            assert visitors[i].tick() is None                 # its turn: the run says
            engine.runs[i].release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), BOUND_S)

    asyncio.run(scenario())
    for place, visitor in enumerate(visitors[1:], start=1):
        assert visitor.places() == [(place, 6 * place)]       # the Run handler, once
        assert told[place] == [(place, 6 * place - n) for n in range(4)]   # then each second
        assert "Done" in visitor.status()
    zh = waiting.line_status((3, 12.0), waiting.prepare(Controls.page_defaults(), "zh"), "zh")
    assert "你排在第 <b>3</b> 位" in zh and "录制" in zh


def test_the_web_server_runs_at_the_schedulers_priority_where_the_os_allows():
    """A server below the engine's processes waits for them while a run is on (a class in line
    was told its place only when the first run had ended); it never lowers its priority."""
    import os
    import subprocess

    code = ("import os; from engine.scheduler_process.process import NICE, "
            "raise_server_priority as r; b = os.getpriority(os.PRIO_PROCESS, 0); r(); "
            "print(b, os.getpriority(os.PRIO_PROCESS, 0), NICE)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=BOUND_S)
    before, after, nice = map(int, done.stdout.split())
    assert after in (before, min(before, nice))
    if os.geteuid() == 0:                      # allowed: raised to the scheduler's, or kept
        assert after == min(before, nice)
