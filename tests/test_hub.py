"""Hub checkpoints through the real download path, offline: a temporary hub cache holds a tiny
random Llama saved by transformers (with the bundled tokenizer and a chat template), and
``HF_HUB_OFFLINE=1`` keeps ``snapshot_download`` off the network.

- the engine runs it by hub id; text prompts and chats give transformers' greedy tokens;
- the guards refuse other architectures, custom code, pickled weights and oversized weights,
  and a model that is not cached gets a message that says the machine is offline;
- the CLI and the OpenAI server take the hub id too (their processes inherit the environment).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hub_cache import CHAT_TEMPLATE, add_to_cache, save_tiny_llama

from engine import Engine, EngineConfig, SamplingParams
from engine.models.hub import HubProgress, fetch_hub_model
from engine.models.loader import BUNDLED_DIR, ModelLoadError

ROOT = Path(__file__).resolve().parent.parent
REPO = "overlap-demo/tiny-llama-chat"
TEXTS = ["Once upon a time", "The license grants", "If the file does not exist,",
         "This module provides", "The server waits for"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A hub cache with REPO and some checkpoints the guards must refuse; the environment is
    set for the whole module (the engine's processes inherit it)."""
    base = tmp_path_factory.mktemp("hub")
    cache = base / "cache"
    model_dir = base / "tiny"
    files = save_tiny_llama(model_dir, BUNDLED_DIR, CHAT_TEMPLATE)
    add_to_cache(cache, REPO, files)
    gpt2 = json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}).encode()
    add_to_cache(cache, "overlap-demo/gpt2", {**files, "config.json": gpt2})
    remote = json.loads((model_dir / "config.json").read_text())
    remote["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    add_to_cache(cache, "overlap-demo/remote-code", {**files,
                                                      "config.json": json.dumps(remote).encode()})
    pickled = {k: v for k, v in files.items() if not k.endswith(".safetensors")}
    add_to_cache(cache, "overlap-demo/pickled", {**pickled, "pytorch_model.bin": b"not loaded"})
    add_to_cache(cache, "overlap-demo/config-only", pickled)      # weights never fetched
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield {"cache": cache, "dir": model_dir, "env": env}
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_fetch_returns_the_cached_snapshot_and_reports_progress(hub):
    seen: list[HubProgress] = []
    folder = fetch_hub_model(REPO, seen.append)
    assert folder.parent.name == "snapshots" and str(folder).startswith(str(hub["cache"]))
    assert (folder / "model.safetensors").stat().st_size == \
        (hub["dir"] / "model.safetensors").stat().st_size
    assert [p.stage for p in seen] == ["checking", "ready"]
    assert seen[-1].total_bytes == (hub["dir"] / "model.safetensors").stat().st_size


@pytest.mark.usefixtures("hub")
def test_cached_snapshot_says_what_is_ready():
    from engine.models.hub import cached_snapshot

    assert cached_snapshot(REPO) == fetch_hub_model(REPO)
    assert cached_snapshot("overlap-demo/config-only") is None        # no weights
    assert cached_snapshot("overlap-demo/not-cached") is None
    assert cached_snapshot("not an id!") is None


@pytest.mark.usefixtures("hub")
def test_engine_by_hub_id_matches_transformers_on_text_and_chat():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = fetch_hub_model(REPO)
    tok = AutoTokenizer.from_pretrained(folder)
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    chats = [[{"role": "user", "content": t}] for t in TEXTS[:2]]
    with Engine(EngineConfig(model=REPO, device="cpu", dtype="float32", max_seq_len=96)) as eng:
        assert eng.model_path == str(folder)
        text = eng.generate(TEXTS, SamplingParams(max_new_tokens=16, ignore_eos=True))
        chat = eng.generate(chats, SamplingParams(max_new_tokens=16, ignore_eos=True), chat=True)
    refs = [tok(t, return_tensors="pt") for t in TEXTS]
    refs += [tok.apply_chat_template(c, add_generation_prompt=True, return_tensors="pt",
                                     return_dict=True) for c in chats]
    for enc, out in zip(refs, text.outputs + chat.outputs):
        want = hf.generate(**enc, max_new_tokens=16, min_new_tokens=16, do_sample=False)
        assert out.token_ids == want[0, enc["input_ids"].shape[1]:].tolist()
    assert chat.outputs[0].prompt_tokens > text.outputs[0].prompt_tokens   # the template's turns


