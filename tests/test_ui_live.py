"""A small live run of all three loops through the UI's handler, on CPU, through the real
scheduler process: multi-step overlap gives the same tokens as the normal loop, pays for its gain
with wasted tokens after stops (counted per request), its formula and lag cost reach the page, the
timeline grows while the run is on, and bad input is refused by name in both languages."""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")
pytest.importorskip("torch")

from ui_wiring import events, one_queue, queues  # noqa: E402

from record.run_record import load_record  # noqa: E402
from ui import live_runs, scheduler_link  # noqa: E402
from ui.controls import Controls  # noqa: E402
from ui.state import APP  # noqa: E402
from ui.status import render_said, said  # noqa: E402
from ui.view import MainView  # noqa: E402

NAMES = [f.name for f in fields(MainView)]
ARGS = {"loops": ["normal", "overlap", "multistep"], "decode_steps": 3, "stop_early": True,
        "device": "cpu", "model": "bundled", "requests": 4, "batch": 4, "prompt_len": 6,
        "prompts_text": "", "max_new": 24, "temperature": 0.0, "cuda_graph": False,
        "extra_cpu_us": 0, "lang_choice": "English"}


def views(**changes):
    """Every view the handler yields, as {field: value} dicts."""
    return [dict(zip(NAMES, values)) for values in live_runs.run_live(Controls(**{**ARGS, **changes}))]


@pytest.fixture(scope="module")
def outputs():
    live_runs.HOLD_S = 0.0          # draw every span batch, so the test sees the view grow
    yield views()
    scheduler_link.shutdown()


def _plain(value) -> bool:
    """Only builtin JSON-like types, exactly (a ``str`` subclass such as torch's TorchVersion pickles as
    its class, and unpickling it imports torch into the web server: 2 s of a first click)."""
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    return type(value) in (str, int, float, bool, type(None))


def test_three_loops_run_and_agree_token_for_token(outputs):
    final = outputs[-1]
    assert "Done" in final["status"]
    assert "built-in prompts were used" in final["status"]      # said, not silently done
    assert "Placement: the OS placed" in final["status"]       # where the processes ran
    assert _plain(final["record"]), "the record must unpickle in the web server without torch"
    runs = final["record"]["runs"]
    assert [(run["loop"], run["decode_steps"]) for run in runs] == [
        ("normal", 1), ("overlap", 1), ("multistep", 3)]
    tokens = [[out["token_ids"] for out in run["outputs"]] for run in runs]
    assert tokens[0] == tokens[1] == tokens[2]
    config = final["record"]["config"]
    assert runs[-1]["decode_steps"] == 3 and config["stop_tokens_from_probe"] is True


def test_the_timeline_is_drawn_while_the_run_is_on(outputs):
    drawn = [view["live"] for view in outputs[:-1] if isinstance(view["live"], str)]
    assert len(drawn) >= 3, "the live view should be redrawn as spans arrive"
    counts = [sum(len(run["spans"]) for run in json.loads(payload)["runs"]) for payload in drawn]
    assert counts[-1] > counts[0] > 0                           # it grows


def test_stops_fire_and_the_lag_cost_is_counted(outputs):
    runs = outputs[-1]["record"]["runs"]
    assert all(out["finish_reason"] == "stop" for out in runs[0]["outputs"])
    wasted = [run["metrics"]["wasted_tokens"] for run in runs]
    assert wasted[0] == 0 and 0 < wasted[1] <= wasted[2]
    per_request = [sum(out["wasted_steps"] for out in run["outputs"]) for run in runs]
    assert per_request == wasted


def test_the_page_shows_the_multistep_formula_and_cost(outputs):
    metrics_html, texts_html = outputs[-1]["metrics"], outputs[-1]["texts"]
    assert "max(T_fwd, (T_sched + T_post) / k)" in metrics_html and "/ 3)" in metrics_html
    assert "the lag cost, measured" in metrics_html and "multistep k=3" in metrics_html
    assert "extra steps after stop (multistep k=3)" in texts_html


