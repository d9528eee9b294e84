"""Guessing the text, label and pair columns of a raw table."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from flare_core.errors import CorpusError

_TEXT_NAMES = (
    "text",
    "texts",
    "document",
    "doc",
    "sentence",
    "content",
    "body",
    "article",
    "passage",
    "review",
    "comment",
    "message",
    "abstract",
)
_LABEL_NAMES = ("label", "labels", "category", "class", "topic", "target", "tag", "sentiment")
_PAIR_NAMES = (
    ("text_a", "text_b", "score"),
    ("sentence1", "sentence2", "score"),
    ("sentence1", "sentence2", "label"),
    ("sentence_a", "sentence_b", "score"),
    ("query", "document", None),  # retrieval: each query's relevant document is on its row
    ("query", "passage", None),
)


def detect_columns(frame: pd.DataFrame) -> dict:
    """Guess the text, label and pair columns of a raw table.

    Returns ``{"text": str | None, "label": str | None, "pairs": (a, b, score) | None}``.
    Text: among columns holding non-numeric strings, prefer names like text/document/sentence/
    content (exact name, then name containing one), then the longest mean length. Label: a column
    named label/category/class/topic/..., else a low-cardinality column (2..min(100, n/2) distinct
    values, not continuous numbers, not id-like). Pairs: text_a/text_b/score or
    sentence1/sentence2/score|label when present.
    """
    if not isinstance(frame, pd.DataFrame):
        raise CorpusError(f"detect_columns needs a pandas DataFrame, got {type(frame).__name__}")
    columns = [str(c) for c in frame.columns]
    lower = {c.lower(): c for c in columns}
    pairs = None
    for a, b, s in _PAIR_NAMES:
        if a in lower and b in lower and (s is None or s in lower):
            pairs = (lower[a], lower[b], lower[s] if s else None)
            break

    text_candidates: list[tuple[int, float, int, str]] = []
    for pos, col in enumerate(columns):
        mean_len = _text_mean_length(frame[col])
        if mean_len is None:
            continue
        name = col.lower()
        tier = 2 if name in _TEXT_NAMES else 1 if any(t in name for t in _TEXT_NAMES) else 0
        text_candidates.append((tier, mean_len, -pos, col))
    text = max(text_candidates)[3] if text_candidates else None

    excluded = {text} | (set(pairs) if pairs else set())
    label = None
    named = [c for c in columns if c.lower() in _LABEL_NAMES and c not in excluded]
    named = [c for c in named if frame[c].notna().any()]
    if named:
        label = named[0]
    else:
        scored: list[tuple[int, int, str]] = []
        for pos, col in enumerate(columns):
            if col in excluded or _looks_like_id(col):
                continue
            kind = _label_kind(frame[col])
            if kind is not None:
                scored.append((kind, pos, col))
        if scored:
            label = min(scored)[2]
    return {"text": text, "label": label, "pairs": pairs}


def _text_mean_length(series: pd.Series) -> float | None:
    """Mean character length if the column holds (mostly) non-numeric strings, else None."""
    values = series.dropna()
    if len(values) == 0:
        return None
    if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
        return None
    strings = [v for v in values.tolist() if isinstance(v, str) and v.strip()]
    if len(strings) < max(1, len(values) // 2):
        return None
    if all(is_number(s) for s in strings[:1000]):
        return None
    return float(np.mean([len(s) for s in strings]))


def _label_kind(series: pd.Series) -> int | None:
    """0 for a string label column, 1 for an integer-coded one, None if it is not label-like."""
    values = series.dropna()
    n = len(values)
    if n < 4:
        return None
    if pd.api.types.is_float_dtype(values):
        if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
            return None
    elif not (
        pd.api.types.is_object_dtype(values)
        or pd.api.types.is_string_dtype(values)
        or pd.api.types.is_integer_dtype(values)
        or pd.api.types.is_bool_dtype(values)
        or isinstance(values.dtype, pd.CategoricalDtype)
    ):
        return None
    try:
        as_str = values.astype(str).str.strip()
    except (TypeError, ValueError):
        return None
    distinct = as_str.nunique()
    if not 2 <= distinct <= min(100, n // 2):
        return None
    sample = as_str.unique()[:1000]
    if all(is_number(s) for s in sample):
        if not all(re.fullmatch(r"[+-]?\d+(\.0+)?", s) for s in sample):
            return None
        return 1
    return 0


def _looks_like_id(name: str) -> bool:
    n = name.lower()
    return n in ("id", "idx", "index", "uuid", "guid", "key") or n.endswith("_id") or n.startswith("unnamed:")


def is_number(s: str) -> bool:
    try:
        float(s)
    except (TypeError, ValueError):
        return False
    return True
