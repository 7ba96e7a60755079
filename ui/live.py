"""Live runs: the chosen scheduling loops, run by the scheduler process, drawn while they run.

The handler checks the controls, sends one ``LiveRunRequest`` and turns the events that come back
into views: every ``SpanBatch`` grows the running loop's timeline (redrawn at most once a
``REFRESH_S``), every ``LoopFinished`` replaces it with the finished run, and ``RunFinished``
brings the record for the whole page. The scheduler never waits for any of this: it runs in its
own process, and the drawing happens here, in the web server's.

With "stop early", each request gets a stop token picked from a quick greedy probe run, so
requests finish at different steps and the lag cost (forwards run after a stop) is measured.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import gradio as gr

import texts
import viz
from engine.processes import messages
from engine.processes.messages import LiveRunRequest
from engine.workloads import Workload, word_prompt_tokens
from record.run_record import run_dict
from record.schema import BASE_LANES, ENGINE_LOOPS, GPU_LANES, Loop, loop_label
from ui import common, presets
from ui.common import InputError, esc, lang_of, progress_bar, render_said, said, status
from ui.recorded_runs import shown, write_downloads
from ui.view import MainView, plot

MAX_ARRIVAL_S = 60.0       # requests / rate: how long the arrivals of one loop may take
REFRESH_S = 1.0            # the live timeline is redrawn at most this often (and at least 1/s)
# Seconds per decode step measured by earlier runs, by (model, device, batch, CUDA graphs): the
# estimate shown before the next run of the same configuration.
STEP_SECONDS: dict[tuple, float] = {}
MAX_REMEMBERED = 64
# Set by the Stop button, cleared when a run starts: runs take turns (one engine queue), so there
# is one run in progress to stop; while it winds down, its status keeps saying so.
STOPPING = threading.Event()


def run_live(loops, decode_steps, stop_early, device, model, requests, batch, prompt_len,
             prompts_text, max_new, temperature, cuda_graph, extra_cpu_us, request_rate=0.0,
             chat=False, lang_choice="English", shared_prefix=0, kv_pages=0):
    """Run the chosen loops; yield the main view as it grows (a generator of output tuples)."""
    lang = lang_of(lang_choice)
    try:
        request, notes = build_request(loops, decode_steps, stop_early, device, model, requests,
                                       batch, prompt_len, prompts_text, max_new, temperature,
                                       cuda_graph, extra_cpu_us, request_rate, chat,
                                       shared_prefix, kv_pages)
        if request.engine.device == "cuda" and not common.scheduler().ready().cuda:
            raise InputError("device_no_cuda")
    except InputError as error:
        spec = error.said()
        yield MainView(status=render_said(spec, lang), said=spec).values()
        return
    STOPPING.clear()
    key = (request.engine.model, request.engine.device, request.engine.max_batch_size,
           request.engine.cuda_graph)
    expected = _expected_steps(request)
    # While the run is on, a canvas draws it (cheap for the browser, whose cores are the
    # engine's too); the interactive chart comes back with the finished record.
    yield MainView(status=progress_bar(0.0, _starting_text(request, key, expected, notes, lang)),
                   timeline=gr.update(visible=False), live=gr.update(value="", visible=True),
                   memory=gr.update(visible=False),
                   zoomed=plot(viz.message_figure(texts.t(lang, "zoom_after_run"))), metrics="",
                   texts="").values()
    live = _LiveRuns(request)
    started, drawn = time.perf_counter(), -REFRESH_S      # the first spans are drawn at once
    try:
        for event in common.scheduler().submit(request):
            if isinstance(event, messages.Progress):
                live.stage(event)
                yield MainView(status=_running(live, expected, started, lang)).values()
            elif isinstance(event, messages.SpanBatch):
                live.add(event)
                if time.perf_counter() - drawn >= REFRESH_S:
                    drawn = time.perf_counter()
                    yield MainView(status=_running(live, expected, started, lang),
                                   live=viz.live_payload(live.runs(), lang)).values()
            elif isinstance(event, messages.LoopFinished):
                live.finish(event)
                drawn = time.perf_counter()
                yield MainView(live=viz.live_payload(live.runs(), lang)).values()
            elif isinstance(event, messages.RunFinished):
                _remember_step_time(key, event.record)
                presets.remember(presets.profile_of_run(event.record))   # the sizing line's now
                yield _finished(event.record, request, notes, lang).values()
            elif isinstance(event, messages.RequestFailed):
                spec = failure(event.kind, event.message)
                yield _failed_view(spec, lang, live.drew_any()).values()
    except Exception as error:  # noqa: BLE001 - the scheduler process died, or worse
        from engine.processes.scheduler_process import SchedulerDied

        kind = "died" if isinstance(error, SchedulerDied) else "error"
        spec = failure(kind, f"{type(error).__name__}: {error}")
        yield _failed_view(spec, lang, live.drew_any()).values()


def _failed_view(spec: dict[str, Any], lang: str, drew: bool = True) -> MainView:
    """A run that did not finish: its status. A stopped run keeps its live canvas (what ran up
    to the stop), and the step window says why it has nothing to draw (it said it would be
    drawn when the run finished); one stopped before its first step (``drew`` False: in the
    probe, say) says so in place of an empty canvas. A failed one gets the interactive chart
    back in place of an empty canvas, showing what it showed before the run."""
    if spec["key"] == "fail_cancelled" and not drew:
        message = plot(viz.message_figure(texts.t(lang, "timeline_stopped")))
        return MainView(status=render_said(spec, lang), said=spec,
                        timeline=gr.update(value=message, visible=True),
                        live=gr.update(value="", visible=False),
                        zoomed=plot(viz.message_figure(texts.t(lang, "zoom_stopped"))))
    if spec["key"] == "fail_cancelled":
        return MainView(status=render_said(spec, lang), said=spec,
                        zoomed=plot(viz.message_figure(texts.t(lang, "zoom_stopped"))))
    return MainView(status=render_said(spec, lang), said=spec,
                    timeline=gr.update(visible=True), live=gr.update(value="", visible=False))


def stop_run(lang_choice: str) -> str:
    """The Stop button: the run ends at the scheduler's next iteration (and says so)."""
    lang = lang_of(lang_choice)
    client = common.scheduler()
    if not client.busy:
        return gr.update()                  # nothing to stop: the status line stays as it was
    STOPPING.set()
    client.cancel()
    return status(texts.t(lang, "status_stopping"), "warn")