@pytest.mark.parametrize("changes, english, chinese", [
    ({"requests": 2.5}, "Requests must be a whole number from 1 to 64; got 2.5", "请求数必须是"),
    ({"batch": 1000}, "Batch size must be from 1 to 64; got 1000", "批大小必须在"),
    ({"temperature": -5}, "Temperature must be from 0.0 to 2.0; got -5", "温度必须在"),
    ({"max_new": None}, "Max new tokens is empty", "最大新 token 数为空"),
    ({"loops": []}, "choose at least one scheduling loop", "请至少选择"),
])
def test_bad_input_is_refused_by_name_in_both_languages(changes, english, chinese):
    (view,) = views(**changes)
    assert english in view["status"] and "status-error" in view["status"]
    (view,) = views(**changes, lang_choice="中文")
    assert chinese in view["status"]


def test_the_run_label_says_where_the_processes_ran_in_both_languages(monkeypatch):
    """Unpinned by default (measured better with a browser beside the app); OVERLAP_DEMO_PIN=1
    pins, and the label names the cores."""
    spec = said("status_done", "ok", notes=(scheduler_link.placement_note()[0],), requests=1,
                       tokens=1, where="CPU", device_key="kind_cpu-process")
    assert "none pinned" in render_said(spec, "en")
    monkeypatch.setenv("OVERLAP_DEMO_PIN", "1")
    key, cores = scheduler_link.placement_note()
    spec = said("status_done", "ok", notes=(key,), requests=1, tokens=1, where="CPU",
                       device_key="kind_cpu-process", **cores)
    placement = scheduler_link.placement()
    assert f"device process on core {placement.device[0]}" in render_said(spec, "en")
    assert f"设备进程在核心 {placement.device[0]}" in render_said(spec, "zh")


def test_the_presets_set_controls_the_run_accepts_and_are_sized_to_the_machine():
    """Without a measurement the presets use the values measured on the 2-core machine; with
    the warm-up's DeviceProfile of the device the run uses they bring the CPU's part of a step
    to 0.7 forwards (overlap: inside what one step hides) or three (multi-step: more than
    one-step overlap can hide, what k = 4 steps are for), in the control's steps there."""
    from engine.scheduler_process.messages import DeviceProfile
    from ui import presets

    APP.profiles.clear()
    for name in presets.PRESETS:
        values, said = presets.preset(name, "English", "cpu")
        request, _ = live_runs.build_request(Controls.page_defaults(
            **values, device="cpu", model="bundled", prompts_text="", cuda_graph=False))
        assert [spec.loop for spec in request.loops] == list(values["loops"])
        assert "2-core" in said
    heavy, _ = presets.preset("multistep")
    assert "multistep" in heavy["loops"] and heavy["decode_steps"] == 4
    assert heavy["extra_cpu_us"] == 60000
    presets.remember(DeviceProfile("cuda", "NVIDIA H200", "bundled", 16, True, 320.0, 140.0))
    presets.remember(DeviceProfile("cpu-process", "CPU", "bundled", 16, False, 4600.0, 700.0))
    try:
        values, said = presets.preset("multistep", "中文", "cuda")
        assert values["extra_cpu_us"] == 820                # 3 x 0.32 - 0.14 ms
        assert "k = 3" in said and " ms" not in said        # no figure from the server's runs
        values, _ = presets.preset("overlap", "English", "cuda")
        assert values["loops"] == ["normal", "overlap"]
        assert values["extra_cpu_us"] == 80                # 0.7 x 0.32 - 0.14 ms, in 10 us steps
        cpu, _ = presets.preset("overlap", "English", "cpu")
        assert cpu["extra_cpu_us"] == 2500                 # 0.7 x 4.6 - 0.7 ms, in 250 us steps
    finally:
        APP.profiles.clear()


