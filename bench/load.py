"""Latency against request rate through the OpenAI-compatible server, streaming HTTP clients.

    python -m bench load --rates 2 4 8 --requests 32 --max-tokens 64

For each loop a server starts on 127.0.0.1; at each rate one seeded Poisson sequence sends
``--requests`` streaming completions of exactly ``--max-tokens`` tokens. Measured at the client:
TTFT, ITL, output tokens/s; GPU busy from the server's own timeline."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from engine.scheduler.arrivals import check_rate, poisson_times
from record.latency_rows import format_table, row_from_metrics, summarize
from record.metrics import busy_while_active, latency_summary
from record.schema import ENGINE_LOOPS, Loop

ROOT = Path(__file__).resolve().parent.parent
MAX_REQUESTS = 1000
HOST = "127.0.0.1"               # loopback only


def start_server(loop: str, flags: list[str], timeout_s: float = 300.0) -> tuple[subprocess.Popen,
                                                                                  str]:
    """``python -m engine.serve`` on 127.0.0.1, any free port; (process, base URL)."""
    proc = subprocess.Popen([sys.executable, "-m", "engine.serve", "--host", HOST, "--port", "0",
                             "--loop", loop, *flags], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline, seen = time.monotonic() + timeout_s, []
    assert proc.stdout is not None                       # stdout=PIPE
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("serving "):
            print(f"  {line.strip()}", flush=True)
            return proc, line.split(" on ", 1)[1].split()[0]
    stop_server(proc)
    raise RuntimeError("the server did not start:\n" + "".join(seen[-20:]))


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def one_request(client: httpx.AsyncClient, url: str, body: dict, at_s: float,
                      start: float) -> dict:
    """Send at ``start + at_s``; the output dict ``latency_summary`` reads (µs from ``start``)."""
    await asyncio.sleep(max(0.0, start + at_s - time.perf_counter()))
    sent = time.perf_counter()
    chunks: list[float] = []
    tokens, reason = 0, ""
    async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
        if response.status_code != 200:
            said = (await response.aread())[:300].decode(errors="replace")
            raise RuntimeError(f"HTTP {response.status_code}: {said}")
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            now = time.perf_counter()
            if "error" in chunk:
                raise RuntimeError(chunk["error"]["message"])
            for choice in chunk.get("choices", []):
                if choice.get("text"):
                    chunks.append(now)
                reason = choice.get("finish_reason") or reason
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]

    def us(t: float) -> float:
        return (t - start) * 1e6

    return {"token_ids": [0] * tokens, "finish_reason": reason or "length",
            "arrival_us": us(sent), "first_token_us": us(chunks[0]) if chunks else us(sent),
            "finish_us": us(chunks[-1]) if chunks else us(sent), "token_us": [us(t) for t in chunks]}


async def run_rate(url: str, model: str, times: list[float], max_tokens: int, prompt: str,
                   timeout_s: float) -> list[dict]:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    limits = httpx.Limits(max_connections=len(times) + 4, max_keepalive_connections=len(times))
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:
        start = time.perf_counter()
        tasks = [one_request(client, url, body, at, start) for at in times]
        return await asyncio.wait_for(asyncio.gather(*tasks), timeout_s)


def server_busy(url: str, n: int) -> float | None:
    """GPU busy on the server's timeline while its last ``n`` finished requests were in the
    system (time with no request at all, at a low rate, is not GPU idleness)."""
    record = httpx.get(f"{url}/v1/timeline/record", timeout=120).json()
    run = record["runs"][0]
    outs = [o for o in run["outputs"] if o["finish_reason"] in ("stop", "length")][-n:]
    if len(outs) < n:
        return None
    return busy_while_active(run["spans"], run["gpu_lanes"], outs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench load", description=__doc__.splitlines()[0])
    p.add_argument("--rates", nargs="+", type=float, default=[2.0, 4.0, 8.0])
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompt", default="Once upon a time, in a small village by the sea, there "
                                       "lived an old baker who")
    p.add_argument("--loops", nargs="+", default=[Loop.NORMAL, Loop.OVERLAP],
                   choices=ENGINE_LOOPS)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=600.0, help="per rate, at most")
    p.add_argument("--model", default="bundled")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    p.add_argument("--max-batch-size", type=int, default=16)
    p.add_argument("--extra-cpu-us", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="write the rows (viz.latency draws them)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        rates = [check_rate(r, "--rates") for r in a.rates]
        if not 1 <= a.requests <= MAX_REQUESTS or not 1 <= a.repeats <= 20:
            raise ValueError(f"--requests must be in 1..{MAX_REQUESTS}, --repeats in 1..20")
        if not 1 <= a.timeout_s <= 3600:
            raise ValueError("--timeout-s must be in 1..3600")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    flags = ["--model", a.model, "--device", a.device, "--max-batch-size", str(a.max_batch_size),
             "--extra-cpu-us", str(a.extra_cpu_us),
             "--max-seq-len", str(max(128, a.max_tokens + 4 * len(a.prompt.split()) + 32))]
    rows = []
    for repeat in range(a.repeats):
        loops = a.loops if repeat % 2 == 0 else a.loops[::-1]
        for loop in loops:
            rows += _one_server(a, loop, flags, rates, repeat)
    summary = summarize(rows)
    print()
    print(format_table(summary))
    if a.json:
        Path(a.json).write_text(json.dumps({"kind": "latency_vs_rate", "source": "bench.load",
                                            "args": vars(a), "rows": rows}, indent=1))
        print(f"wrote {a.json}")
    return 0


def _one_server(a: argparse.Namespace, loop: str, flags: list[str], rates: list[float],
                repeat: int) -> list[dict]:
    proc, url = start_server(loop, flags)
    rows = []
    try:
        asyncio.run(run_rate(url, a.model, [0.0], 8, a.prompt, a.timeout_s))     # warm-up
        for rate in rates:
            times = poisson_times(rate, a.requests, a.seed)
            outputs = asyncio.run(run_rate(url, a.model, times, a.max_tokens, a.prompt,
                                           a.timeout_s))
            wall_us = max(o["finish_us"] for o in outputs) - min(o["arrival_us"] for o in outputs)
            metrics: dict[str, Any] = dict(latency_summary(outputs, wall_us))
            metrics["tokens_per_s"] = sum(len(o["token_ids"]) for o in outputs) / (wall_us / 1e6)
            metrics["gpu_busy_frac"] = server_busy(url, len(outputs))
            rows.append({**row_from_metrics(loop, None if math.isinf(rate) else rate,
                                            len(outputs), metrics), "repeat": repeat})
            print(f"  {loop} at {rate:g} req/s: TTFT p50 {metrics['ttft_ms_p50']:.1f} ms, "
                  f"ITL p50 {metrics['itl_ms_p50']:.2f} ms", flush=True)
    finally:
        stop_server(proc)
    return rows


if __name__ == "__main__":
    sys.exit(main())
