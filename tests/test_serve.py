"""The OpenAI-compatible server, driven by clients nobody here wrote: the ``openai`` package
(completions and chat, streaming and not) and plain HTTP (httpx).

One server process (overlap loop, bundled model, float64 so that batching never flips a greedy
near-tie) serves the whole module; it listens on 127.0.0.1 on a free port. Bad requests get
OpenAI's error body and leave it serving with its pools whole; a client that leaves mid-stream
has its request aborted; a killed scheduler process costs the requests in flight, not the server.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from bench import load

openai = pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ["Once upon a time", "The license grants", "This module provides functions for"]


def start_server(*flags: str, timeout_s: float = 240.0) -> tuple[subprocess.Popen, str]:
    """``python -m engine.serve`` on CPU, on 127.0.0.1, any free port, through the load test's
    launcher (a later ``--loop`` in ``flags`` wins); (process, base URL)."""
    proc, url = load.start_server("overlap", ["--device", "cpu", *flags], timeout_s)
    assert url.startswith("http://127.0.0.1:")
    return proc, url


stop_server = load.stop_server


@pytest.fixture(scope="module")
def server():
    # No --chat-template: chat goes through the template the bundled model ships. The prefix
    # cache is off so that /health's pools must be exactly whole after each test (its pages
    # are not in /health's counts: the default server's chat is tested on its own below).
    proc, url = start_server("--max-batch-size", "4", "--max-seq-len", "128",
                             "--dtype", "float64", "--prefix-cache", "off")
    yield url
    stop_server(proc)


@pytest.fixture()
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=120)


def health(url: str) -> dict:
    return httpx.get(f"{url}/health", timeout=60).json()


def wait_idle(url: str, timeout_s: float = 300.0) -> dict:
    """/health once nothing is in progress (``timeout_s``: a hang guard); the pools must then
    be whole."""
    deadline = time.monotonic() + timeout_s
    while True:
        h = health(url)
        if h["active"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert h["active"] == 0
    cached = h.get("kv_pages_cached", 0)           # pages only the prefix cache keeps
    assert h["kv_pages_free"] + cached == h["kv_pages_total"], h
    assert h["req_slots_free"] == h["req_slots_total"], h
    return h


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == ["bundled"]
    h = wait_idle(server)
    assert h["status"] == "ok" and h["loop"] == "overlap"


def test_completion_equals_the_engine_and_streams_the_same_text(server, client):
    from engine import Engine, EngineConfig, SamplingParams

    with Engine(EngineConfig(model="bundled", device="cpu", dtype="float64", max_batch_size=4,
                             max_seq_len=128)) as eng:
        ref = eng.generate(PROMPTS, SamplingParams(max_new_tokens=20, ignore_eos=True))
    for prompt, want in zip(PROMPTS, ref.outputs):
        done = client.completions.create(model="bundled", prompt=prompt, max_tokens=20,
                                         temperature=0, extra_body={"ignore_eos": True})
        assert done.choices[0].text == want.text
        assert done.choices[0].finish_reason == "length"
        assert done.usage.completion_tokens == 20 and done.usage.prompt_tokens == want.prompt_tokens
        chunks = list(client.completions.create(
            model="bundled", prompt=prompt, max_tokens=20, temperature=0, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
        assert "".join(c.choices[0].text for c in chunks if c.choices) == want.text
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
        assert chunks[-1].usage.completion_tokens == 20
    wait_idle(server)


def test_chat_streaming_and_not(client):
    messages = [{"role": "system", "content": "You write code."},
                {"role": "user", "content": "Write a function"}]
    done = client.chat.completions.create(model="bundled", messages=messages, max_tokens=12,
                                          temperature=0)
    message = done.choices[0].message
    assert message.role == "assistant" and message.content
    stream = client.chat.completions.create(model="bundled", messages=messages, max_tokens=12,
                                            temperature=0, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == message.content
    # The bundled model's own template: "<BOS>System: ...\nUser: ...\nAssistant:".
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ROOT / "assets" / "bundled")
    expected = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert expected == "<|endoftext|>System: You write code.\nUser: Write a function\nAssistant:"
    assert done.usage.prompt_tokens == len(tokenizer.encode(expected, add_special_tokens=False))


def test_a_streamed_chat_on_the_default_server_returns_content():
    """``python -m engine.serve`` with its defaults (here on CPU, on a free port): the openai
    client's streamed chat completion, as any chat UI sends it, gets a reply."""
    proc, url = start_server()
    try:
        chat = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        stream = chat.chat.completions.create(
            model="bundled", messages=[{"role": "user", "content": "Tell me a story"}],
            max_tokens=16, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text.strip(), text
    finally:
        stop_server(proc)


def test_the_bundled_models_chat_template_is_the_plain_one():
    """One definition: the template shipped with the bundled model is ``--chat-template plain``."""
    from engine.models.prompts import PLAIN_CHAT_TEMPLATE

    config = json.loads((ROOT / "assets" / "bundled" / "tokenizer_config.json").read_text())
    assert config["chat_template"] == PLAIN_CHAT_TEMPLATE


def test_the_readme_server_snippet_pasted_whole_prints_a_completion_and_a_chat_reply():
    """The README's block, run as one paste (on a free port instead of 8000): the server starts
    in the background, the block waits for /health, then both answers are printed."""
    import re
    import socket

    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S)
                 if "engine.serve --port 8000 &" in b)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = "trap 'kill $! 2>/dev/null; wait' EXIT\n" + block.replace(":8000", f":{port}") \
        .replace("--port 8000", f"--port {port}")
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [a["object"] for a in answers] == ["text_completion", "chat.completion"], done.stdout
    assert answers[0]["choices"][0]["text"] and answers[0]["usage"]["completion_tokens"] == 24
    assert answers[1]["choices"][0]["message"]["content"], answers[1]


