"""The processes around the engine and what travels between them: the scheduler process and its
client (``scheduler_process.py``), what it serves (``service.py``: runs, labs, served sessions in
``online.py``) and the typed messages (``messages.py``).

May import: ``engine.engine`` and everything below it, ``engine.lab``, ``record``.
"""