def test_the_page_defaults_fit_the_device_the_run_uses():
    """On CUDA the untouched CPU-sized default (4 ms, 90% idle GPU in both loops) becomes 0.7
    forwards there, with graphs on and the control in 10 us steps up to eight forwards; a value
    the reader chose stays; CPU mode keeps its first click; the line names what was measured."""
    from engine.scheduler_process.messages import DeviceProfile
    from ui import presets

    APP.profiles.clear()
    APP.warmed.set()
    try:
        slider, graphs, said = presets.device_defaults("cuda", 4000, False, "English")
        assert graphs.get("value") is True and "no warm-up" in said and "value" not in slider
        presets.remember(DeviceProfile("cuda", "NVIDIA H200", "bundled", 16, True, 320.0, 120.0))
        slider, graphs, said = presets.device_defaults("cuda", 4000, False, "English")
        assert (slider["value"], slider["step"], slider["maximum"]) == (100, 10, 3000)
        assert graphs["value"] is True
        # Before the visitor's own run the line quotes no figure (the warm-up, or another
        # visitor's run, measured the server's); with their own, it quotes theirs.
        assert "overlap loop can hide" in said and " ms" not in said and "µs" not in said
        mine = DeviceProfile("cuda", "NVIDIA H200", "bundled", 16, True, 320.0, 120.0,
                             source="run", extra_us=100)
        _, _, said = presets.device_defaults("cuda", 4000, False, "English", mine)
        assert "0.32 ms" in said and "0.12 ms" in said and "200 µs" in said and "k = 1" in said
        assert "your last run" in said
        slider, graphs, _ = presets.device_defaults("cuda", 1500, False, "English")
        assert "value" not in slider and "value" not in graphs          # the reader's choice
        slider, _, said = presets.device_defaults("cuda", 1500, False, "中文", mine, changed=True)
        assert slider["value"] == 100 and "在 NVIDIA H200 上" in said and "你上次运行" in said
        slider, graphs, said = presets.device_defaults("cpu", 20, True, "English", changed=True)
        assert (slider["value"], slider["step"], slider["maximum"]) == (4000, 250, 100000)
        assert "2-core" in said and "value" not in graphs
        slider, _, _ = presets.device_defaults("cpu", 1250, False, "English")
        assert "value" not in slider               # a page load on a CPU changes no value
        assert "0.32 ms" in presets.describe("cuda", 20, "English", mine)
        assert "0.32 ms" not in presets.describe("cuda", 20, "English")
        # A number typed past the control's ends (ui.view.slider lets it through as typed):
        # the sizing line says so, in the page's language, and names the limits.
        for typed in (-5, 10**9, 2.5, None):
            said = presets.describe("cuda", typed, "English")
            assert "Extra CPU work" in said, said
            assert "0.32 ms" not in said and "status-error" in said
        assert "额外 CPU 工作" in presets.describe("cpu", 10**9, "中文")
        _, _, said = presets.device_defaults("cuda", 10**9, False, "English")
        assert "1000000000" in said and "status-error" in said
    finally:
        APP.profiles.clear()


class _ProbingScheduler:
    """Stands in for the scheduler process's client: a run that is probing when Stop is pressed
    (the test presses it between two events), then winds down and ends cancelled."""

    def __init__(self):
        self.cancelled = 0

    def ready(self):
        from engine.scheduler_process.messages import SchedulerReady

        return SchedulerReady(0, False, "CPU", "")

    def cancel(self):
        self.cancelled += 1

    def submit(self, _request):
        from engine.scheduler_process.messages import Progress, RequestFailed

        yield Progress("loading")
        yield Progress("probe", detail="CPU")
        yield Progress("probe", detail="CPU")              # Stop is pressed before this one
        yield RequestFailed("cancelled", "the run was stopped before it finished")


