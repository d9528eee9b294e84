"""What a person gives to start a run, read and checked: a preview of a corpus table, the models to choose
from and the largest upload (the New run page, ``flare run`` and ``flare app`` use the same functions). The
corpus itself is read by :func:`flare_core.data.corpus.load_corpus`, precomputed embeddings by
:func:`flare_core.encoders.load_precomputed`."""

from __future__ import annotations

import os
from typing import Any, BinaryIO

import pandas as pd

from flare_core.data.columns import detect_columns
from flare_core.data.reading import read_table


def available_models() -> tuple[list[str], list[str]]:
    """``(available, missing)``: ids of the registry's models that can be loaded here, and the others."""
    from flare_core.encoders import is_available, list_models

    ids = [spec.id for spec in list_models()]
    available = [m for m in ids if is_available(m)]
    return available, [m for m in ids if m not in available]


def preview_table(
    source: str | os.PathLike | bytes | BinaryIO, *, name: str | None = None, max_bytes: int
) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """``(frame, info, detected)``: the raw table (:func:`~flare_core.data.reading.read_table`) and the
    text, label and pair columns guessed for it (:func:`~flare_core.data.columns.detect_columns`)."""
    frame, info = read_table(source, name=name, max_bytes=max_bytes)
    return frame, info, detect_columns(frame)


#: The largest corpus upload, in MB, unless ``FLARE_MAX_UPLOAD_MB`` says otherwise.
DEFAULT_MAX_UPLOAD_MB = 200


def max_upload_mb() -> int:
    """The largest upload the dashboard reads (``FLARE_MAX_UPLOAD_MB``, default ``DEFAULT_MAX_UPLOAD_MB``);
    ``flare app`` gives Streamlit the same limit, so no larger file is even received."""
    value = os.environ.get("FLARE_MAX_UPLOAD_MB", "").strip() or str(DEFAULT_MAX_UPLOAD_MB)
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit < 1:
        raise ValueError(f"FLARE_MAX_UPLOAD_MB must be a positive whole number of megabytes, got {value!r}")
    return limit
