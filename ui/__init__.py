"""The web UI's handlers, by concern; ``app.py`` lays out the page and wires them to it.

- ``common``   control limits, the engine cache, the one-run-at-a-time device locks
- ``recorded_runs``  any record (live, recorded, imported) -> every output of the main view; downloads
- ``live``     live runs of the chosen loops (normal, overlap, multi-step), drawn while they run
- ``replay``   step-through replay of the record on screen
- ``lab``      the hazard lab: remove one safeguard, show what the checks found
- ``i18n``     which components change words with the language
- ``stopping`` how the app stops: Ctrl-C or SIGTERM at any moment, one line, no process left
- ``screenshots``  ``python -m scripts.screenshots``: the walkthrough's screenshots, from the real app

Handlers are plain functions of component values, so tests call them without a browser.
"""