def test_stop_while_probing_says_stopping_until_the_run_has_ended_and_leaves_no_stale_caption(
        monkeypatch):
    from types import SimpleNamespace

    from ui.turns import Turns

    fake = _ProbingScheduler()
    monkeypatch.setattr(scheduler_link, "scheduler", lambda: fake)
    monkeypatch.setattr(APP, "turns", Turns())
    ticket = APP.turns.join("run", "page-a", "work")             # its turn: the line is empty
    run = live_runs.run_live(Controls(**{**ARGS, "extra_cpu_us": 0}), ticket)
    views_seen = []
    for i, values in enumerate(run):
        views_seen.append(dict(zip(NAMES, values)))
        if i == 2:                                         # the first "Probing…" status
            assert "Probing" in views_seen[-1]["status"]
            other = live_runs.stop_run("English", SimpleNamespace(session_hash="page-b"))
            assert other == {"__type__": "update"} and fake.cancelled == 0   # not theirs
            stopped = live_runs.stop_run("English", SimpleNamespace(session_hash="page-a"))
            assert "Stopping" in stopped and fake.cancelled == 1
    APP.turns.leave(ticket)
    assert "Stopping: the probe run that picks each request's stop token ends first" in \
        views_seen[-2]["status"]                           # not "Probing…" again
    final = views_seen[-1]
    assert "Stopped: the run was ended before it finished" in final["status"]
    zoomed = json.loads(final["zoomed"].plot)
    said = " ".join(a["text"] for a in zoomed["layout"]["annotations"])
    assert "stopped before it finished" in said            # not "drawn when the run has finished"
    whole = json.loads(final["timeline"]["value"].plot)   # nothing ran: said, not an empty plot
    assert "stopped before its first step" in whole["layout"]["annotations"][0]["text"]
    assert final["timeline"]["visible"] is True and final["live"]["visible"] is False
    again = [dict(zip(NAMES, values)) for values in live_runs.run_live(Controls(**ARGS))]  # next run
    assert "Probing" in again[2]["status"]                 # ... is not "stopping" any more


def test_step_times_are_remembered_for_the_latest_setups_only():
    APP.step_seconds.clear()
    record = {"runs": [{"metrics": {"mean_step_us": 2000.0}}]}
    for i in range(live_runs.MAX_REMEMBERED + 10):
        live_runs._remember_step_time((f"org/model-{i}", "cpu", 16, False), record)
    assert len(APP.step_seconds) == live_runs.MAX_REMEMBERED
    assert ("org/model-0", "cpu", 16, False) not in APP.step_seconds
    assert APP.step_seconds[(f"org/model-{live_runs.MAX_REMEMBERED + 9}", "cpu", 16, False)] == 0.002


def test_a_shared_prompt_on_a_small_pool_shows_hits_retractions_and_the_memory_chart():
    """The page's memory controls reach the engine: a shared system prompt is served by the
    prefix cache after the first prefills, a pool below every request at full length retracts,
    every loop still gives the same tokens, and the KV-memory chart is shown for the run."""
    # 8 requests, 8 rows: 64 + 2*6 + 48 + 64 = 188 tokens a request at most (12 pages); 8 x 12
    # pages would hold them all, 40 do not.
    (*_, final) = views(loops=["normal", "overlap"], requests=8, batch=8, max_new=48,
                        stop_early=False, shared_prefix=64, kv_pages=40)
    assert "Done" in final["status"], final["status"]
    runs = final["record"]["runs"]
    assert final["record"]["config"]["shared_prefix"] == 64
    tokens = [[out["token_ids"] for out in run["outputs"]] for run in runs]
    assert tokens[0] == tokens[1]
    for run in runs:
        assert run["metrics"]["prefix_hit_tokens"] > 0 and run["metrics"]["retractions"] > 0
        assert run["memory"]["total_pages"] == 40
    assert final["memory"]["visible"] is True and final["memory"]["value"] is not None
    (view,) = views(shared_prefix=64, kv_pages=5)        # 64 + 12 + 24 + 64 = 164 tokens: 11
    assert "at least 11" in view["status"] and "status-error" in view["status"]
    (view,) = views(shared_prefix=64, kv_pages=5, lang_choice="中文")
    assert "KV 页数必须为 0" in view["status"]
    (view,) = views(shared_prefix=2.5)
    assert "Shared system prompt must be a whole number" in view["status"]


