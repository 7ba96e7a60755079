"""Gradio UI: run the engine's scheduling loops and watch their timelines, step by step.

Glue only: each tab is built and wired by its own module in ``ui/tabs``; this file assembles them
and serves the page. The engine never runs in this process: the scheduler process does
(``ui.scheduler_link``), so the web server never holds the GIL the scheduler needs.
"""

from __future__ import annotations

from ui import stopping

if __name__ == "__main__":     # before the slow imports: Ctrl-C is the app's from its first line
    stopping.take_signals()

import argparse
import os
import sys
import threading

import gradio as gr

import texts
from ui import live_runs, parsing, scheduler_link, waiting
from ui.i18n import Translated
from ui.state import APP
from ui.tabs import lab_tab, live_tab, recorded_tab, run_view, serving_tab, upload_tab
from ui.tabs.parts import CSS, Page, md
from ui.view import TYPED_SLIDER

# A number typed into a slider's box stays as typed when the box loses focus (Gradio clamps it
# silently on blur; the handlers check it and say what is wrong): a capture-phase listener stops
# the box's own blur handler, for these sliders only.
KEEP_TYPED_JS = ("() => { document.addEventListener('blur', (e) => {"
                 " const box = e.target;"
                 " if (box instanceof HTMLInputElement && box.type === 'number'"
                 " && box.closest('.{cls}')) e.stopImmediatePropagation(); }, true); }")


def build_page() -> gr.Blocks:
    """The page: a title and the language switch, the tabs, and under them the run view."""
    with gr.Blocks(title="Overlap scheduling, live") as demo:
        tr = Translated()
        with gr.Row(equal_height=False):
            with gr.Column(scale=5):
                tr.add(gr.Markdown(texts.t("en", "title")), "title", attr="value")
            language = gr.Radio(list(texts.LANGUAGES.values()), value=texts.LANGUAGES["en"],
                                show_label=False, scale=1, min_width=220, elem_id="language")
        page = Page(demo, language, tr)
        md(page, "intro")
        with gr.Tabs():
            live = live_tab.build(page)
            recorded = recorded_tab.build(page)
            upload = upload_tab.build(page)
            serving = serving_tab.build(page)
            lab = lab_tab.build(page)
        view = run_view.build(page)

        devices_known = live_tab.wire(live, page, view)
        recorded_tab.wire(recorded, page, view)
        upload_tab.wire(upload, page, view)
        lab_tab.wire(lab, page, live.controls["model"], live.controls["device"], devices_known)
        run_view.wire(view, page)
        run_view.shows_runs(view, {live.tab: True, recorded.tab: True, upload.tab: True,
                                   serving: False, lab.tab: False})
        language.change(tr.updates_for, language, tr.components, show_progress="hidden")
        demo.load(None, js=KEEP_TYPED_JS.replace("{cls}", TYPED_SLIDER))
    return demo


demo = build_page()


def start_background(warm_up: bool) -> None:
    """The scheduler process and its warm-up (started now, so a page load finds it starting),
    the first upload's parser process, and the recording a visitor in line is shown."""
    if warm_up and not scheduler_link.on_zero_gpu():      # ZeroGPU: the GPU exists only in a run
        scheduler_link.scheduler()
        threading.Thread(target=live_runs.prewarm, name="prewarm", daemon=True).start()
    else:
        APP.warmed.set()              # no warm-up will measure: a page load sizes at once
    threading.Thread(target=parsing.prepare, name="parse-prepare", daemon=True).start()
    threading.Thread(target=waiting.prepare_defaults, name="recording-prepare",
                     daemon=True).start()


def main() -> int:
    parser = argparse.ArgumentParser(description="Serve the overlap-scheduling demo.")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to serve on (default: $GRADIO_SERVER_NAME or 127.0.0.1)")
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                        help="port to serve on (default: $GRADIO_SERVER_PORT or 7860)")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="do not build the default engine in the background at start")
    args = parser.parse_args()
    # "spawn" re-runs the main script in the scheduler process, which needs none of this UI (and
    # gradio is slow to import): hidden, the child imports only its target's engine modules.
    sys.modules["__main__"].__dict__.pop("__file__", None)
    if not scheduler_link.on_zero_gpu():
        from engine.scheduler_process.process import pin_server, raise_server_priority

        pin_server(scheduler_link.placement())              # keep off the device process's core
        raise_server_priority()                             # and not after it
    demo.queue(default_concurrency_limit=4)
    stopping.children_from_here()     # a page load may start the scheduler process from here on
    try:
        demo.launch(server_name=args.host, server_port=args.port, css=CSS,
                    max_file_size=parsing.MAX_UPLOAD_BYTES, theme=gr.themes.Soft(),
                    footer_links=[], prevent_thread_lock=True)
        if not stopping.asked():          # a Ctrl-C during the launch: start nothing more
            start_background(warm_up=not args.no_prewarm)
        stopping.wait()                   # serve until Ctrl-C or SIGTERM (ui.stopping)
    finally:
        APP.shutting_down.set()
        demo.close(verbose=False)
        scheduler_link.shutdown()
    stopping.say_stopped()
    return stopping.exit_code()


if __name__ == "__main__":
    sys.exit(main())