def build_request(loops, decode_steps, stop_early, device, model, requests, batch, prompt_len,
                  prompts_text, max_new, temperature, cuda_graph, extra_cpu_us,
                  request_rate=0.0, chat=False, shared_prefix=0,
                  kv_pages=0) -> tuple[LiveRunRequest, list[str]]:
    """The request for the scheduler process, and notes for the user about what it will run.
    ``InputError`` for a value the run cannot take.

    ``request_rate`` (requests/s): 0 admits every request at the start; above 0 they arrive by
    a Poisson process (seed 0), the same arrival times for every loop, and the page reports time
    to first token and inter-token latency. ``chat``: each prompt goes in as a user message
    through the model's chat template (models without one, or without a tokenizer, take the
    text as it is). ``shared_prefix``: tokens of one system prompt before every prompt (what
    the prefix cache serves after the first prefill). ``kv_pages``: the KV pool (0: pages for
    every request at full length; fewer make the scheduler retract requests)."""
    from engine.config import EngineConfig, SamplingParams

    values = common.validate(requests=requests, batch=batch, prompt_len=prompt_len,
                             max_new=max_new, temperature=temperature, extra_cpu_us=extra_cpu_us,
                             decode_steps=decode_steps, request_rate=request_rate,
                             shared_prefix=shared_prefix, kv_pages=kv_pages)
    chosen = tuple(loop for loop in ENGINE_LOOPS if loop in (loops or []))
    if not chosen:
        raise InputError("error_no_loop")
    model = common.check_model(model)
    if device not in ("auto", "cpu", "cuda"):
        raise InputError("error_device", device=device)
    prompts, used_default = common.word_prompts(prompts_text, values["requests"],
                                                values["prompt_len"])
    notes = ["note_default_prompts"] if used_default else []
    # Words become about two tokens each (chat adds its template); the shared system prompt
    # comes before every prompt.
    max_seq_len = Workload(word_prompt_tokens(values["prompt_len"]), values["max_new"],
                           values["shared_prefix"]).max_seq_len()
    engine = EngineConfig(model=model, device=device, max_batch_size=values["batch"],
                          cuda_graph=bool(cuda_graph) and device != "cpu", seed=0,
                          max_seq_len=max_seq_len, num_pages=values["kv_pages"] or None)
    if values["kv_pages"] and values["kv_pages"] < engine.pages_per_seq:
        raise InputError("error_kv_pages", need=engine.pages_per_seq, tokens=max_seq_len,
                         value=values["kv_pages"])
    params = SamplingParams(max_new_tokens=values["max_new"], temperature=values["temperature"])
    rate = values["request_rate"] or None
    if rate and values["requests"] / rate > MAX_ARRIVAL_S:     # a run must not take hours
        raise InputError("error_rate_slow", rate=rate, requests=values["requests"],
                         seconds=values["requests"] / rate, limit=MAX_ARRIVAL_S)
    workload = {"requests": values["requests"], "prompt_len_words": values["prompt_len"],
                "max_new_tokens": values["max_new"], "temperature": values["temperature"],
                "request_rate": rate, "chat": bool(chat),
                "shared_prefix_tokens": values["shared_prefix"],
                "kv_pages": values["kv_pages"] or None}
    request = LiveRunRequest(engine=engine, prompts=prompts, prompt_tokens=values["prompt_len"],
                             params=params, loops=chosen, decode_steps=values["decode_steps"],
                             extra_cpu_us=values["extra_cpu_us"], stop_early=bool(stop_early),
                             workload=workload, request_rate=rate, chat=bool(chat),
                             shared_prefix=values["shared_prefix"])
    return request, notes


