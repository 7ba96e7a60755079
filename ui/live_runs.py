"""Live runs: the chosen scheduling loops, run by the scheduler process, drawn as they end.

The handler checks the controls, sends one ``LiveRunRequest`` and turns the events that come back
into views. The loops take turns for ``ROUNDS`` rounds, so a burst of other load hits them alike.
The browser shares the loops' cores, so the page is redrawn as each run ends and during a run
only every ``HOLD_S``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import gradio as gr

import texts
import viz
from engine.scheduler_process import messages
from engine.scheduler_process.messages import LiveRunRequest
from engine.workloads import Workload, word_prompts
from record.run_record import config_of, run_dict
from record.schema import BASE_LANES, ENGINE_LOOPS, GPU_LANES, Loop, RecordDict, RunDict, SpanDict
from ui import presets, scheduler_link
from ui.controls import Controls
from ui.i18n import lang_of
from ui.inputs import InputError, check_model, checked, checked_int
from ui.recorded_runs import shown, write_downloads
from ui.state import APP
from ui.status import Said, esc, failure, progress_bar, render_said, said, status
from ui.turns import Ticket
from ui.view import MainView, plot

MAX_ARRIVAL_S = 60.0       # requests / rate: how long the arrivals of one loop may take
HOLD_S = 5.0               # while a loop is timed, the page is redrawn at most this often
ROUNDS = 3                 # runs of each loop, the loops taking turns
ROUNDS_S = 10.0            # ... as many as fit in about this long (at least one)
MAX_REMEMBERED = 64        # setups whose step time is kept for the next run's estimate
RUN_ON = "status_run_on"   # the status while a run is on, as data (a language switch waits)


def run_live(controls: Controls, ticket: Ticket | None = None) -> Iterator[tuple]:
    """Run the chosen loops; yield the main view as it grows. ``ticket``: the run's turn in the
    engine's line, through which the visitor's own Stop (and no other's) reaches this run."""
    lang = lang_of(controls.lang_choice)
    try:
        request, notes = build_request(controls)
        if request.engine.device == "cuda" and not scheduler_link.scheduler().ready().cuda:
            raise InputError("device_no_cuda")
    except InputError as error:
        spec = error.said()
        yield MainView(status=render_said(spec, lang), said=spec).values()
        return
    stop_asked = ticket.stop_asked if ticket is not None else threading.Event()
    expected = expected_steps(request)
    # While the run is on, a canvas draws it (cheap for the browser, whose cores are the
    # engine's too); the interactive chart comes back with the finished record.
    yield run_on_view(progress_bar(0.0, _starting_text(request, expected, notes, lang)), lang,
                      "zoom_after_run", timeline=gr.update(visible=False),
                      live=gr.update(value="", visible=True)).values()
    if stop_asked.is_set():              # Stop came with the run's turn: nothing was started
        yield _failed_view(failure("cancelled", ""), lang).values()
        return
    live = _LiveRuns(request, expected, lang)
    client = scheduler_link.scheduler()
    events = client.submit(request)
    linked = False                       # the visitor's Stop reaches the request
    try:
        for event in events:
            if ticket is not None and not linked:
                # The request has reached the scheduler (a cancel sent before it would be
                # dropped): from now on this visitor's Stop cancels it, and only it.
                APP.turns.on_stop(ticket, client.cancel)
                linked = True
            if isinstance(event, messages.Progress):
                if live.stage(event):
                    yield MainView(status=live.status(stop_asked)).values()
            elif isinstance(event, messages.SpanBatch):
                if live.add(event):              # a long loop: drawn once in a while
                    yield live.drawn(stop_asked).values()
            elif isinstance(event, messages.LoopFinished):
                live.finish(event)
                yield live.drawn(stop_asked).values()
            elif isinstance(event, messages.RunFinished):
                _remember_step_time(_setup(request), event.record)
                presets.remember(presets.profile_of_run(event.record))   # sizes the presets
                yield _finished(event.record, request, notes, lang).values()
            elif isinstance(event, messages.RequestFailed):
                yield _failed_view(failure(event.kind, event.message), lang, live).values()
    except Exception as error:  # noqa: BLE001 - the scheduler process died, or worse
        from engine.scheduler_process.process import SchedulerDied

        kind = "died" if isinstance(error, SchedulerDied) else "error"
        yield _failed_view(failure(kind, f"{type(error).__name__}: {error}"), lang, live).values()
    finally:
        if ticket is not None:
            APP.turns.on_stop(ticket, None)      # a late Stop must not reach the next run
        # Closed early (the page went away): the request is cancelled and read to its end
        # here, so the engine is free when this turn ends.
        events.close()


def run_on_view(status_html: str, lang: str, zoom_key: str, **chart: Any) -> MainView:
    """The view while a run is on or waits its turn: its status, no record's charts."""
    return MainView(status=status_html, said=said(RUN_ON, "running"), headline="",
                    look_for=texts.t(lang, "timeline_help"), memory=gr.update(visible=False),
                    zoomed=plot(viz.message_figure(texts.t(lang, zoom_key))), metrics="",
                    texts="", **chart)


def _failed_view(spec: Said, lang: str, live: _LiveRuns | None = None) -> MainView:
    """A run that did not finish: its status. A stopped run keeps its canvas, drawn from what
    ``live`` kept (one stopped before its first step says so instead); a failed one gets the
    chart back."""
    view = MainView(status=render_said(spec, lang), said=spec, timeline=gr.update(visible=True),
                    live=gr.update(value="", visible=False))
    if spec["key"] == "fail_cancelled":
        view.zoomed = plot(viz.message_figure(texts.t(lang, "zoom_stopped")))
        kept = live.kept() if live is not None else {}
        if kept:
            view.timeline = gr.update()
            view.live = gr.update(value=viz.live_payload(list(kept.values()), lang), visible=True)
        else:
            view.timeline = gr.update(
                value=plot(viz.message_figure(texts.t(lang, "timeline_stopped"))), visible=True)
    return view


def stop_run(lang_choice: str, request: gr.Request | None = None) -> Any:
    """The Stop button: this page's own run and nobody else's. Waiting in line, it leaves the
    line (nothing ran); on, it ends at the scheduler's next iteration (and says so)."""
    lang = lang_of(lang_choice)
    session = getattr(request, "session_hash", None)
    stopped = APP.turns.stop_session(session, kind="run") if session else ""
    if stopped == "left":
        return render_said(said("fail_left_line", "warn"), lang)
    if stopped == "stopping":
        return status(texts.t(lang, "status_stopping"), "warn")
    return gr.update()                      # nothing to stop: the status line stays as it was


def leave_page(request: gr.Request) -> None:
    """A page closed or reloaded: its runs leave the line (a waiting one is dropped, a running
    one ended), so the class does not wait for an empty tab."""
    session = getattr(request, "session_hash", None)
    if session:
        APP.turns.stop_session(session)


def build_request(controls: Controls) -> tuple[LiveRunRequest, list[str]]:
    """The request for the scheduler process, and notes for the user about what it will run;
    ``InputError`` for a value the run cannot take (``ui.controls.Controls`` says each field)."""
    from engine.config import EngineConfig, LoopSpec

    c = controls
    requests, batch = checked_int("requests", c.requests), checked_int("batch", c.batch)
    words, new_tokens = checked_int("prompt_len", c.prompt_len), checked_int("max_new", c.max_new)
    temperature = float(checked("temperature", c.temperature))
    extra_cpu_us, k = checked_int("extra_cpu_us", c.extra_cpu_us), checked_int("decode_steps", c.decode_steps)
    rate = float(checked("request_rate", c.request_rate)) or None
    shared, kv_pages = checked_int("shared_prefix", c.shared_prefix), checked_int("kv_pages", c.kv_pages)
    # The overlap toggle's one change of form: the checked boxes become the loops they select.
    loops = tuple(LoopSpec(loop, k if loop == Loop.MULTISTEP else 1, extra_cpu_us)
                  for loop in ENGINE_LOOPS if loop in (c.loops or []))
    if not loops:
        raise InputError("error_no_loop")
    model = check_model(c.model)
    device = c.device
    if device not in ("auto", "cpu", "cuda"):
        raise InputError("error_device", device=device)
    prompts, used_default = word_prompts(c.prompts_text, requests, words)
    notes = ["note_default_prompts"] if used_default else []
    # Words become about two tokens each (chat adds its template); the shared system prompt
    # comes before every prompt. Requests arrive by a Poisson process of seed 0.
    workload = Workload.of_words(words, new_tokens, shared, texts=tuple(prompts),
                                 temperature=temperature, stop_early=bool(c.stop_early),
                                 request_rate=rate, chat=bool(c.chat))
    # The page's engine runs as SGLang's users get it by default: CUDA graphs, no torch.compile.
    # Compiled, the bundled model's forward on a fast GPU is shorter than the scheduler's own
    # work (docs/benchmarks.md), and overlap would show the host's speed, not the lesson.
    engine = EngineConfig(model=model, device=device, max_batch_size=batch,
                          cuda_graph=bool(c.cuda_graph) and device != "cpu", seed=0,
                          max_seq_len=workload.max_seq_len(), num_pages=kv_pages or None,
                          compile=False)
    if kv_pages and kv_pages < engine.pages_per_seq:
        raise InputError("error_kv_pages", need=engine.pages_per_seq, tokens=engine.max_seq_len,
                         value=kv_pages)
    if rate and requests / rate > MAX_ARRIVAL_S:     # a run must not take hours
        raise InputError("error_rate_slow", rate=rate, requests=requests,
                         seconds=requests / rate, limit=MAX_ARRIVAL_S)
    request = LiveRunRequest(engine=engine, workload=workload, loops=loops)
    return replace(request, rounds=_rounds(request)), notes


def _rounds(request: LiveRunRequest) -> int:
    """``ROUNDS`` where they fit in about ``ROUNDS_S``, else fewer; one where requests arrive
    over time (their arrivals set a loop's length)."""
    if arrival_span_s(request):
        return 1
    step_s = APP.step_seconds.get(_setup(request)) or \
        0.01 + max(spec.extra_cpu_us for spec in request.loops) / 1e6
    round_s = len(request.loops) * expected_steps(request) * step_s
    return max(1, min(ROUNDS, int(ROUNDS_S // round_s)))


def _setup(request: LiveRunRequest) -> tuple:
    """What a step's time depends on, beside the workload: the key of ``APP.step_seconds``."""
    engine = request.engine
    return engine.model, engine.device, engine.max_batch_size, engine.cuda_graph


class _LiveRuns:
    """The runs of one request as they grow: each loop's latest finished run and the run in
    progress, for the canvas and the status line."""

    def __init__(self, request: LiveRunRequest, expected: int, lang: str) -> None:
        self.request, self.expected, self.lang = request, expected, lang
        self.latest: dict[int, RunDict] = {}          # loop index -> its latest finished run
        self.done = 0                                 # runs finished, of every round
        self.spans: list[SpanDict] = []               # the run in progress, of loop ``index``
        self.index, self.running = 0, False
        self.stage_name = "loading"
        self.done_mib = self.total_mib = 0.0          # a hub model's download
        self.started = self.run_started = self.drawn_at = time.perf_counter()

    @property
    def total(self) -> int:
        return self.request.rounds * len(self.request.loops)

    def stage(self, event: messages.Progress) -> bool:
        """Take a stage; True where the status line should say it now: not as a timed run
        begins after another (the status said it when that one ended)."""
        first_run = event.stage == "run" and self.done == 0
        if event.stage == "run":
            self.index, self.spans, self.running = event.index, [], True
            self.run_started = self.drawn_at = time.perf_counter()
        self.stage_name = event.stage
        if event.stage == "download":
            self.done_mib, self.total_mib = event.done_mib, event.total_mib
        return event.stage != "run" or first_run

    def add(self, batch: messages.SpanBatch) -> bool:
        """Take a run's new spans; True where the canvas is due a redraw (``HOLD_S``)."""
        if batch.index == self.index and self.running:
            self.spans.extend(span.to_dict() for span in batch.spans)
        return time.perf_counter() - self.drawn_at >= HOLD_S

    def finish(self, event: messages.LoopFinished) -> None:
        self.latest[event.index] = event.run
        self.done += 1
        self.spans, self.running = [], False

    def runs(self) -> dict[int, RunDict]:
        """What the canvas draws, by loop index, in the loops' order: the run in progress, else
        its loop's latest finished run."""
        drawn: dict[int, RunDict] = {}
        for index, spec in enumerate(self.request.loops):
            if self.running and index == self.index and self.spans:
                # The copy stream's lane, where the device has one, comes in with its spans.
                run = run_dict(spec.loop, spec.decode_steps, spec.label, self.spans,
                               lanes=BASE_LANES, gpu_lanes=GPU_LANES)
                run["extra_cpu_us"] = spec.extra_cpu_us
                drawn[index] = run
            elif index in self.latest:
                drawn[index] = self.latest[index]
        return drawn

    def kept(self) -> dict[int, RunDict]:
        """What a stopped request leaves drawn: each loop's latest finished run, else its run in
        progress (a loop stopped in its second round must not show half a run where a whole one
        was timed)."""
        drawn = {**self.runs(), **self.latest}
        return {index: drawn[index] for index in sorted(drawn)}

    def drawn(self, stop_asked: threading.Event) -> MainView:
        """The canvas and the status line, both from the runs it draws."""
        self.drawn_at = time.perf_counter()
        runs = self.runs()
        return MainView(status=self.status(stop_asked, runs),
                        live=viz.live_payload(list(runs.values()), self.lang))

    def status(self, stop_asked: threading.Event, runs: dict[int, RunDict] | None = None) -> str:
        """The status line: the stage, or the runs as the canvas draws them (``runs``)."""
        lang = self.lang
        if stop_asked.is_set():                 # Stop was pressed: say so until the run has ended
            key = "status_stopping_probe" if self.stage_name == "probe" else "status_stopping"
            return status(texts.t(lang, key), "warn")
        if self.stage_name != "run":
            return _stage_status(self, lang)
        now = self.running or self.done == self.total      # the loop timed now, or the last
        index = self.index if now else (self.index + 1) % len(self.request.loops)
        span = arrival_span_s(self.request)
        words = {"mode": esc(texts.t(lang, f"loop_{self.request.loops[index].loop}")),
                 "expected": self.expected, "seconds": time.perf_counter() - self.started,
                 "total": self.total, "index": min(self.done + 1, self.total), "span": span}
        if not self.running:                    # a run has just ended: the next one is timed
            key = "status_timing" if self.done < self.total else "status_drawing"
            return progress_bar(self.done / self.total, texts.t(lang, key).format(**words))
        drawn = (runs or {}).get(self.index)
        step = max((s["step"] for s in drawn["spans"]), default=0) if drawn else 0
        if span:     # arrivals set the pace: the steps are as many as their time allows
            done = min((time.perf_counter() - self.run_started) / (1.1 * span), 0.99)
            text = texts.t(lang, "status_running_arrivals").format(step=step, **words)
        else:
            done = min(step / self.expected, 1.0)
            text = texts.t(lang, "status_running").format(step=step, **words)
        return progress_bar((self.done + done) / self.total, text)


def _stage_status(live: _LiveRuns, lang: str) -> str:
    """Before the runs: loading the model, a hub download, the stop-token probe."""
    if live.stage_name == "probe":
        return progress_bar(0.0, texts.t(lang, "status_probe"))
    if live.stage_name != "download":
        return progress_bar(0.0, texts.t(lang, "status_loading"))
    model = esc(live.request.engine.model)
    if live.total_mib <= 0:
        return progress_bar(0.0, texts.t(lang, "status_hub_checking").format(model=model))
    if live.done_mib >= live.total_mib:
        return progress_bar(1.0, texts.t(lang, "status_hub_ready").format(
            model=model, total=live.total_mib))
    return progress_bar(live.done_mib / live.total_mib, texts.t(lang, "status_download").format(
        model=model, done=live.done_mib, total=live.total_mib))


def expected_steps(request: LiveRunRequest) -> int:
    """About how many steps one loop takes: a prefill and the decode steps of each wave."""
    waves = math.ceil(request.workload.requests / request.engine.max_batch_size)
    return waves * (request.workload.max_new_tokens + 1)


def _starting_text(request: LiveRunRequest, expected: int, notes: list[str], lang: str) -> str:
    loops = len(request.loops)
    span = arrival_span_s(request)
    step_s = APP.step_seconds.get(_setup(request))
    if span:        # arrivals set the pace, not a count of steps: no estimate from step times
        text = texts.t(lang, "status_starting_arrivals").format(loops=loops, span=span)
    else:
        text = texts.t(lang, "status_starting").format(loops=loops, steps=expected)
    if request.rounds > 1:
        text += " " + texts.t(lang, "status_rounds").format(rounds=request.rounds)
    if step_s and not span:
        runs = request.rounds * loops + (1 if request.workload.stop_early else 0)
        text += " " + texts.t(lang, "status_estimate").format(seconds=runs * expected * step_s,
                                                            step_ms=1e3 * step_s)
    elif not span:
        text += " " + texts.t(lang, "status_no_estimate")
    return text + "".join(" " + texts.t(lang, note) for note in notes)


def arrival_span_s(request: LiveRunRequest) -> float:
    """About how long the requests take to arrive (0: all at the start)."""
    rate = request.workload.request_rate
    return request.workload.requests / rate if rate and math.isfinite(rate) else 0.0


def _remember_step_time(key: tuple, record: RecordDict) -> None:
    """The mean step time of the record's loops, for the next estimate of this setup (the
    latest ``MAX_REMEMBERED`` setups: visitors may type any number of hub ids)."""
    steps = [run["metrics"].get("mean_step_us") or 0.0 for run in record["runs"]]
    steps = [us for us in steps if us > 0]
    if steps:
        remembered = APP.step_seconds
        remembered.pop(key, None)
        remembered[key] = sum(steps) / len(steps) / 1e6
        while len(remembered) > MAX_REMEMBERED:
            remembered.pop(next(iter(remembered)))


def _finished(record: RecordDict, request: LiveRunRequest, notes: list[str],
              lang: str) -> MainView:
    files = write_downloads(record)
    last = record["runs"][-1]
    kind = str(record["env"].get("device_kind", ""))
    place_key, cores = scheduler_link.placement_note()
    said_notes = list(notes)
    config = config_of(record)
    if request.workload.chat and not (config and config.chat):
        said_notes.append("note_no_chat_template")
    if request.rounds > 1:
        said_notes.append("note_rounds")
    placement = ("fold_placement", place_key) if kind == "cpu-process" else None  # where it ran
    spec = said("status_done", "ok", notes=tuple(said_notes), folded=placement,
                requests=request.workload.requests,
                tokens=int(last["metrics"].get("output_tokens") or 0),
                where=viz.record_where(record), device_key=f"kind_{kind}",
                rounds=request.rounds, **cores)
    return shown(spec, record, lang, files)


def prewarm() -> None:
    """Start the scheduler process, build the default engine and probe the default workload, so
    the first Run starts drawing at once (a failed warm-up is not fatal: Run reports it)."""
    from engine.scheduler_process.messages import WarmRequest

    try:
        with APP.turns.turn("warm-up", "warm-up"):      # a turn in the engine's line, as a run's
            # On a GPU the first click runs with CUDA graphs: warm that engine, measure its forward.
            graphs = scheduler_link.scheduler().ready().cuda
            request, _ = build_request(Controls.page_defaults(cuda_graph=graphs))
            for event in scheduler_link.scheduler().submit(WarmRequest(request.engine,
                                                                       probe=request)):
                presets.remember(getattr(event, "profile", None))   # sizes presets, defaults
    except Exception as error:  # noqa: BLE001
        if not APP.shutting_down.is_set():   # Ctrl-C during the warm-up ends it, quietly
            print(f"prewarm skipped: {type(error).__name__}: {error}", flush=True)
    finally:
        APP.warmed.set()            # a page load waiting to size its controls goes on
