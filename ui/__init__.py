"""The web UI's handlers, by concern; ``ui.tabs`` lays out each tab and wires them to it.

A handler is a plain function of component values (tests call them without a browser) and
returns the main view as a ``ui.view.MainView``. Runs of the engine take turns in one line
(``ui.turns``), where each visitor's Stop reaches only their own; the engine itself runs in the
scheduler process (``ui.scheduler_link``); what the server keeps between events is ``ui.state.APP``.
"""
