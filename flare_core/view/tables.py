"""Settings and tables as people read them, on the pages and in the report: a nested mapping as rows of
name and value, a missing value as a dash, a list as words; never "None", "nan", "null" or JSON."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

#: What a missing value reads as.
BLANK = "—"


def is_blank(value: Any) -> bool:
    """Whether ``value`` is missing: None, NaN or NaT."""
    if value is None or value is pd.NaT or value is pd.NA:
        return True
    return isinstance(value, float | np.floating) and math.isnan(float(value))


def value_words(value: Any) -> str:
    """One value in words: :data:`BLANK` when missing, yes/no, whole numbers without a decimal point,
    other numbers to 4 significant digits, a list as its items separated by commas, a mapping as
    "name: value" pairs separated by semicolons."""
    if is_blank(value):
        return BLANK
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value))
    if isinstance(value, float | np.floating):
        return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{float(value):.4g}"
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {value_words(v)}" for k, v in value.items()) or BLANK
    if isinstance(value, list | tuple | set | np.ndarray):
        items = [value_words(v) for v in value]
        return ", ".join(items) if items else BLANK
    return str(value)


def settings_frame(mapping: Mapping[str, Any] | None, prefix: str = "") -> pd.DataFrame:
    """A (nested) mapping as rows of ``setting`` (nested names joined by " › ") and ``value`` in words."""
    rows: list[dict[str, str]] = []

    def walk(items: Mapping[str, Any], at: str) -> None:
        for key, value in items.items():
            name = f"{at} › {key}" if at else str(key)
            if isinstance(value, Mapping) and value:
                walk(value, name)
            else:
                rows.append({"setting": name, "value": value_words(value)})

    walk(mapping or {}, prefix)
    return pd.DataFrame(rows, columns=["setting", "value"])


def shown_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` for a table on screen: each column with a missing value, a list or a mapping in it turned
    to words (:func:`value_words`); the other columns as they are, so that they sort as numbers."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        awkward = values.map(lambda v: is_blank(v) or isinstance(v, Mapping | list | tuple | np.ndarray))
        if awkward.any():
            out[column] = values.map(value_words).astype(object)
    return out
