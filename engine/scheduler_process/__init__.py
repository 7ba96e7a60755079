"""The scheduler process and what travels to and from it: the process and its client
(``process.py``), what it serves (``service.py``: runs, labs, served sessions in
``online.py``) and the typed messages (``messages.py``).

May import: ``engine.engine`` and everything below it, ``engine.lab``, ``record``.
"""
