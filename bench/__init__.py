"""Benchmarks that print tables: the engine's loops against a forward-only ceiling and transformers.

``python -m bench --help``. Performance goals live here, never in timed unit tests.
"""