def test_concurrent_streams_get_their_own_tokens(server, client):
    """Eight clients at once (four slots: some wait), each gets what it gets alone."""
    def alone(prompt: str) -> str:
        return client.completions.create(model="bundled", prompt=prompt, max_tokens=16,
                                         temperature=0).choices[0].text

    def streamed(prompt: str) -> str:
        return "".join(c.choices[0].text for c in client.completions.create(
            model="bundled", prompt=prompt, max_tokens=16, temperature=0, stream=True))

    prompts = [f"{p} number {i}" for i, p in enumerate(PROMPTS * 3)][:8]
    want = [alone(p) for p in prompts[:3]]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(streamed, prompts))
    assert got[:3] == want
    wait_idle(server)


def test_stop_strings_cut_the_text(server, client):
    full = client.completions.create(model="bundled", prompt=PROMPTS[0], max_tokens=24,
                                     temperature=0, extra_body={"ignore_eos": True})
    text = full.choices[0].text
    stop = text[len(text) // 2: len(text) // 2 + 3]
    assert stop.strip(), text
    cut = client.completions.create(model="bundled", prompt=PROMPTS[0], max_tokens=24,
                                    temperature=0, stop=[stop], extra_body={"ignore_eos": True})
    assert cut.choices[0].text == text[:text.find(stop)]
    assert cut.choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="bundled", prompt=PROMPTS[0], max_tokens=24, temperature=0, stop=stop,
        stream=True, extra_body={"ignore_eos": True}))
    assert streamed == cut.choices[0].text
    wait_idle(server)


@pytest.mark.parametrize("body, status, param", [
    ({"model": "nope", "prompt": "a"}, 404, "model"),
    ({"model": "bundled", "prompt": "a", "max_tokens": -3}, 400, "max_tokens"),
    ({"model": "bundled", "prompt": "word " * 300}, 400, "prompt"),
    ({"model": "bundled", "prompt": "a", "max_tokens": 127}, 400, "max_tokens"),
    ({"model": "bundled", "prompt": "a", "n": 2}, 400, "n"),
    ({"model": "bundled", "prompt": "a", "temperature": "hot"}, 400, "temperature"),
    ({"model": "bundled", "prompt": ""}, 400, "prompt"),
    ({"model": "bundled", "prompt": [1, 99999]}, 400, "prompt"),
    ({"model": "bundled", "prompt": "a", "frobnicate": 1}, 400, "frobnicate"),
    ({"prompt": "a"}, 400, "model"),
])
def test_bad_completions_get_openai_errors(server, body, status, param):
    r = httpx.post(f"{server}/v1/completions", json=body, timeout=60)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"] and error["type"]


def test_bad_requests_through_the_openai_client(server, client):
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="gpt-4", prompt="a")
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="bundled", prompt="word " * 300, max_tokens=4)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="bundled", messages=[{"role": "wizard",
                                                                   "content": "hi"}])
    for raw in (b"{not json", b"[1, 2", b"", b"\xff\xfe"):
        r = httpx.post(f"{server}/v1/chat/completions", content=raw,
                       headers={"content-type": "application/json"}, timeout=60)
        assert r.status_code == 400 and "parse the JSON" in r.json()["error"]["message"]
    r = httpx.get(f"{server}/v1/nothing-here", timeout=60)
    assert r.status_code == 404 and "error" in r.json()
    wait_idle(server)


