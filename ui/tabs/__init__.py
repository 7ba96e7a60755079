"""The page, one module per tab, as well-kept Gradio apps build theirs.

Each module has ``build(page)``, the tab's layout (inside the page's ``gr.Blocks``; it returns the
tab's components in a small dataclass), and ``wire(...)``, the tab's events, whose handlers live in
``ui``. ``parts`` is what every tab shares; ``run_view`` is what a run shows, under the tabs that
show runs. ``app.py`` only assembles them.
"""
