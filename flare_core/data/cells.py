"""The cells of a raw table as corpus values: choosing the text, label and pair columns, and reading a
column's cells as texts or labels (strings, ``None`` for a missing or blank cell)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from flare_core.data.columns import detect_columns, is_number
from flare_core.data.reading import list_columns
from flare_core.errors import CorpusError


class _Auto:
    """Type of :data:`AUTO`, the default of :func:`load_corpus`'s column arguments."""

    _instance: _Auto | None = None

    def __new__(cls) -> _Auto:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "AUTO"


#: Default of the optional column arguments of :func:`load_corpus`: detect the column.
#: ``None`` there means "no such column" instead.
AUTO = _Auto()


def choose_columns(
    frame: pd.DataFrame,
    src: str,
    text_column: str | None,
    label_column: str | None | _Auto,
    pair_columns: tuple[str, ...] | None | _Auto,
) -> tuple[str, str | None, tuple[str, str, str | None] | None]:
    """The text, label and pair columns of ``frame``: detected where asked (``None`` text, ``AUTO``),
    checked to exist; pairs as ``(a, b, score)`` with ``score`` None for retrieval pairs."""
    needs_detection = text_column is None or label_column is AUTO or pair_columns is AUTO
    detected = detect_columns(frame) if needs_detection else {}
    if text_column is None:
        text_column = detected.get("text")
        if text_column is None:
            raise CorpusError(
                f"{src}: no text column found among {list_columns(frame.columns)} "
                "(no column holds non-numeric strings); choose one with text_column="
            )
    require_column(frame, text_column, "text", src)

    if pair_columns is AUTO:
        pair_columns = detected.get("pairs")
    elif pair_columns is None or (isinstance(pair_columns, tuple | list) and len(pair_columns) == 0):
        pair_columns = None
    elif not isinstance(pair_columns, tuple | list) or len(pair_columns) not in (2, 3):
        raise CorpusError(
            "pair_columns must name 3 columns (text_a, text_b, score) for STS or 2 (query, document) for "
            f"retrieval, got {pair_columns!r}"
        )
    if pair_columns is not None:
        pair_columns = (  # type: ignore[arg-type]
            (*pair_columns, None)[:3] if len(pair_columns) == 2 else tuple(pair_columns)
        )
        for col in pair_columns:
            if col is not None:
                require_column(frame, col, "pair", src)

    if label_column is AUTO:
        label_column = detected.get("label")
        if label_column is not None and pair_columns is not None and label_column in pair_columns:
            label_column = None
    elif label_column == "":
        label_column = None
    if label_column is not None:
        require_column(frame, label_column, "label", src)
        if label_column == text_column:
            raise CorpusError(
                f"{src}: the label column '{label_column}' is also the text column; choose another"
            )
    return text_column, label_column, pair_columns  # type: ignore[return-value]


def require_column(frame: pd.DataFrame, column: Any, role: str, src: str) -> None:
    if not isinstance(column, str) or column not in frame.columns:
        raise CorpusError(
            f"{src}: {role} column {column!r} not found; available columns: {list_columns(frame.columns)}"
        )


def rows_desc(ids: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(i + 1) for i in ids[:limit])
    word = "row" if len(ids) == 1 else "rows"
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"{word} {shown}{more}"


def text_values(series: pd.Series, column: str, src: str, ids: list[int] | None = None) -> list[str | None]:
    """Texts as str with newlines normalised to ``\\n``; None for missing/blank cells.

    ``ids`` are the data-row ids of ``series`` used in messages (default: positions).
    """
    if not (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)):
        raise CorpusError(
            f"{src}: column '{column}' holds {series.dtype} values, not text; choose a text column"
        )
    out: list[str | None] = []
    non_text: list[int] = []
    nul: list[int] = []
    for i, value in enumerate(series.tolist()):
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
            out.append(None)
            continue
        if isinstance(value, str):
            text = value
        elif isinstance(value, bool | int | float | np.integer | np.floating):
            text = str(value)
        else:
            non_text.append(i)
            out.append(None)
            continue
        if "\x00" in text:
            nul.append(i)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        out.append(text if text.strip() else None)
    if ids is not None:
        non_text, nul = [ids[i] for i in non_text], [ids[i] for i in nul]
    if non_text:
        raise CorpusError(
            f"{src}: column '{column}' holds lists or objects, not text, on {rows_desc(non_text)}"
        )
    if nul:
        raise CorpusError(f"{src}: column '{column}' contains a NUL character on {rows_desc(nul)}")
    present = [t for t in out if t is not None]
    if present and all(is_number(t) for t in present):
        raise CorpusError(
            f"{src}: column '{column}' holds only numbers, not text; choose another text column"
        )
    return out


def label_values(series: pd.Series) -> list[str | None]:
    out: list[str | None] = []
    for value in series.tolist():
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            out.append(None)
            continue
        text = str(value).strip()
        out.append(text if text else None)
    return out
