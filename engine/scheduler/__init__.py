"""The scheduling core, as the article reads it: the loops (``scheduler.py``: ``normal_loop``,
``overlap_loop``, ``multistep_loop``), requests and batches (``request.py``), who waits and runs
(``table.py``), KV memory (``kv_cache.py`` pools, ``radix_cache.py`` the prefix cache,
``cache_manager.py`` per request, ``checks.py`` what finds faults), where requests come from
(``sources.py``, ``arrivals.py``, ``intake.py``) and the ``Device`` protocol the loops drive
(``device.py``).

May import: ``engine.config``, ``engine.models`` (tokenizing prompts), ``record``. Never a device
implementation: the engine hands the loops a device that fits the protocol.
"""
