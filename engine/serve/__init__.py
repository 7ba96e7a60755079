"""The OpenAI-compatible server, ``python -m engine.serve`` (``__main__.py``): its FastAPI app
(``http_app.py``), the OpenAI request and response bodies (``openai_api.py``) and its side of a
served session (``session_client.py``).

May import: ``engine.scheduler_process`` and everything below it, ``record``.
"""