def test_the_sizing_line_speaks_of_the_visitors_own_run_once_there_is_one():
    """After a run of the setup the warm-up measured, the presets are sized by that run's serial
    loop's forward and scheduler work (less the extra CPU work it was given); a warm-up ending
    later keeps them; a run of another setup, or with arrivals, changes nothing. The line quotes
    those figures only to the visitor whose run it was (their own measurement), named as such."""
    import json

    from engine.scheduler_process.messages import DeviceProfile
    from ui import presets

    record = json.loads((ROOT / "assets" / "recorded" / "h200-first-click-defaults.json").read_text())
    normal = next(run for run in record["runs"] if run["loop"] == "normal")
    APP.profiles.clear()
    try:
        profile = presets.profile_of_run(record)
        assert profile.source == "run" and profile.device_kind == "cuda"
        assert profile.t_fwd_us == normal["metrics"]["t_fwd_us"]
        extra = normal["extra_cpu_us"]                            # what the page sized
        assert profile.t_cpu_us == pytest.approx(normal["metrics"]["t_cpu_us"] - extra)
        given = dict(record, runs=[dict(run, extra_cpu_us=50) for run in record["runs"]])
        assert presets.profile_of_run(given).t_cpu_us == pytest.approx(
            max(normal["metrics"]["t_cpu_us"] - 50, 0.0))
        assert not isinstance(presets.follow("cuda", 0, "English"), str)   # nothing measured:
        presets.remember(profile)                     # the line stays; nor does a run alone
        assert presets.profile_for("cuda") is None     # size the setup the warm-up measures
        warm = DeviceProfile("cuda", "NVIDIA H200", "bundled", 16, True, 999.0, 1.0)
        presets.remember(warm)
        presets.remember(profile)
        assert presets.profile_for("cuda").source == "run"
        presets.remember(warm)                         # a warm-up ending after the run
        assert presets.profile_for("cuda").source == "run"
        other = presets.profile_of_run(dict(record, config=dict(record["config"],
                                                                max_batch_size=64)))
        presets.remember(other)                        # another batch: not the page's setup
        assert presets.profile_for("cuda").batch == 16
        arrivals = dict(record, config=dict(record["config"], request_rate=8.0))
        assert presets.profile_of_run(arrivals) is None
        assert " ms" not in presets.describe("cuda", 0, "English")   # another visitor's run
        done = said("status_done", "ok")
        mine = presets.own_measurement(record, done, None)           # the visitor's own run
        assert mine == profile and presets.own_measurement(record, None, None) is None
        said_en = presets.describe("cuda", 0, "English", mine)
        assert "in the serial loop of your last run" in said_en and "B = 16" in said_en
        assert f"it had {extra} µs of extra CPU work a step, left out here" in said_en
        assert "你上次运行" in presets.describe("cuda", 0, "中文", mine)
        mine = presets.own_measurement(given, done, mine)   # a run given 50 µs: the line says so
        assert "it had 50 µs of extra CPU work a step" in presets.describe("cuda", 0, "English",
                                                                            mine)
        assert "每步有 50 µs 额外 CPU 工作，这里已扣除" in presets.describe("cuda", 0, "中文", mine)
        wide = dict(record, config=dict(record["config"], max_batch_size=64))
        assert presets.own_measurement(wide, done, mine) is mine   # not the presets' setup
        assert presets.profile_of_run({"runs": [], "config": {}, "env": {}}) is None
    finally:
        APP.profiles.clear()


