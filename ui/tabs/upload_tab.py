"""The import tab: a torch.profiler trace or a run record, uploaded, seen as a live run is seen
(``ui.recorded_runs``; the file is read in a worker process, ``ui.parsing``)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ui import recorded_runs
from ui.tabs.parts import Page, labelled, md
from ui.tabs.run_view import RunView


@dataclass
class UploadTab:
    tab: gr.Tab
    upload: gr.File                   # one file, or two to compare
    beside: gr.Checkbox               # add them beside the record on screen


def build(page: Page) -> UploadTab:
    with labelled(page, gr.Tab, "tab_upload", elem_id="tab-upload") as tab:
        md(page, "upload_help")
        # Any file is taken and answered (a filter in the browser refused an image silently).
        upload = labelled(page, gr.File, "ctl_upload", elem_id="upload", file_count="multiple")
        beside = labelled(page, gr.Checkbox, "ctl_beside", False, elem_id="beside")
    return UploadTab(tab, upload, beside)


def wire(tab: UploadTab, page: Page, view: RunView) -> None:
    view.reset_replay(tab.upload.upload(recorded_runs.show_upload,
                                        [tab.upload, tab.beside, view.record, page.language],
                                        view.outputs(), concurrency_limit=2,
                                        show_progress_on=[view.status]), page.language)
