"""The scheduling core, as the article reads it: the loops, requests and batches, KV memory, where
requests come from, and the ``Device`` protocol.

May import: ``engine.config``, ``engine.models`` (tokenizing prompts), ``record``. Never a device
implementation."""
