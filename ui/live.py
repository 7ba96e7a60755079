"""Live runs: the chosen scheduling loops, one after another, on one engine, drawn while they run.

Each loop runs in a worker thread while the handler redraws its ``Timeline`` every ~0.4 s; the
finished runs become one schema-1 record. The loops are the article's two (``normal``,
``overlap``) and multi-step overlap (k decode forwards per scheduling iteration, results
processed k steps late). With "stop early", each request gets a stop token picked from a quick
greedy probe run (as ``bench/multistep.py`` does), so requests finish at different steps
and the lag cost (forwards run after a stop) is real and measured.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from typing import Any

import gradio as gr

import viz
from ui import common
from ui.common import LOOPS, lang_of, progress_bar, status
from ui.records import progress, shown, write_downloads

REFRESH_S = 0.4
REDRAW_SHARE = 5      # wait at least this many times as long as the last redraw took


def run_live(loops, k, stop_early, device, model, requests, batch, prompt_len, prompts_text,
             max_new, temperature, cuda_graph, extra_cpu, lang_choice):
    """Run the chosen loops, yielding redrawn timelines while they work."""
    lang = lang_of(lang_choice)
    try:
        values = common.validate(requests=requests, batch=batch, prompt_len=prompt_len,
                                 max_new=max_new, temperature=temperature, extra_cpu=extra_cpu,
                                 k=k)
        chosen = [loop for loop in LOOPS if loop in (loops or [])]
        if not chosen:
            raise ValueError(viz.t(lang, "error_no_loop"))
        device = common.resolve_device(device)
    except ValueError as error:
        gr.Warning(str(error))
        yield shown(status(str(error), "error"), None, lang)
        return
    prompts = common.make_prompts(prompts_text, values["requests"], values["prompt_len"])
    finished: list[dict[str, Any]] = []
    lock = common.device_lock(device)
    try:
        if not lock.acquire(blocking=False):  # the warm-up or another run holds the device
            yield progress(progress_bar(0.0, viz.t(lang, "status_waiting")))
            lock.acquire()
        try:
            preparing = viz.t(lang, "status_preparing").format(device=device.upper())
            yield (progress_bar(0.0, preparing), gr.update(),  # clear the last run's results
                   viz.message_figure(viz.t(lang, "zoom_after_run")), "", "", gr.update(),
                   gr.update(), None, gr.update(value=None, interactive=False),
                   gr.update(value=None, interactive=False))
            engine = common.engine_for(common.engine_kwargs(model, device, values, cuda_graph))
            prompts = common.token_prompts(engine, prompts, values["prompt_len"])
            params = _params(values)
            if stop_early:
                yield progress(progress_bar(0.0, viz.t(lang, "status_probe")))
                params = probe_stops(engine, prompts, values)
            for loop in chosen:
                yield from _run_one(engine, loop, prompts, params, values, finished, lang,
                                    len(chosen))
            record = _make_record(engine, finished, values, chosen, bool(stop_early))
        finally:
            lock.release()
        files = write_downloads(record)
    except Exception as error:  # noqa: BLE001 - any failure must reach the user, not kill the page
        message = viz.t(lang, "status_failed").format(error=common.error_text(error))
        gr.Warning(message)
        yield shown(status(message, "error"), None, lang)
        return
    tokens = record["runs"][-1]["metrics"].get("output_tokens", 0)
    device_detail = str(record["runs"][-1].get("label", "")).partition(" (")[2].rstrip(")")
    where = viz.record_label(record) + (f" ({device_detail})" if device_detail else "")
    done = viz.t(lang, "status_done").format(requests=len(prompts), tokens=f"{tokens:.0f}",
                                             where=where)
    yield shown(status(done, "ok"), record, lang, files)


def _params(values: dict[str, Any]) -> Any:
    from engine import SamplingParams

    return SamplingParams(max_new_tokens=values["max_new"], temperature=values["temperature"])


def probe_stops(engine: Any, prompts: list[Any], values: dict[str, Any]) -> list[Any]:
    """Per-request params whose stop token really fires, in the last three quarters of a greedy
    probe run's output (requests then finish at different steps, as in real traffic)."""
    from engine.workload import stop_params_from_probe

    new = values["max_new"]
    return stop_params_from_probe(engine, prompts, new, lo=new // 4, hi=new,
                                  temperature=values["temperature"])


