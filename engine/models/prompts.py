"""Text in, token ids out, and back: one definition for the engine and the web server. A chat goes
through the tokenizer's chat template; ``TextStream`` turns growing token ids into text deltas."""

from __future__ import annotations

from typing import Any

ROLES = ("system", "user", "assistant", "tool", "developer")
# A plain chat template: "Role: text" lines ending with "Assistant:", after the tokenizer's BOS.
# The bundled model ships it; any base model gets it with ``--chat-template plain``.
PLAIN_CHAT_TEMPLATE = (
    "{% if bos_token %}{{ bos_token }}{% endif %}"
    "{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}")


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """``text`` as the tokenizer encodes it by default (its special tokens included)."""
    return list(tokenizer.encode(text))


def check_messages(messages: Any, where: str = "messages") -> list[dict[str, str]]:
    """A chat as a list of {"role", "content"} dicts with string content; else a ValueError
    that names the message and the field. Content given as a list of text parts is joined."""
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"{where} must be a non-empty list of {{\"role\", \"content\"}} objects")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"{where}[{i}] must be an object with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"{where}[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
        if isinstance(content, list):          # OpenAI's content parts: text only here
            if not all(isinstance(p, dict) and p.get("type") == "text"
                       and isinstance(p.get("text"), str) for p in content):
                raise ValueError(f"{where}[{i}].content parts must all be text parts "
                                 "({\"type\": \"text\", \"text\": ...})")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise ValueError(f"{where}[{i}].content must be a string")
        out.append({"role": role, "content": content})
    return out


def has_chat_template(tokenizer: Any) -> bool:
    return tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))


def encode_chat(tokenizer: Any, messages: Any, template: str | None = None) -> list[int]:
    """The chat through the tokenizer's chat template (or ``template``), ready for the
    assistant's reply."""
    chat = check_messages(messages)
    if template is None and not has_chat_template(tokenizer):
        raise ValueError("this model's tokenizer has no chat template (a base model): send "
                         "plain text prompts, or choose a template for it")
    encoded = tokenizer.apply_chat_template(chat, chat_template=template,
                                            add_generation_prompt=True, tokenize=True,
                                            return_dict=True)
    return list(encoded["input_ids"])


class TextStream:
    """Text deltas of a growing token list, for streaming (decoding the whole list each time:
    outputs here are short, and it is always right)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.sent = ""                       # text already handed out

    def add(self, ids: list[int], final: bool = False) -> str:
        """Append ``ids``; the new text safe to send (all of it when ``final``)."""
        self.ids += ids
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if not final and text.endswith("\ufffd"):
            return ""                        # an incomplete character: wait for its next bytes
        if not text.startswith(self.sent):   # decoding changed earlier text (rare): send nothing
            return ""                        # until it settles; the final text is whole
        delta, self.sent = text[len(self.sent):], text
        return delta
