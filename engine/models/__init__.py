"""The Llama-family model over paged KV and where it comes from: checkpoints, the hub, prompts.

May import: ``engine.layers``, ``engine.config``, ``record``.
"""
