"""The OpenAI API's shapes: request bodies in (checked), response bodies and stream chunks out. What
this engine cannot honour is refused with OpenAI's error body naming the field, never ignored."""

from __future__ import annotations

import math
import numbers
import time
import uuid
from dataclasses import dataclass
from typing import Any

from engine.config import SamplingParams
from engine.models.prompts import check_messages, encode_chat, encode_text

MAX_STOPS = 4
MAX_PROMPTS = 64                   # prompts in one /v1/completions request
COMMON = {"model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k",
          "seed", "stop", "n", "user", "ignore_eos", "stop_token_ids", "presence_penalty",
          "frequency_penalty", "logit_bias", "logprobs"}
COMPLETION_FIELDS = COMMON | {"prompt", "echo", "best_of", "suffix"}
CHAT_FIELDS = COMMON | {"messages", "max_completion_tokens", "top_logprobs", "response_format",
                        "tools", "tool_choice", "parallel_tool_calls"}


class ApiError(Exception):
    """A request the server refuses: the HTTP status and OpenAI's error body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 kind: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.kind, self.code = status, param, kind, code

    def body(self) -> dict[str, Any]:
        return error_body(str(self), self.kind, self.param, self.code)


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(frozen=True)
class Job:
    chat: bool
    model: str
    prompts: list[list[int]]        # token ids, one entry per choice
    params: SamplingParams
    stream: bool
    include_usage: bool
    stops: tuple[str, ...]


@dataclass(frozen=True)
class Limits:
    """What the served engine takes (from its ``ServingStarted``)."""

    model: str                      # the served model's name
    max_seq_len: int                # prompt + completion tokens
    vocab_size: int


# ---- parsing --------------------------------------------------------------------------------

def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or not low <= value <= high:
        raise ApiError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}", name)
    return float(value)


def _int(body: dict, name: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ApiError(f"{name} must be an integer in {low}..{high}, got {value!r}", name)
    return int(value)


def _refuse_unsupported(body: dict, allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(f"Unrecognized request argument supplied: {unknown[0]}", unknown[0])
    fixed = {"n": (None, 1), "best_of": (None, 1), "echo": (None, False), "suffix": (None, ""),
             "logprobs": (None, False), "top_logprobs": (None, 0), "presence_penalty": (None, 0),
             "frequency_penalty": (None, 0), "logit_bias": (None, {}), "tools": (None, []),
             "tool_choice": (None, "none"), "parallel_tool_calls": (None, False, True)}
    for name, ok in fixed.items():
        if name in body and body[name] not in ok:
            raise ApiError(f"{name}={body[name]!r} is not supported by this server "
                           f"(supported: {' or '.join(map(repr, [v for v in ok if v is not None]))})",
                           name)
    fmt = body.get("response_format")
    if fmt not in (None, {"type": "text"}):
        raise ApiError("response_format must be {\"type\": \"text\"} here (no JSON mode)",
                       "response_format")
    if "user" in body and not isinstance(body["user"], (str, type(None))):
        raise ApiError("user must be a string", "user")


def _stops(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) \
            or len(stops) > MAX_STOPS:
        raise ApiError(f"stop must be a non-empty string or a list of at most {MAX_STOPS} of "
                       "them", "stop")
    return tuple(stops)


def _stream(body: dict) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise ApiError("stream must be true or false", "stream")
    options = body.get("stream_options")
    if options is None:
        return bool(stream), False
    if not stream:
        raise ApiError("stream_options is only allowed when stream is true", "stream_options")
    if not isinstance(options, dict) or set(options) - {"include_usage"} \
            or not isinstance(options.get("include_usage", False), bool):
        raise ApiError("stream_options must be {\"include_usage\": true|false}", "stream_options")
    return True, bool(options.get("include_usage", False))


def _check_model(body: dict, limits: Limits) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError("you must provide a model parameter", "model")
    if model != limits.model:
        raise ApiError(f"The model `{model}` does not exist (this server serves "
                       f"`{limits.model}`).", "model", status=404, code="model_not_found")
    return model


def _prompts(body: dict, tokenizer: Any, vocab: int) -> list[list[int]]:
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt
                                   and all(isinstance(t, numbers.Integral) and
                                           not isinstance(t, bool) for t in prompt)):
        prompt = [prompt]
    if not isinstance(prompt, list) or not prompt or len(prompt) > MAX_PROMPTS:
        raise ApiError(f"prompt must be a string, a list of up to {MAX_PROMPTS} strings, or "
                       "token ids", "prompt")
    out = []
    for p in prompt:
        if isinstance(p, str):
            if not p:
                raise ApiError("prompt must not be empty", "prompt")
            if tokenizer is None:
                raise ApiError("this model has no tokenizer: send token ids", "prompt")
            ids = encode_text(tokenizer, p)
        elif isinstance(p, list) and p and all(isinstance(t, numbers.Integral)
                                               and not isinstance(t, bool) for t in p):
            ids = [int(t) for t in p]
            if not all(0 <= t < vocab for t in ids):
                raise ApiError(f"prompt token ids must be in 0..{vocab - 1}", "prompt")
        else:
            raise ApiError("each prompt must be a non-empty string or list of token ids",
                           "prompt")
        out.append(ids)
    return out


def parse_job(body: Any, chat: bool, limits: Limits, tokenizer: Any,
              chat_template: str | None = None) -> Job:
    """A request body as a ``Job``; ``ApiError`` names the first field that is wrong."""
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    _refuse_unsupported(body, CHAT_FIELDS if chat else COMPLETION_FIELDS)
    model = _check_model(body, limits)
    if chat:
        try:
            messages = check_messages(body.get("messages"))
            if tokenizer is None:
                raise ValueError("this model has no tokenizer, so it cannot take chat messages")
            prompts = [encode_chat(tokenizer, messages, chat_template)]
        except ValueError as error:
            raise ApiError(str(error), "messages") from None
    else:
        prompts = _prompts(body, tokenizer, limits.vocab_size)
    longest = max(len(p) for p in prompts)
    room = limits.max_seq_len - longest
    if room < 1:
        raise ApiError(f"This model's maximum context length is {limits.max_seq_len} tokens. "
                       f"However, your prompt is {longest} tokens; shorten it.",
                       "messages" if chat else "prompt", code="context_length_exceeded")
    name = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None \
        else "max_tokens"
    max_tokens = _int(body, name, room if chat else 16, 1, 1 << 20)
    if longest + max_tokens > limits.max_seq_len:
        raise ApiError(f"This model's maximum context length is {limits.max_seq_len} tokens. "
                       f"However, you requested {longest + max_tokens} tokens ({longest} in the "
                       f"prompt, {max_tokens} in the completion). Please reduce the prompt or "
                       f"{name}.", name, code="context_length_exceeded")
    stream, include_usage = _stream(body)
    stop_ids = body.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                 and 0 <= t < limits.vocab_size for t in stop_ids):
        raise ApiError(f"stop_token_ids must be token ids in 0..{limits.vocab_size - 1}",
                       "stop_token_ids")
    if not isinstance(body.get("ignore_eos", False), bool):
        raise ApiError("ignore_eos must be true or false", "ignore_eos")
    top_k = _int(body, "top_k", 0, -1, 1 << 20)
    params = SamplingParams(
        max_new_tokens=max_tokens, temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_top_p(body), top_k=max(top_k, 0), seed=_int(body, "seed", None, 0, 2**63 - 1),
        ignore_eos=bool(body.get("ignore_eos", False)), stop_token_ids=tuple(stop_ids))
    return Job(chat, model, prompts, params, stream, include_usage, _stops(body))


def _top_p(body: dict) -> float:
    value = _number(body, "top_p", 1.0, 0.0, 1.0)
    if value <= 0.0:
        raise ApiError(f"top_p must be a number in (0, 1], got {value!r}", "top_p")
    return value


# ---- stop strings ---------------------------------------------------------------------------

class StopText:
    """Text of one choice, cut at the first stop string. ``feed`` returns what may be sent now:
    text that could still turn out to begin a stop string is held back."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops, self.text, self.sent, self.stopped = stops, "", 0, False

    def feed(self, delta: str, final: bool = False) -> str:
        if self.stopped:
            return ""
        self.text += delta
        cut = min((i for i in (self.text.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.text, self.stopped, final = self.text[:cut], True, True
        hold = 0 if final else max((_overlap(self.text, s) for s in self.stops), default=0)
        end = len(self.text) - hold
        out, self.sent = self.text[self.sent:end], max(self.sent, end)
        return out


def _overlap(text: str, stop: str) -> int:
    """How many trailing characters of ``text`` are a proper prefix of ``stop``."""
    for n in range(min(len(stop) - 1, len(text)), 0, -1):
        if stop.startswith(text[-n:]):
            return n
    return 0


# ---- response bodies ------------------------------------------------------------------------

def new_id(chat: bool) -> str:
    return f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _body(job: Job, rid: str, kind: str, choices: list[dict[str, Any]],
          **more: Any) -> dict[str, Any]:
    """What every response and chunk says around its choices (``kind``: a chat's object)."""
    return {"id": rid, "object": kind if job.chat else "text_completion",
            "created": int(time.time()), "model": job.model, "choices": choices, **more}


def response_body(job: Job, rid: str, texts: list[str], reasons: list[str],
                  use: dict[str, int]) -> dict[str, Any]:
    """The whole (non-streaming) response."""
    choices = [{"index": i, **({"message": {"role": "assistant", "content": text}} if job.chat
                               else {"text": text}), "logprobs": None, "finish_reason": reason}
               for i, (text, reason) in enumerate(zip(texts, reasons))]
    return _body(job, rid, "chat.completion", choices, usage=use)


def chunk_body(job: Job, rid: str, index: int, text: str | None, reason: str | None,
               first: bool = False) -> dict[str, Any]:
    """One streamed chunk of choice ``index``: new text, and the finish reason at its end."""
    if job.chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
        if text:
            delta["content"] = text
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": reason}
    else:
        choice = {"index": index, "text": text or "", "logprobs": None, "finish_reason": reason}
    return _body(job, rid, "chat.completion.chunk", [choice])


def usage_chunk(job: Job, rid: str, use: dict[str, int]) -> dict[str, Any]:
    return _body(job, rid, "chat.completion.chunk", [], usage=use)
