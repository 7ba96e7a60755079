"""The page's copy: every sentence the demo shows, in English and Chinese side by side, keyed by
name, and the one lookup ``t(lang, key)``. ``strings`` holds the page's own words and ``t`` with
its helpers; ``teach`` (multi-step, step-through, hazard lab), ``metrics``, ``memory``,
``summary`` (headline, folds) and ``traces`` (imported traces) hold their views' words.
Standard library only: ``viz`` and ``ui`` read from it."""

from texts.strings import LANGUAGES, STRINGS, count, label_colon, ordinal, sentence_gap, t

__all__ = ["LANGUAGES", "STRINGS", "count", "label_colon", "ordinal", "sentence_gap", "t"]
