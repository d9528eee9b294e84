"""Settings and tables as people read them, on the pages and in the report: a nested mapping as rows of
name and value, a missing value as a dash, a list as words; never "None", "nan", "null" or JSON. Numbers
read to 3 significant figures (:func:`number_words`, the same figures as :data:`NUMBER_FORMAT` on a page's
table), dates as dates (:func:`date_words`), and every column under its heading in words with its symbol in
the help (:func:`shown_columns`, from :mod:`flare_core.view.columns`)."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flare_core.view.columns import column_words

#: What a missing value reads as.
BLANK = "—"
#: Significant figures of every number a table shows.
SIGNIFICANT = 3
#: The printf format of a page's number column: the figures of :func:`number_words` (Streamlit formats
#: "%.3g" as JavaScript's ``String(Number(x.toPrecision(3)))``).
NUMBER_FORMAT = f"%.{SIGNIFICANT}g"
#: Columns that hold a moment (an ISO 8601 time), shown by :func:`date_words`.
DATE_COLUMNS = frozenset({"created", "started", "finished", "updated", "expires", "last_seen", "revoked"})
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def number_words(value: float) -> str:
    """``value`` to :data:`SIGNIFICANT` significant figures, written as a page's table writes it: "3.96",
    "0.0539", "1230", "-0.5", and "4.53e-8" below a millionth ("1e+21" from 10²¹ up)."""
    number = float(value)
    if not math.isfinite(number):
        return BLANK if math.isnan(number) else ("∞" if number > 0 else "−∞")
    near = rounded(number)
    if near == 0:
        return "0"
    if 1e-6 <= abs(near) < 1e21:
        return np.format_float_positional(near, trim="-")
    mantissa, exponent = f"{near:.{SIGNIFICANT - 1}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{'+' if int(exponent) > 0 else ''}{int(exponent)}"


def date_words(value: Any) -> str:
    """A moment (an ISO 8601 string or a datetime) as a date and time people read: "27 Nov 2026, 23:52
    UTC"; a missing one as :data:`BLANK`, anything else as it is."""
    if is_blank(value) or value == "":
        return BLANK
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(value, _dt.datetime):
        return str(value)
    if value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc)
    zone = " UTC" if value.tzinfo is not None else ""
    return f"{value.day} {_MONTHS[value.month - 1]} {value.year}, {value:%H:%M}{zone}"


def is_blank(value: Any) -> bool:
    """Whether ``value`` is missing: None, NaN or NaT."""
    if value is None or value is pd.NaT or value is pd.NA:
        return True
    return isinstance(value, float | np.floating) and math.isnan(float(value))


def value_words(value: Any) -> str:
    """One value in words: :data:`BLANK` when missing, yes/no, whole numbers without a decimal point,
    other numbers to 3 significant figures (:func:`number_words`), a list as its items separated by commas, a
    mapping as "name: value" pairs separated by semicolons."""
    if is_blank(value):
        return BLANK
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value))
    if isinstance(value, float | np.floating):
        return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else number_words(value)
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
    to words (:func:`value_words`), a column of moments (:data:`DATE_COLUMNS`) to dates in words; the other
    columns stay numbers, so that they sort as numbers, fractions rounded to :data:`SIGNIFICANT` figures
    (the figures shown, and what a screen reader or a copied cell reads too)."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if column in DATE_COLUMNS:
            out[column] = values.map(date_words).astype(object)
            continue
        awkward = values.map(lambda v: is_blank(v) or isinstance(v, Mapping | list | tuple | np.ndarray))
        if awkward.any():
            out[column] = values.map(value_words).astype(object)
        elif pd.api.types.is_float_dtype(values.dtype):
            out[column] = values.map(rounded)
    return out


def rounded(value: float) -> float:
    """``value`` rounded to :data:`SIGNIFICANT` significant figures (4.5315e-8 -> 4.53e-8)."""
    number = float(value)
    return float(f"{number:.{SIGNIFICANT}g}") if math.isfinite(number) else number


@dataclass(frozen=True)
class ShownColumn:
    """How one column of a table is shown: its ``name`` in the frame, its ``heading`` in words, its
    ``help`` (the symbol or the stored name, and what it means) and its ``kind``: "number" (a fraction,
    to :data:`SIGNIFICANT` figures), "whole" (a count) or "text"."""

    name: str
    heading: str
    help: str
    kind: str


def shown_columns(frame: pd.DataFrame) -> list[ShownColumn]:
    """Every column of ``frame`` (as :func:`shown_frame` leaves it) as it is shown, in order."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"a table is a pandas DataFrame, got {type(frame).__name__}")
    shown = []
    for name in frame.columns:
        heading, help_text = column_words(str(name))
        dtype = frame[name].dtype
        if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            kind = "text"
        elif pd.api.types.is_integer_dtype(dtype):
            kind = "whole"
        else:
            kind = "number"
        shown.append(ShownColumn(str(name), heading, help_text, kind))
    return shown
