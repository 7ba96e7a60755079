"""The OpenAI-compatible HTTP API (FastAPI): tokenize, forward, stream. No engine runs here.

    GET  /health                   the session's counts and pools (503 while it is down)
    GET  /v1/models                the one model served
    POST /v1/completions           text or token-id prompts; streaming (SSE) or not
    POST /v1/chat/completions      messages through the tokenizer's chat template
    GET  /v1/timeline/record       the session so far as a run record
    GET  /v1/timeline/trace        ... as a Chrome / Perfetto trace
A client that goes away has its requests aborted. Every error is OpenAI's body."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.models.prompts import TextStream
from engine.scheduler_process.messages import Rejected, ServingStarted, TokenDelta
from engine.serve.openai_api import (
    ApiError,
    Job,
    Limits,
    StopText,
    chunk_body,
    error_body,
    new_id,
    parse_job,
    response_body,
    usage,
    usage_chunk,
)
from engine.serve.session_client import ServingClient, SessionLost, SessionUnavailable

MAX_BODY_BYTES = 4 * 2**20


@dataclass
class _Choice:
    rid: int
    text: TextStream
    stop: StopText
    tokens: int = 0
    reason: str | None = None          # set once the choice has ended


def build_app(client: ServingClient, started: ServingStarted, tokenizer: Any, served_name: str,
              chat_template: str | None = None, max_active: int = 256) -> FastAPI:
    app = FastAPI(title="overlap-demo OpenAI-compatible server", docs_url=None, redoc_url=None)
    limits = Limits(served_name, started.max_seq_len, started.vocab_size)
    active = {"choices": 0}

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(error.detail)), status_code=error.status_code)

    @app.exception_handler(Exception)
    async def _any_error(_: Request, error: Exception) -> JSONResponse:
        return JSONResponse(error_body(f"internal error: {type(error).__name__}: {error}",
                                       "server_error"), status_code=500)

    @app.get("/health")
    async def health() -> JSONResponse:
        stats = await asyncio.to_thread(client.stats, 10.0)
        if stats is None:
            # Restarting: the scheduler process died and a new session is starting (seconds
            # for the bundled model, longer for a large one); retry.
            status = "restarting" if client.restarting else "unavailable"
            return JSONResponse({"status": status}, status_code=503)
        return JSONResponse({"status": "ok", "model": served_name, "loop": client.request.loop.loop,
                             "device": started.device, "sessions": client.sessions,
                             "scheduler_pid": client.process.pid,
                             **{k: v for k, v in stats.__dict__.items() if k != "token"}})

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{
            "id": served_name, "object": "model", "created": 0, "owned_by": "overlap-demo",
            "root": started.model, "max_model_len": started.max_seq_len}]}

    @app.get("/v1/timeline/record")
    async def timeline_record() -> JSONResponse:
        return JSONResponse(await asyncio.to_thread(_record, client, tokenizer))

    @app.get("/v1/timeline/trace")
    async def timeline_trace() -> JSONResponse:
        from record.chrome_trace import to_chrome_trace

        record = await asyncio.to_thread(_record, client, tokenizer)
        return JSONResponse(to_chrome_trace(record["runs"][0]))

    async def generate(request: Request, chat: bool) -> Any:
        body = await _read_json(request)
        job = await asyncio.to_thread(parse_job, body, chat, limits, tokenizer, chat_template)
        if active["choices"] + len(job.prompts) > max_active:
            raise ApiError(f"the server is at its limit of {max_active} requests in progress; "
                           "retry later", status=503, kind="server_error")
        queue: asyncio.Queue = asyncio.Queue()
        choices = await _submit(client, job, tokenizer, queue, asyncio.get_running_loop())
        active["choices"] += len(choices)
        if job.stream:
            return StreamingResponse(_stream(client, job, choices, queue, active),
                                     media_type="text/event-stream")
        try:
            await _collect(client, job, choices, queue, stream=None)
        finally:
            _release(client, choices, active)
        texts = [c.stop.text for c in choices]
        return response_body(job, new_id(chat), texts, [c.reason or "stop" for c in choices],
                             usage(sum(len(p) for p in job.prompts), sum(c.tokens for c in choices)))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await generate(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await generate(request, chat=True)

    return app


async def _read_json(request: Request) -> Any:
    """The body as JSON, read at most ``MAX_BODY_BYTES`` of it."""
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise ApiError(f"the request body is larger than {MAX_BODY_BYTES // 2**20} MiB",
                           status=413)
    try:
        return json.loads(bytes(data))
    except (ValueError, RecursionError):
        raise ApiError("We could not parse the JSON body of your request. (HINT: This likely "
                       "means you aren't using your HTTP library correctly.)") from None


async def _submit(client: ServingClient, job: Job, tokenizer: Any, queue: asyncio.Queue,
                  loop: asyncio.AbstractEventLoop) -> list[_Choice]:
    def handler(index: int):
        def put(event: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, (index, event))
            except RuntimeError:
                pass                            # the event loop is gone (shutting down)
        return put

    choices = []
    try:
        for i, ids in enumerate(job.prompts):
            rid = await asyncio.to_thread(client.submit, ids, job.params, handler(i))
            choices.append(_Choice(rid, TextStream(tokenizer), StopText(job.stops)))
    except SessionUnavailable as error:
        for choice in choices:
            client.abort(choice.rid)
        raise ApiError(f"the engine is not available: {error}", status=503,
                       kind="server_error") from None
    return choices


async def _collect(client: ServingClient, job: Job, choices: list[_Choice], queue: asyncio.Queue,
                   stream: list[dict[str, Any]] | None) -> None:
    """Read events until the next chunks are ready (``stream`` gets them) or, without
    ``stream``, until every choice has ended."""
    while any(c.reason is None for c in choices):
        index, event = await queue.get()
        choice = choices[index]
        if choice.reason is not None:
            continue                            # stopped on a stop string: the rest is late
        if isinstance(event, (Rejected, SessionLost)):
            for other in choices:
                if other.reason is None:
                    client.abort(other.rid)
                    other.reason = "error"
            status = 400 if isinstance(event, Rejected) else 503
            raise ApiError(event.message, status=status,
                           kind="invalid_request_error" if status == 400 else "server_error")
        assert isinstance(event, TokenDelta)
        choice.tokens += len(event.token_ids)
        final = bool(event.finish_reason)
        text = choice.stop.feed(choice.text.add(event.token_ids, final=final), final=final)
        if choice.stop.stopped:
            client.abort(choice.rid)
            choice.reason = "stop"
        elif final:
            choice.reason = "length" if event.finish_reason == "length" else "stop"
        if stream is not None and (text or choice.reason):
            stream.append(chunk_body(job, "", index, text, choice.reason))
            if queue.empty():
                return


def _release(client: ServingClient, choices: list[_Choice], active: dict[str, int]) -> None:
    """Abort what is still running (a client that left) and give back the choices' places."""
    for choice in choices:
        if choice.reason is None:
            client.abort(choice.rid)
    active["choices"] -= len(choices)


async def _stream(client: ServingClient, job: Job, choices: list[_Choice], queue: asyncio.Queue,
                  active: dict[str, int]) -> AsyncIterator[str]:
    rid = new_id(job.chat)
    try:
        if job.chat:
            for i in range(len(choices)):
                yield _sse(chunk_body(job, rid, i, None, None, first=True))
        while any(c.reason is None for c in choices):
            chunks: list[dict[str, Any]] = []
            try:
                await _collect(client, job, choices, queue, stream=chunks)
            except ApiError as error:
                yield _sse(error.body())
                break
            for chunk in chunks:
                yield _sse({**chunk, "id": rid})
        if job.include_usage:
            yield _sse(usage_chunk(job, rid, usage(sum(len(p) for p in job.prompts),
                                                   sum(c.tokens for c in choices))))
        yield "data: [DONE]\n\n"
    finally:
        _release(client, choices, active)       # a client that left mid-stream lands here


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


def _record(client: ServingClient, tokenizer: Any) -> dict[str, Any]:
    def text_of(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True) if tokenizer is not None else ""

    try:
        return client.session_record(text_of)
    except SessionUnavailable as error:
        raise ApiError(str(error), status=404, code="no_session") from None
