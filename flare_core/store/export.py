"""Exports of run data for spreadsheets and other tools."""

from __future__ import annotations

import pandas as pd

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value: object) -> object:
    """``value`` as :func:`safe_csv` writes it (a text cell starting like a formula gets a ``'``)."""
    return _neutralise(value)


def _neutralise(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def safe_csv(frame: pd.DataFrame) -> bytes:
    """CSV bytes (UTF-8) in which text cells starting like a spreadsheet formula are prefixed with ``'``.

    A cell such as ``=cmd|' /C calc'!A0`` is then shown as text by spreadsheet programs, never evaluated.
    Numbers are left as they are, and texts are written exactly as they are otherwise (quoted where CSV
    needs it; never HTML-escaped). Raises ValueError when ``frame`` is not a DataFrame.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"safe_csv needs a pandas DataFrame, got {type(frame).__name__}")
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = out[column].map(_neutralise)
    out.columns = [_neutralise(str(c)) for c in out.columns]
    return out.to_csv(index=False).encode("utf-8")
