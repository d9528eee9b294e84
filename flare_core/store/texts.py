"""The rule that keeps a run's corpus texts out of what it shows: one rule for ``--no-texts`` reports and
bundles and for "figures only" share links.

A text column (``text``, ``text_a``, ``query_text``...) or any column holding a corpus text is dropped
from a table; in the corpus table itself the ``text`` column is blanked. Any string of a nested value (a
manifest, a JSON artefact) that is a corpus text, or a piece of one of at least
``MIN_PIECE_CHARS`` characters, or that holds the opening ``MIN_PIECE_CHARS`` characters of one (a
message quoting a text), becomes ``REMOVED``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

REMOVED = "[corpus text removed]"
#: Shorter strings are only removed when they are a whole corpus text (a word like "business" is not).
MIN_PIECE_CHARS = 24


def is_text_column(name: str) -> bool:
    """Whether a column's name says it holds texts (``text``, ``texts``, ``text_*``, ``*_text``)."""
    lowered = str(name).lower()
    return lowered == "text" or lowered.startswith("text_") or lowered.endswith("_text") or lowered == "texts"


def strip_frame(frame: pd.DataFrame, corpus_texts: set[str], is_corpus: bool) -> pd.DataFrame:
    """``frame`` without corpus texts: the corpus's ``text`` column blanked (``is_corpus``), or elsewhere
    every text column (by name, or holding one of ``corpus_texts``) dropped. Numbers (a text's row) stay."""
    if is_corpus:
        out = frame.copy()
        if "text" in out.columns:
            out["text"] = ""
        return out
    drop = []
    for column in frame.columns:
        if not (frame[column].dtype == object or pd.api.types.is_string_dtype(frame[column])):
            continue
        values = frame[column].dropna()
        if is_text_column(column) or any(isinstance(v, str) and v and v in corpus_texts for v in values):
            drop.append(column)
    return frame.drop(columns=drop)


class TextMatcher:
    """Finds a run's corpus texts (whole, or pieces of at least ``MIN_PIECE_CHARS`` characters) in strings
    and nested values."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = [str(t) for t in texts]
        self.exact = {t for t in self.texts if t}
        self._haystack = "\x00".join(self.texts)
        self._openings = {t[:MIN_PIECE_CHARS] for t in self.exact if len(t) >= MIN_PIECE_CHARS}

    def is_text(self, value: str) -> bool:
        """Whether ``value`` is a corpus text or a piece of one (a trailing ``…`` of a cut text ignored), or
        quotes the opening of one."""
        if value in self.exact:
            return True
        cleaned = value.rstrip("…").strip()
        if len(cleaned) < MIN_PIECE_CHARS:
            return False
        if cleaned in self._haystack:
            return True
        windows = (value[i : i + MIN_PIECE_CHARS] for i in range(len(value) - MIN_PIECE_CHARS + 1))
        return any(window in self._openings for window in windows)

    def scrub(self, obj: Any) -> Any:
        """``obj`` (strings, dicts, lists, tuples; anything else as it is) with every corpus text replaced
        by ``REMOVED``."""
        if not self.exact:
            return obj
        if isinstance(obj, str):
            return REMOVED if self.is_text(obj) else obj
        if isinstance(obj, dict):
            return {k: self.scrub(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.scrub(v) for v in obj]
        return obj