@pytest.mark.parametrize("repo, words", [
    ("overlap-demo/gpt2", "GPT2LMHeadModel; hub models must be one of"),
    ("overlap-demo/remote-code", "custom code"),
    ("overlap-demo/pickled", "no safetensors weights"),
    ("overlap-demo/not-cached", "offline (HF_HUB_OFFLINE=1)"),
    ("overlap-demo/config-only", "weights of overlap-demo/config-only are not in the local"),
    ("not a repo id!", "not a local directory"),
])
@pytest.mark.usefixtures("hub")
def test_guards_refuse_with_the_reason(repo, words):
    with pytest.raises(ModelLoadError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Engine(EngineConfig(model=repo, device="cpu"))


@pytest.mark.usefixtures("hub")
def test_size_cap(monkeypatch):
    monkeypatch.setenv("OVERLAP_DEMO_HUB_MAX_BYTES", "1000")
    with pytest.raises(ModelLoadError, match="the limit is"):
        Engine(EngineConfig(model=REPO, device="cpu"))


def test_cli_and_server_take_a_hub_id(hub):
    env = {**os.environ, **hub["env"]}
    cli = subprocess.run([sys.executable, "-m", "engine", "--device", "cpu", "--model", REPO,
                          "--mode", "both", "--requests", "2", "--max-new-tokens", "4",
                          "--show-text", "0"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert f"model: {REPO}" in cli.stdout

    import openai
    from test_serve import start_server, stop_server

    proc, url = start_server("--model", REPO, "--max-seq-len", "96")
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        reply = client.chat.completions.create(model=REPO, messages=[
            {"role": "user", "content": TEXTS[0]}], max_tokens=6, temperature=0)
        assert reply.usage.completion_tokens <= 6
        assert reply.usage.prompt_tokens == len(_template_ids(hub["dir"], TEXTS[0]))
    finally:
        stop_server(proc)


def _template_ids(folder: Path, text: str) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    return tok.apply_chat_template([{"role": "user", "content": text}],
                                   add_generation_prompt=True, return_dict=True)["input_ids"]


@pytest.mark.usefixtures("hub")
def test_service_reports_the_fetch_as_progress_events():
    from engine.scheduler_process.messages import Progress
    from engine.scheduler_process.service import SchedulerService

    events: list = []
    service = SchedulerService()
    try:
        service._engine(EngineConfig(model=REPO, device="cpu", max_seq_len=64), service.engines,
                        events.append)
    finally:
        service.close()
    words = [e.detail for e in events if isinstance(e, Progress) and e.stage == "download"]
    assert words[0] == f"checking {REPO} on the hub"
    assert words[-1].startswith(f"{REPO}: ") and words[-1].endswith("MiB of weights ready")


def test_progress_bar_class_forwards_bytes():
    """The tqdm class handed to snapshot_download turns its byte updates into HubProgress."""
    from engine.models.hub import _bar_class

    seen: list[HubProgress] = []
    bar_class = _bar_class("org/model", 300, seen.append)
    bytes_bar = bar_class(desc="Reconstructing (incomplete total...)", unit="B", total=0)
    files_bar = bar_class(desc="Fetching 2 files", total=2)
    for n in (100, 150):
        bytes_bar.update(n)
    files_bar.update(1)
    assert [(p.stage, p.done_bytes, p.total_bytes) for p in seen] == [
        ("downloading", 100, 300), ("downloading", 250, 300)]
    assert seen[-1].describe().startswith("downloading org/model: ")


@pytest.mark.parametrize("name, ok", [
    ("Qwen/Qwen2.5-0.5B-Instruct", True), ("HuggingFaceTB/SmolLM2-135M-Instruct", True),
    ("Qwen/Qwen3-0.6B", True), ("../etc", False), ("a/b/c", False), ("model.json", False),
    ("org/..", False), ("/abs/path", False), ("org/na me", False), ("", False), ("tests/data", False),
])
def test_hub_ids_are_told_from_paths(name, ok):
    from engine.models.hub import is_hub_id

    assert is_hub_id(name) == ok                   # "tests/data" exists here: a path, not an id


def test_a_dotted_hub_id_goes_to_the_hub_and_offline_says_so(tmp_path, monkeypatch):
    """"Qwen2.5" has dots: it is still a hub id (it was once refused as a file name)."""
    from engine.models.loader import ModelLoadError, resolve_model_dir

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="not in the local hub cache.*offline"):
        resolve_model_dir("Qwen/Qwen2.5-0.5B-Instruct")