class _LiveRuns:
    """The runs of one request as they grow: finished runs, then the one in progress."""

    def __init__(self, request: LiveRunRequest) -> None:
        self.request = request
        self.finished: list[dict[str, Any]] = []
        self.spans: list[dict[str, Any]] = []
        self.index = 0
        self.stage_name = "loading"
        self.done_mib = self.total_mib = 0.0          # a hub model's download
        self.loop_started = time.perf_counter()       # when the loop now running began

    def stage(self, event: messages.Progress) -> None:
        if event.stage == "run" and (self.stage_name != "run" or event.index != self.index):
            self.index, self.spans = event.index, []      # a loop begins
            self.loop_started = time.perf_counter()
        self.stage_name = event.stage
        if event.stage == "download":
            self.done_mib, self.total_mib = event.done_mib, event.total_mib

    def add(self, batch: messages.SpanBatch) -> None:
        if batch.index == self.index:
            self.spans.extend(span.to_dict() for span in batch.spans)

    def finish(self, event: messages.LoopFinished) -> None:
        self.finished.append(event.run)
        self.index, self.spans = event.index + 1, []
        self.loop_started = time.perf_counter()

    @property
    def loop(self) -> str:
        loops = self.request.loops
        return loops[min(self.index, len(loops) - 1)]

    def runs(self) -> list[dict[str, Any]]:
        if self.index >= len(self.request.loops) or self.stage_name != "run":
            return list(self.finished)
        spec = self.request.loop_specs()[self.index]
        # The copy stream's lane, where the device has one, comes in with its spans.
        live = run_dict(spec.loop, spec.k, loop_label(spec.loop, spec.k), self.spans,
                        lanes=BASE_LANES, gpu_lanes=GPU_LANES)
        return self.finished + [live]

    def drew_any(self) -> bool:
        """Has the canvas anything of this run to show (a finished loop, or spans)?"""
        return bool(self.finished or self.spans)

    def steps_done(self) -> int:
        return max((s["step"] for s in self.spans), default=0)


def _expected_steps(request: LiveRunRequest) -> int:
    """About how many steps one loop takes: a prefill and the decode steps of each wave."""
    waves = math.ceil(len(request.prompts) / request.engine.max_batch_size)
    return waves * (request.params.max_new_tokens + 1)


def _starting_text(request: LiveRunRequest, key: tuple, expected: int, notes: list[str],
                   lang: str) -> str:
    loops = len(request.loops) + (1 if request.stop_early else 0)
    span = _arrival_span_s(request)
    step_s = STEP_SECONDS.get(key)
    if span:        # arrivals set the pace, not a count of steps: no estimate from step times
        text = texts.t(lang, "status_starting_arrivals").format(loops=len(request.loops), span=span)
    elif step_s:
        text = texts.t(lang, "status_starting").format(loops=len(request.loops), steps=expected)
        text += " " + texts.t(lang, "status_estimate").format(seconds=loops * expected * step_s,
                                                            step_ms=1e3 * step_s)
    else:
        text = texts.t(lang, "status_starting").format(loops=len(request.loops), steps=expected)
        text += " " + texts.t(lang, "status_no_estimate")
    return text + "".join(" " + texts.t(lang, note) for note in notes)


