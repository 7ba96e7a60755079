"""The OpenAI-compatible server, ``python -m engine.serve``, and its side of a served session.

May import: ``engine.scheduler_process`` and everything below it, ``record``.
"""
