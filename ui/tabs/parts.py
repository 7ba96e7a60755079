"""What every tab shares: the page (``Page``), translated text blocks, the page's CSS and scripts.

A component whose words change with the language is registered once, where its tab creates it,
in the page's ``Translated`` (``ui.i18n``): ``md``, ``button``, ``labelled`` and ``control_slider``
do that.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

import texts
from ui import queues, scheduler_link
from ui.i18n import C, Translated
from ui.inputs import DEFAULTS, LIMITS
from ui.status import status
from ui.view import slider

CSS = """
.status {padding: 8px 12px; border-radius: 6px; font-size: 14px;}
.status pre {white-space: pre-wrap; overflow-wrap: anywhere; max-height: 240px; overflow-y: auto;}
.status-error {background: rgba(214,39,40,.12); border-left: 4px solid #d62728;}
.status-ok {background: rgba(49,163,84,.12); border-left: 4px solid #31a354;}
.status-warn {background: rgba(253,174,107,.18); border-left: 4px solid #e6550d;}
.status-running, .status-info {background: rgba(49,130,189,.10); border-left: 4px solid #3182bd;}
.bar {height: 6px; background: rgba(128,128,128,.2); border-radius: 3px; margin-top: 4px;}
.bar > div {height: 6px; background: #3182bd; border-radius: 3px; transition: width .3s;}
#explain {font-size: 13.5px;}
.ov-headline {font-size: 16px; line-height: 1.45; padding: 8px 12px; border-radius: 6px;
              border-left: 4px solid #31a354; background: rgba(49,163,84,.08);}
.ov-headline-busy, .ov-headline-not-faster {border-left-color: #e6550d;
                                            background: rgba(253,174,107,.16);}
.ov-headline-single, .ov-headline-short {border-left-color: #3182bd;
                                         background: rgba(49,130,189,.08);}
.ov-headline-quiet {margin-top: 6px; border-left-color: #756bb1; background: rgba(117,107,177,.10);}
#preset-said, #preset-said p, #preset-said em {font-size: 12.5px !important; line-height: 1.4;
                                               color: #555;}
#presets-label {align-self: center; flex-grow: 0 !important; min-width: max-content !important;}
#explain code, #metrics code {white-space: normal; overflow-wrap: anywhere;}
#step-caption {font-size: 14.5px; padding: 6px 12px; border-left: 4px solid #756bb1;
               background: rgba(117,107,177,.08); border-radius: 6px;}
#lab-result {font-size: 14px;}
.serving-scroll {overflow-x: auto;}
table.serving {border-collapse: collapse; font-size: 13px; white-space: nowrap;}
table.serving th, table.serving td {padding: 3px 10px; border-bottom: 1px solid rgba(128,128,128,.3);
                                     text-align: left;}
"""
# A chart updated while its tab was hidden was laid out at a default width: on showing the tab,
# a resize event lets plotly fit it to its container again.
RELAYOUT_JS = "() => { setTimeout(() => window.dispatchEvent(new Event('resize')), 60); }"
# Runs of the engine take turns in the engine's line (``ui.turns``); lab runs also go through
# Gradio's queue one at a time, so at most one of them waits in a server thread.
LAB_QUEUE = queues.one_queue("lab-runs")


def queued_js(key: str) -> str:
    """A browser-side handler that shows the text ``key`` as a running status at once, in the
    language the switch shows (the event it goes with answers when its turn comes)."""
    said = {choice: status(texts.t(lang, key), "running")
            for lang, choice in texts.LANGUAGES.items()}
    return f"(lang) => ({json.dumps(said)})[lang] || {json.dumps(said['English'])}"


@dataclass
class Page:
    """What every tab's build and wiring reads: the Blocks (for its load events), the language
    switch and the registry of translated components."""

    demo: gr.Blocks
    language: gr.Radio
    tr: Translated


def md(page: Page, key: str, **kwargs: Any) -> gr.Markdown:
    """A markdown block showing the text ``key`` (in the page's language)."""
    return page.tr.add(gr.Markdown(texts.t("en", key), **kwargs), key, attr="value")


def button(page: Page, key: str, **kwargs: Any) -> gr.Button:
    return page.tr.add(gr.Button(texts.t("en", key), **kwargs), key, attr="value")


def labelled(page: Page, make: Callable[..., C], key: str, *args: Any,
             choices: Callable[[str], list] | None = None, **kwargs: Any) -> C:
    """``make(*args, label=<the text key>, **kwargs)``, its label (and ``choices``) translated."""
    return page.tr.add(make(*args, label=texts.t("en", key), **kwargs), key, choices=choices)


def control_slider(page: Page, name: str, key: str, step: float,
                   scale: int | None = None) -> gr.Slider:
    """A slider over the control's limits (``ui.inputs.LIMITS``), at its default."""
    low, high, _ = LIMITS[name]
    return labelled(page, slider, key, low, high, DEFAULTS[name], step=step,
                    elem_id=name.replace("_", "-"), scale=scale)


def on_gpu_call(handler: Any) -> Any:
    """``handler`` as an event runs it: on Hugging Face ZeroGPU inside a ``spaces.GPU`` call
    (where the GPU exists only during that call), elsewhere as it is."""
    if not scheduler_link.on_zero_gpu():
        return handler
    import spaces

    return spaces.GPU(duration=120)(handler)
