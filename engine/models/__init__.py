"""The model and where it comes from: the Llama-family transformer over paged KV (``model.py``), its
compiled decode regions (``compiled.py``), checkpoints (``loader.py``, ``checkpoint.py``, ``hub.py``)
and text <-> token ids (``prompts.py``).

May import: ``engine.layers``, ``engine.config``, ``record``.
"""