def _run_one(engine: Any, loop: str, prompts: list[Any], params: Any, values: dict[str, Any],
             finished: list[dict[str, Any]], lang: str, total_runs: int):
    """Run one loop in a worker thread, yield live views, append its run dict to ``finished``."""
    from record.timeline import Timeline

    steps = values["k"] if loop == "multistep" else 1
    mode = f"multistep-{steps}" if loop == "multistep" else loop
    timeline, box = Timeline(), {}

    def work() -> None:
        try:
            box["result"] = engine.generate(prompts, params, overlap=loop != "normal",
                                            timeline=timeline, decode_steps=steps)
        except BaseException as error:  # noqa: BLE001 - handed back to the UI thread below
            box["error"] = error

    worker = threading.Thread(target=work, name=f"engine-{mode}", daemon=True)
    # A full collection of this process's large heap (gradio, plotly, torch) holds the GIL for
    # 0.1-0.3 s on a small CPU, and the scheduler thread then stalls mid-run: collect now,
    # outside the measured run, and not again until it ends.
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    worker.start()
    expected = math.ceil(len(prompts) / values["batch"]) * (values["max_new"] + 1)
    started = time.perf_counter()
    pause = REFRESH_S
    try:
        while worker.is_alive():
            worker.join(pause)
            drawing = time.perf_counter()
            live = _live_run(mode, timeline)
            step = viz.step_range(live)[1]
            text = viz.t(lang, "status_running").format(
                mode=mode, step=step, expected=expected, seconds=time.perf_counter() - started)
            fraction = (len(finished) + min(step / expected, 1.0)) / total_runs
            figure = viz.side_by_side_figure(finished + [live], lang=lang)
            # Drawing holds the GIL that the scheduler thread needs: keep it to a small share
            # of the run, so the live view does not distort what it measures.
            pause = max(REFRESH_S, REDRAW_SHARE * (time.perf_counter() - drawing))
            yield progress(progress_bar(fraction, text), figure)
    finally:
        worker.join()  # never hand the device to the next user while this run still uses it
        if collecting:
            gc.enable()
    if "error" in box:
        raise box["error"]
    finished.append(box["result"].to_run_dict())


def _live_run(mode: str, timeline: Any) -> dict[str, Any]:
    """A run dict of the spans recorded so far (no metrics yet: viz measures what it draws)."""
    from record.timeline import GPU_LANES, LANES

    return {"mode": mode, "label": mode, "lanes": list(LANES),
            "gpu_lanes": list(GPU_LANES), "metrics": {},
            "spans": [span.to_dict() for span in timeline.snapshot()], "outputs": []}


def _make_record(engine: Any, runs: list[dict[str, Any]], values: dict[str, Any],
                 loops: list[str], stop_early: bool) -> dict[str, Any]:
    from record.run_record import make_record

    config = {**engine.config_dict(), "requests": values["requests"],
              "prompt_len_words": values["prompt_len"], "max_new_tokens": values["max_new"],
              "temperature": values["temperature"], "loops": loops,
              "stop_tokens_from_probe": stop_early}
    if "multistep" in loops:
        config["decode_steps_per_schedule"] = values["k"]
    return make_record(engine.env_info(), config, runs)


def prewarm() -> None:
    """Build the default engine in the background, so the first Run starts drawing at once."""
    try:
        device = common.resolve_device("auto")
        with common.device_lock(device):
            common.engine_for(common.engine_kwargs("bundled", device, common.DEFAULTS, False))
    except Exception as error:  # noqa: BLE001 - a failed warm-up is retried, visibly, by Run
        print(f"prewarm skipped: {common.error_text(error)}", flush=True)
