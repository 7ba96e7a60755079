"""The page, one module per tab, as well-kept Gradio apps build theirs.

Each module has ``build(page)``, the tab's layout (called inside the page's ``gr.Blocks``; it
returns the tab's components in a small dataclass), and ``wire(...)``, the tab's events (its
handlers live in ``ui``'s handler modules: ``live_runs``, ``recorded_runs``, ``step_through``,
``lab_runs``, ``serving_runs``). ``app.py`` only assembles them.

- ``parts``         what every tab shares: the page (``Page``), translated text blocks, the CSS
- ``live_tab``      the live run tab: the controls, the presets, Run and Stop
- ``recorded_tab``  the recorded GPU runs
- ``upload_tab``    importing a trace or a run record
- ``serving_tab``   latency against request rate
- ``lab_tab``       the hazard lab
- ``run_view``      what a run shows, under the tabs that show runs, in the lesson's order: the
  headline, the two timelines, the formula and metrics; the rest folded below
"""
