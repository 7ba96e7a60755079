"""The page's copy: every sentence the demo shows, in English and Chinese side by side, keyed by
name, and the one lookup ``t(lang, key)``.

- ``strings``  the page's titles, help, control labels, status and chart words; ``t`` and its
  helpers (``sentence_gap``, ``label_colon``, ``count``, ``ordinal``)
- ``teach``    multi-step, the step-through replay and the hazard lab
- ``metrics``  the metrics table, the formula, what an import found, the latency chart
- ``memory``   the KV-memory chart
- ``summary``  the run's headline, the busy-machine badge, the titles of the page's folds
- ``traces``   imported traces: their loop, gaps, terms, steps and the import tab

This package imports only the standard library: ``viz`` and ``ui`` read from it.
"""

from texts.strings import LANGUAGES, STRINGS, count, label_colon, ordinal, sentence_gap, t

__all__ = ["LANGUAGES", "STRINGS", "count", "label_colon", "ordinal", "sentence_gap", "t"]
