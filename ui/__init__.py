"""The web UI's handlers, by concern; ``ui.tabs`` lays out each tab and wires them to it.

- ``common``   control limits and input checks, status lines, the scheduler's handle
- ``state``    what the server keeps between events (``APP``: the scheduler, what was measured)
- ``controls`` the live tab's controls as one value (``Controls``)
- ``presets``  the presets and the extra CPU work sized to the device
- ``recorded_runs``  any record (live, recorded, imported) -> every output of the main view; downloads
- ``live``     live runs of the chosen loops (normal, overlap, multi-step), drawn while they run
- ``replay``   step-through replay of the record on screen
- ``lab``      the hazard lab: remove one safeguard, show what the checks found
- ``i18n``     which components change words with the language
- ``stopping`` how the app stops: Ctrl-C or SIGTERM at any moment, one line, no process left
- ``tabs``     the page: each tab's layout (``build``) and events (``wire``)
- ``screenshots``  ``python -m scripts.screenshots``: the walkthrough's screenshots, from the real app

Handlers are plain functions of component values, so tests call them without a browser.
"""