def test_a_client_that_leaves_mid_stream_is_aborted(server):
    before = health(server)["served"]
    body = {"model": "bundled", "prompt": PROMPTS[1], "max_tokens": 100, "temperature": 0,
            "stream": True, "ignore_eos": True}
    for _ in range(3):
        with httpx.stream("POST", f"{server}/v1/completions", json=body, timeout=60) as r:
            lines = r.iter_lines()
            got = [next(lines) for _ in range(6)]           # a few tokens, then hang up
        assert any(line.startswith("data: {") for line in got)
    h = wait_idle(server)
    assert h["served"] == before + 3                       # ended (aborted), not still running
    record = httpx.get(f"{server}/v1/timeline/record", timeout=60).json()
    aborted = [o for o in record["runs"][0]["outputs"] if o["finish_reason"] == "abort"]
    assert len(aborted) >= 3 and all(len(o["token_ids"]) < 100 for o in aborted)
    ok = httpx.post(f"{server}/v1/completions", json={**body, "stream": False, "max_tokens": 4},
                    timeout=60)
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 4


def test_timeline_record_and_trace(server):
    from dataclasses import fields

    from record.run_record import config_of, validate_record
    from record.schema import RunConfig

    record = validate_record(httpx.get(f"{server}/v1/timeline/record", timeout=60).json())
    run = record["runs"][0]
    assert run["loop"] == "overlap" and record["config"]["served"] is True
    # The session's config is a RunConfig as every record of ours holds, from the same code.
    config = config_of(record)
    assert config is not None and set(record["config"]) == {f.name for f in fields(RunConfig)}
    assert (config.max_batch_size, config.requests, run["extra_cpu_us"]) == (4, None, 0)
    lanes = {s["lane"] for s in run["spans"]}
    assert {"cpu", "engine_stream", "scheduler_stream"} <= lanes
    done = [o for o in run["outputs"] if o["finish_reason"] in ("stop", "length")]
    assert done and run["metrics"]["completed_requests"] == len(done)
    assert run["metrics"]["ttft_ms_p50"] > 0 and run["metrics"]["itl_ms_p50"] > 0
    # Busy counted while requests were in the system: the time between clients is not idle GPU.
    assert run["metrics"]["active_busy_frac"] >= run["metrics"]["gpu_busy_frac"]
    trace = httpx.get(f"{server}/v1/timeline/trace", timeout=60).json()
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])


def test_killed_scheduler_costs_requests_not_the_server(server, client):
    """A killed scheduler process is replaced without a request asking for it; meanwhile /health
    answers (503, "restarting") instead of waiting for the new one."""
    pid = health(server)["scheduler_pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 300                      # a hang guard
    while True:                                            # a new session starts by itself
        r = httpx.get(f"{server}/health", timeout=60)
        h = r.json()
        if h["status"] == "ok":
            break
        assert r.status_code == 503 and h["status"] in ("restarting", "unavailable"), h
        assert time.monotonic() < deadline, "no new session within 300 s"
        time.sleep(0.2)
    assert h["scheduler_pid"] != pid
    text = client.completions.create(model="bundled", prompt=PROMPTS[0], max_tokens=5,
                                     temperature=0).choices[0].text
    assert text
    wait_idle(server)


def test_a_session_whose_process_died_is_replaced_without_being_asked():
    """Noticed within seconds and restarted: nothing calls the client after the kill."""
    from engine.config import EngineConfig
    from engine.serve.session_client import ServingClient

    serving = ServingClient(EngineConfig(model="bundled", device="cpu", max_batch_size=2,
                                         max_seq_len=64, prefix_cache=False))
    try:
        serving.start()
        pid = serving.process.pid
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 300                  # a hang guard
        while serving.sessions < 2 or serving.restarting:
            assert time.monotonic() < deadline, "the session was not replaced within 300 s"
            time.sleep(0.1)
        assert serving.process.pid != pid and serving.process.alive and serving.alive
    finally:
        serving.close()


def test_normal_loop_server_gives_the_same_tokens(client):
    proc, url = start_server("--loop", "normal", "--max-batch-size", "4", "--max-seq-len", "128",
                             "--dtype", "float64")
    try:
        normal = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0,
                               timeout=120)
        assert health(url)["loop"] == "normal"
        for prompt in PROMPTS:
            args = dict(model="bundled", prompt=prompt, max_tokens=16, temperature=0)
            assert normal.completions.create(**args).choices[0].text == \
                client.completions.create(**args).choices[0].text
        record = httpx.get(f"{url}/v1/timeline/record", timeout=60).json()
        assert record["runs"][0]["loop"] == "normal"
        json.dumps(record)
    finally:
        stop_server(proc)