def _running(live: _LiveRuns, expected: int, started: float, lang: str) -> str:
    if STOPPING.is_set():                   # Stop was pressed: say so until the run has ended
        key = "status_stopping_probe" if live.stage_name == "probe" else "status_stopping"
        return status(texts.t(lang, key), "warn")
    seconds = time.perf_counter() - started
    if live.stage_name == "loading":
        return progress_bar(0.0, texts.t(lang, "status_loading"))
    if live.stage_name == "probe":
        return progress_bar(0.0, texts.t(lang, "status_probe"))
    if live.stage_name == "download":
        model = esc(live.request.engine.model)
        if live.total_mib <= 0:
            return progress_bar(0.0, texts.t(lang, "status_hub_checking").format(model=model))
        if live.done_mib >= live.total_mib:
            return progress_bar(1.0, texts.t(lang, "status_hub_ready").format(
                model=model, total=live.total_mib))
        return progress_bar(live.done_mib / live.total_mib, texts.t(lang, "status_download").format(
            model=model, done=live.done_mib, total=live.total_mib))
    total = len(live.request.loops)
    step = live.steps_done()
    words = {"mode": esc(texts.t(lang, f"loop_{live.loop}")), "step": step, "expected": expected,
             "seconds": seconds, "index": min(live.index + 1, total), "total": total}
    span = _arrival_span_s(live.request)
    if span:        # arrivals set the pace: the steps are as many as the time they take allows
        done = min((time.perf_counter() - live.loop_started) / (1.1 * span), 0.99)
        text = texts.t(lang, "status_running_arrivals").format(span=span, **words)
    else:
        done = min(step / expected, 1.0)
        text = texts.t(lang, "status_running").format(**words)
    return progress_bar((len(live.finished) + done) / total, text)


def _arrival_span_s(request: LiveRunRequest) -> float:
    """About how long the requests take to arrive (0: all at the start)."""
    rate = request.request_rate
    return len(request.prompts) / rate if rate and math.isfinite(rate) else 0.0


def _remember_step_time(key: tuple, record: dict[str, Any]) -> None:
    """The mean step time of the record's loops: what the next estimate of this setup uses
    (the latest ``MAX_REMEMBERED`` setups: visitors may type any number of hub ids)."""
    steps = [run["metrics"].get("mean_step_us") or 0.0 for run in record["runs"]]
    steps = [us for us in steps if us > 0]
    if steps:
        STEP_SECONDS.pop(key, None)
        STEP_SECONDS[key] = sum(steps) / len(steps) / 1e6
        while len(STEP_SECONDS) > MAX_REMEMBERED:
            STEP_SECONDS.pop(next(iter(STEP_SECONDS)))


def _finished(record: dict[str, Any], request: LiveRunRequest, notes: list[str],
              lang: str) -> MainView:
    files = write_downloads(record)
    last = record["runs"][-1]
    kind = str(record["env"].get("device_kind", ""))
    place_key, cores = common.placement_note()
    said_notes = ([place_key] if kind == "cpu-process" else []) + notes   # where it ran matters
    if request.chat and not record["config"].get("chat"):
        said_notes.append("note_no_chat_template")
    spec = said("status_done", "ok", notes=tuple(said_notes), requests=len(request.prompts),
                tokens=int(last["metrics"].get("output_tokens") or 0),
                where=viz.record_label(record), device_key=f"kind_{kind}", **cores)
    return shown(spec, record, lang, files)


def failure(kind: str, detail: str) -> dict[str, Any]:
    """A failed request as a status spec: a sentence in the user's language, and the technical
    detail (English, as the engine says it) folded away beneath it."""
    key = {"invalid": "fail_invalid", "cancelled": "fail_cancelled", "device": "fail_device",
           "died": "fail_died", "model": "fail_model",
           "offline": "fail_offline"}.get(kind, "fail_error")
    if kind == "cancelled":
        return said(key, "warn")
    return said(key, "error", detail=detail)


def prewarm() -> None:
    """Start the scheduler process, build the default engine and probe the default workload's
    stop tokens, so the first Run starts drawing at once. A failed warm-up is not fatal: Run
    starts (and reports) it again."""
    from engine.processes.messages import WarmRequest

    d = common.DEFAULTS
    try:
        # On a GPU the page's first click runs with CUDA graphs (presets.device_defaults): warm
        # that engine, and measure its forward for the defaults.
        graphs = common.scheduler().ready().cuda
        request, _ = build_request([Loop.NORMAL, Loop.OVERLAP], d["decode_steps"], True, "auto",
                                   "bundled", d["requests"], d["batch"], d["prompt_len"],
                                   common.DEFAULT_PROMPTS, d["max_new"], d["temperature"], graphs,
                                   d["extra_cpu_us"])
        for event in common.scheduler().submit(WarmRequest(request.engine, probe=request)):
            presets.remember(getattr(event, "profile", None))   # sizes presets and defaults
    except Exception as error:  # noqa: BLE001
        if not common.SHUTTING_DOWN.is_set():   # Ctrl-C during the warm-up ends it, quietly
            print(f"prewarm skipped: {type(error).__name__}: {error}", flush=True)
    finally:
        presets.WARMED.set()        # a page load waiting to size its controls goes on
