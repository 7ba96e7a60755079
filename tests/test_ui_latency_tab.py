"""The app's serving side, through its handlers and the real scheduler process, offline:

- a hub model picked by id (a local hub cache, ``HF_HUB_OFFLINE=1``: the download code path
  without a network) runs with chat prompts and requests that arrive at a rate, and the page
  reports time to first token; the loops still agree token for token;
- the model box takes hub ids and refuses paths on the server, a rate too slow for a run is
  refused by name, in both languages;
- the serving tab lists the measurements in ``assets/serving`` and draws both loops.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("gradio")
pytest.importorskip("torch")

from hub_cache import add_to_cache, save_tiny_llama  # noqa: E402
from ui_wiring import events_running, one_queue, queues  # noqa: E402

from engine.models.loader import BUNDLED_DIR  # noqa: E402
from ui import inputs, live_runs, scheduler_link, serving_runs  # noqa: E402
from ui.controls import Controls  # noqa: E402
from ui.view import MainView  # noqa: E402

NAMES = [f.name for f in fields(MainView)]
REPO = "overlap-demo/tiny-llama-2.5-chat"          # dots, as "Qwen2.5" has
BASE_REPO = "overlap-demo/tiny-llama-base"          # a base model: no chat template
ARGS = {"loops": ["normal", "overlap"], "decode_steps": 3, "stop_early": False,
        "device": "cpu", "model": "bundled", "requests": 4, "batch": 4, "prompt_len": 6,
        "prompts_text": "", "max_new": 8, "temperature": 0.0, "cuda_graph": False,
        "extra_cpu_us": 0, "request_rate": 0.0, "chat": False, "lang_choice": "English"}


def views(**changes):
    return [dict(zip(NAMES, values)) for values in live_runs.run_live(Controls(**{**ARGS, **changes}))]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A hub cache holding REPO; the scheduler process is started afresh so it inherits it."""
    base = tmp_path_factory.mktemp("hub")
    add_to_cache(base / "cache", REPO, save_tiny_llama(base / "tiny", BUNDLED_DIR))
    files = save_tiny_llama(base / "tiny-base", BUNDLED_DIR)
    config = json.loads(files["tokenizer_config.json"].read_text())
    config.pop("chat_template")
    files["tokenizer_config.json"].write_text(json.dumps(config))
    add_to_cache(base / "cache", BASE_REPO, files)
    env = {"HF_HUB_CACHE": str(base / "cache"), "HF_HUB_OFFLINE": "1"}
    saved = {k: os.environ.get(k) for k in env}
    scheduler_link.shutdown()
    os.environ.update(env)
    yield REPO
    scheduler_link.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_a_hub_model_with_chat_and_arrivals_runs_and_reports_latency(hub):
    outputs = views(model=hub, chat=True, request_rate=40.0)
    statuses = " ".join(v["status"] for v in outputs if isinstance(v["status"], str))
    assert f"{hub}:" in statuses and "MiB of weights ready" in statuses   # the fetch, said
    final = outputs[-1]
    assert "status-ok" in final["status"], final["status"]
    assert 'data-metric="ttft_ms_mean"' in final["metrics"]
    assert 'data-metric="itl_ms_mean"' in final["metrics"]
    assert "the requests arrive over about" in statuses        # progress by arrival time
    assert "identical token ids" in final["texts"]
    assert final["record"]["config"]["request_rate"] == 40.0
    assert final["record"]["config"]["chat"] is True


def test_the_model_list_offers_hub_models_marked_by_the_cache(hub):
    choices = dict((value, label) for label, value in inputs.model_choices("en"))
    for repo in inputs.SUGGESTED_MODELS:
        assert repo in choices and ": hub, " in choices[repo]
    assert inputs.check_model(hub) == hub                     # a typed id is taken as it is


@pytest.mark.parametrize("changes, english, chinese", [
    ({"model": "../etc"}, "is neither a model in the list nor a Hugging Face hub id", "既不是"),
    ({"model": "tests/data"}, "paths on this server are not accepted", "不接受这台服务器上的路径"),
    ({"model": "  "}, "The model box is empty", "模型框为空"),
    ({"request_rate": -1}, "Request rate must be from 0.0 to 1000.0; got -1", "请求速率必须在"),
    ({"request_rate": 0.01}, "take about 400 s to arrive", "大约需要 400 秒"),
])
def test_bad_model_or_rate_is_refused_by_name_in_both_languages(changes, english, chinese):
    (view,) = views(**changes)
    assert english in view["status"] and "status-error" in view["status"], view["status"]
    (view,) = views(**changes, lang_choice="中文")
    assert chinese in view["status"], view["status"]


@pytest.mark.usefixtures("hub")                         # offline, with a cache that lacks it
def test_a_hub_model_that_is_not_cached_offline_says_so():
    final = views(model="overlap-demo/not-cached")[-1]
    assert "the Hugging Face hub cannot be reached from this machine" in final["status"]
    assert "HF_HUB_OFFLINE=1" in final["status"]            # the reason, in the detail
    assert final["timeline"]["visible"] is True and final["live"]["visible"] is False  # no empty canvas


def test_the_serving_tab_draws_every_measurement_in_both_languages():
    choices = serving_runs.list_measured("English")["choices"]
    assert len(choices) >= 2 and all("extra CPU" in label for label, _ in choices)
    for _, name in choices:
        figure, table = serving_runs.show_measured(name, "English")
        loops = {trace["legendgroup"] for trace in json.loads(figure.plot)["data"]}
        assert loops == {"normal", "overlap"}, name
        assert "<table" in table and "overlap" in table
    update, figure, table = serving_runs.relabel(choices[0][1], "中文")
    assert "每步额外 CPU" in update["choices"][0][0] and update["value"] == choices[0][1]
    assert "<th>请求速率</th>" in table and "请求/秒" in table and "req/s" not in table
    assert "首个 token 延迟" in figure.plot or "\\u9996" in figure.plot


def test_the_serving_tab_reads_only_its_own_files():
    figure, table = serving_runs.show_measured("../../README.md", "English")
    assert "Cannot show" in table and not json.loads(figure.plot)["data"]


def test_chat_on_the_bundled_model_goes_through_its_own_template():
    final = views(chat=True)[-1]
    assert "status-ok" in final["status"], final["status"]
    assert "no chat template" not in final["status"]
    assert final["record"]["config"]["chat"] is True


@pytest.mark.usefixtures("hub")
def test_chat_with_a_model_without_a_template_runs_on_plain_text_and_says_so():
    final = views(model=BASE_REPO, chat=True)[-1]
    assert "status-ok" in final["status"], final["status"]
    assert "no chat template" in final["status"]
    assert final["record"]["config"]["chat"] is False


def test_stop_with_nothing_running_changes_nothing():
    update = live_runs.stop_run("English")
    assert update == {"__type__": "update"}                 # the status line stays as it was


def test_the_serving_tabs_handlers_run_in_one_queue_of_one():
    """The page's wiring: a pick, a page load and a language switch each answer about the file
    chosen when they were triggered; one at a time, in that order, the last word is the pick."""
    wired = events_running({serving_runs.show_measured, serving_runs.relabel})
    assert queues(wired) == one_queue(serving_runs.ONE_QUEUE)
