"""An OpenAI-compatible server: ``python -m engine.serve``.

    python -m engine.serve --model bundled --port 8000              # the overlap loop
    python -m engine.serve --loop normal --port 8001                # the serial baseline
    curl localhost:8000/v1/completions -H 'content-type: application/json' \
         -d '{"model": "bundled", "prompt": "Once upon a time", "max_tokens": 32}'

The session's timeline is at ``/v1/timeline/record`` and ``/v1/timeline/trace``."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from engine.config import EngineConfig, LoopSpec
from record.schema import ENGINE_LOOPS, Loop


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine.serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="bundled",
                   help="'bundled', a preset, a local HF directory or a hub id")
    p.add_argument("--served-model-name", default=None,
                   help="the name clients send as 'model' (default: --model)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--loop", choices=ENGINE_LOOPS, default=Loop.OVERLAP)
    p.add_argument("--decode-steps", type=int, default=3, metavar="K",
                   help="k of --loop multistep")
    p.add_argument("--extra-cpu-us", type=int, default=0,
                   help="extra real scheduler CPU work per step (a heavier scheduler)")
    p.add_argument("--max-batch-size", type=int, default=16)
    p.add_argument("--max-seq-len", type=int, default=512, help="prompt + completion tokens")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--cuda-graph", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chat-template", default=None, metavar="plain|FILE",
                   help="for a model without one: 'plain' (Role: text lines) or a Jinja file")
    p.add_argument("--prefix-cache", choices=["on", "off"], default="on",
                   help="keep finished prompts' KV pages for later requests that share them")
    p.add_argument("--max-active", type=int, default=256,
                   help="requests in progress at most (more get 503)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0: any free port (printed)")
    return p.parse_args(argv)


def _chat_template(value: str | None) -> str | None:
    from engine.models.prompts import PLAIN_CHAT_TEMPLATE

    if value is None:
        return None
    if value == "plain":
        return PLAIN_CHAT_TEMPLATE
    path = Path(value)
    if not path.is_file() or path.stat().st_size > 1 << 20:
        raise ValueError(f"--chat-template {value}: not 'plain' and not a readable file of at "
                         "most 1 MiB")
    return path.read_text()


def _bind(host: str, port: int) -> socket.socket:
    try:
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host
                                    else socket.AF_INET, reuse_port=False)
    except (OSError, OverflowError) as error:
        raise ValueError(f"cannot listen on {host}:{port}: "
                         f"{getattr(error, 'strerror', None) or error}") from None
    sock.set_inheritable(True)
    return sock


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        if not 1 <= a.max_active <= 100_000:
            raise ValueError("--max-active must be in 1..100000")
        if not 0 <= a.port <= 65535:
            raise ValueError(f"--port must be in 0..65535 (0: any free port), got {a.port}")
        config = EngineConfig(model=a.model, device=a.device, max_batch_size=a.max_batch_size,
                              max_seq_len=a.max_seq_len, dtype=a.dtype, seed=a.seed,
                              cuda_graph=a.cuda_graph, prefix_cache=a.prefix_cache == "on")
        loop = LoopSpec(Loop(a.loop), a.decode_steps if a.loop == Loop.MULTISTEP else 1,
                        a.extra_cpu_us)
        template = _chat_template(a.chat_template)
        sock = _bind(a.host, a.port)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return _serve(a, config, loop, template, sock)


def _serve(a: argparse.Namespace, config: EngineConfig, loop: LoopSpec, template: str | None,
           sock: socket.socket) -> int:
    import uvicorn

    from engine.scheduler_process.process import pin_server, plan_placement
    from engine.serve.http_app import build_app
    from engine.serve.session_client import ServingClient, SessionUnavailable

    placement = plan_placement()
    pin_server(placement)
    client = ServingClient(config, loop, placement)
    try:
        print(f"loading {a.model} ({loop.label} loop) ...", flush=True)
        started = client.start()
        tokenizer = _tokenizer(started.tokenizer_path)
        name = a.served_model_name or a.model
        app = build_app(client, started, tokenizer, name, template, a.max_active)
        host, port = sock.getsockname()[:2]
        print(f"serving {name} on http://{host}:{port} ({loop.label} loop, {started.device}; "
              f"{placement.describe()})", flush=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off",
                                               timeout_graceful_shutdown=5))
        server.run(sockets=[sock])
        return 0
    except SessionUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        client.close(timeout_s=10)
        sock.close()


def _tokenizer(path: str | None):
    if path is None:
        return None
    from transformers import AutoTokenizer

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return AutoTokenizer.from_pretrained(path)


if __name__ == "__main__":
    sys.exit(main())