def test_every_handler_that_reads_the_extra_work_control_for_the_sizing_line_is_in_its_queue():
    """The page's wiring: each reply about the extra-CPU-work control is computed from its value
    when the event was triggered (a run's end, a page load, a typed number, a language switch),
    so they run one at a time in the order triggered and the last word is about the value the
    reader left (a typed 999999 is refused on screen even when a run's closing reply is late)."""
    from ui import presets

    def elem(block) -> str | None:
        return getattr(block, "elem_id", None)

    wired = events(lambda fn: "preset-said" in {elem(out) for out in fn.outputs}
                   and "extra-cpu-us" in {elem(i) for i in fn.inputs})
    assert len(wired) >= 4          # the run's end, the page load, the device, the control, ...
    assert all(fn.queue for fn in wired)
    assert queues(wired) == one_queue(presets.SAID_QUEUE)


def test_a_language_switch_during_a_run_waits_for_it_and_the_finished_run_follows():
    """A switch while a run is on leaves its views alone (the run's own keep coming; the old
    behaviour put the idle "press Run" prompt over a running run); once it has finished, the run
    is drawn again in the language chosen meanwhile, and only then."""
    from ui.recorded_runs import RECORDED_DIR
    from ui.tabs import run_view

    running = said(live_runs.RUN_ON, "running")
    unchanged = run_view.redraw_view("中文", None, running, None, None)
    assert len(unchanged) == len(run_view.REDRAWN) and all(u == {"__type__": "update"}
                                                          for u in unchanged)
    record = load_record(RECORDED_DIR / "h200-ours-qwen05-b16.json")
    done = said("status_recorded", "ok", where="H200")
    assert all(u == {"__type__": "update"} for u in
               run_view.follow_language("English", "en", record, done, 1, 3))
    drawn = dict(zip(run_view.REDRAWN, run_view.follow_language("中文", "en", record, done, 1, 3)))
    assert drawn["shown_lang"] == "zh" and "录制于" in drawn["status"]
    assert "重叠" in json.dumps(json.loads(drawn["timeline"]["value"].plot), ensure_ascii=False)


def test_a_run_stopped_in_a_later_round_keeps_each_loops_whole_run_drawn():
    """Stopped while the serial loop runs its second round, the canvas shows the serial loop's
    whole first run (not the half of the second) beside the overlap loop's, and a request stopped
    before any step draws nothing."""
    from types import SimpleNamespace

    from engine.config import LoopSpec
    from engine.scheduler_process import messages
    from record.recorder import Span
    from record.run_record import run_dict
    from record.schema import Loop

    request = SimpleNamespace(loops=[LoopSpec(Loop.NORMAL), LoopSpec(Loop.OVERLAP)], rounds=2)
    live = live_runs._LiveRuns(request, expected=8, lang="en")
    stop = live_runs.failure("cancelled", "")
    assert live.kept() == {}
    nothing = dict(zip(NAMES, live_runs._failed_view(stop, "en", live).values()))
    assert not nothing["live"]["visible"] and nothing["timeline"]["visible"]

    def spans(steps: int) -> list[Span]:
        return [Span("cpu", "schedule", step, 10.0 * step, 10.0 * step + 5) for step in range(steps)]

    whole = {index: run_dict(spec.loop, 1, spec.label, [s.to_dict() for s in spans(8)])
             for index, spec in enumerate(request.loops)}
    for index in (0, 1):                                  # both loops run whole first
        live.stage(messages.Progress("run", index=index))
        live.add(messages.SpanBatch(index, spans(8)))
        live.finish(messages.LoopFinished(index, whole[index]))
    live.stage(messages.Progress("run", index=0))         # then the serial loop again, halfway
    live.add(messages.SpanBatch(0, spans(3)))
    assert max(s["step"] for s in live.runs()[0]["spans"]) == 2     # the canvas while it runs
    kept = live.kept()
    assert list(kept) == [0, 1] and kept[0] is whole[0] and kept[1] is whole[1]
    view = dict(zip(NAMES, live_runs._failed_view(stop, "en", live).values()))
    assert view["live"]["visible"] and view["live"]["value"]
