"""The web UI's handlers, by concern; ``ui.tabs`` lays out each tab and wires them to it.

- ``inputs``   what the controls offer and accept: choices, defaults, limits, checks
- ``status``   the status line, kept as data so a language switch says it again
- ``scheduler_link``  this server's link to the scheduler process (started on first use)
- ``queues``   event options for handlers that must take turns
- ``turns``    the engine's line: runs take turns there; each visitor's Stop reaches only their own
- ``state``    what the server keeps between events (``APP``: the scheduler, what was measured)
- ``controls`` the live tab's controls as one value (``Controls``)
- ``presets``  the presets and the extra CPU work sized to the device
- ``recorded_runs``  any record (live, recorded, imported) -> every output of the main view; downloads
- ``live_runs``  live runs of the chosen loops, taking turns; each drawn as it ends
- ``waiting``  a run in line: its place and estimate, and the same work recorded, meanwhile
- ``step_through``  step-through replay of the record on screen
- ``same_work``  records of the same work: other engines', and a quiet machine's
- ``lab_runs``  the hazard lab: remove one safeguard, show what the checks found
- ``serving_runs``  the serving tab: latency against request rate, as measured
- ``i18n``     which components change words with the language, and ``lang_of``
- ``parsing``  uploaded files read in a worker process
- ``view``, ``live_chart``  the main view's outputs; the live canvas component
- ``stopping`` how the app stops: Ctrl-C or SIGTERM at any moment, one line, no process left
- ``tabs``     the page: each tab's layout (``build``) and events (``wire``)
- ``screenshots``  ``python -m scripts.screenshots``: the walkthrough's screenshots, from the real app

Handlers are plain functions of component values, so tests call them without a browser.
"""
