"""The scheduling core, as the article reads it: the loops (``scheduler.py``), requests and batches
(``request.py``), who waits and runs (``table.py``), KV memory (``kv_cache.py``,
``radix_cache.py``, ``cache_manager.py``, ``checks.py``), where requests come from
(``sources.py``, ``arrivals.py``, ``intake.py``) and the ``Device`` protocol (``device.py``).

May import: ``engine.config``, ``engine.models`` (tokenizing prompts), ``record``. Never a device
implementation."""
