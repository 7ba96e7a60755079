"""Which components change their words with the language, and how.

Every translated component is registered once, where the layout creates it, with the key of its
text in ``texts`` and the attribute that shows it (a label, a button's value, a markdown's
value). Switching languages is then one list of updates, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import gradio as gr
from gradio.blocks import Block

import texts
from ui.view import Update

C = TypeVar("C", bound=Block)


def lang_of(choice: str) -> str:
    """The language code of the switch's value: "中文" -> "zh", anything else -> "en"."""
    return "zh" if choice == texts.LANGUAGES["zh"] else "en"


class Translated:
    def __init__(self) -> None:
        self.entries: list[tuple[Block, str, str, Callable[[str], list] | None]] = []

    def add(self, component: C, key: str, attr: str = "label",
            choices: Callable[[str], list] | None = None) -> C:
        """Register ``component`` (returned, so layout code reads as it did)."""
        self.entries.append((component, attr, key, choices))
        return component

    @property
    def components(self) -> list[Block]:
        return [component for component, *_ in self.entries]

    def updates_for(self, lang_choice: str) -> list[Update]:
        """Every registered component's words for the language switch's value."""
        lang = lang_of(lang_choice)
        out = []
        for _, attr, key, choices in self.entries:
            change: dict[str, Any] = {attr: texts.t(lang, key)}
            if choices is not None:
                change["choices"] = choices(lang)
            out.append(gr.update(**change))
        return out
