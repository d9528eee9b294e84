"""Sampling rows of a large CSV/TSV file in bounded memory.

``load_corpus(path, max_rows=N)`` on a delimited file of at least :data:`STREAM_MIN_BYTES` reads it in
chunks of about :data:`CHUNK_BYTES` (at most :data:`CHUNK_ROWS` rows), twice, instead of whole: the first pass
reads only the text column and keeps, per row, whether it has a text and a 16-byte digest of it (for the
duplicates); the second keeps the rows of the seeded sample. The sample is the one the in-memory path draws
(the same ``numpy.random.default_rng(seed)`` choice among the same usable rows), and so are the texts, labels,
pairs, counts and content hash. Columns that are to be detected are detected on the first chunk.

Anything this path is not sure to treat exactly as the in-memory one (a file that is not clean UTF-8, a
row with more fields than the header, any message about a row) makes :func:`sample_large_file` return
None, and the caller reads the file whole, so the person sees the usual result or message.
"""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.data.cells import AUTO, choose_columns, label_values, text_values
from flare_core.data.reading import (
    _SNIFF_BYTES,
    CSV_OPTIONS,
    ONE_COLUMN_SEPARATORS,
    _check_duplicate_columns,
    _check_size,
    _detect_format,
    _first_record,
    _sniff_delimiter,
)
from flare_core.errors import CorpusError

#: Files smaller than this are read whole (the in-memory path is faster and holds little).
STREAM_MIN_BYTES = 16 * 2**20
#: Rows parsed at a time: about this many bytes of the file (from the rows of its first bytes), at most
#: ``CHUNK_ROWS`` rows. With 50,000 rows of 1,000 characters a chunk held 390 MiB; with 4 MiB, 60 MiB.
CHUNK_BYTES = 4 * 2**20
CHUNK_ROWS = 50_000
_BLOCK_BYTES = 8 * 2**20


@dataclasses.dataclass(frozen=True)
class SampledRows:
    """The sampled rows of a large file and what the whole file held.

    ``frame``: the sampled rows, every column, positions 0..k-1; ``rows[i]``: the file's data row of
    ``frame``'s row ``i``; ``info``: as :func:`~flare_core.data.reading.read_table` gives it; ``columns``:
    the text, label and pair columns chosen; ``counts``: the whole file's ``n_rows_read``,
    ``n_empty_dropped``, ``n_duplicates``, ``n_sampled_out`` and ``duplicates_dropped``.
    """

    frame: pd.DataFrame
    rows: np.ndarray
    info: dict[str, Any]
    columns: tuple[str, str | None, tuple[str, str, str | None] | None]
    counts: dict[str, Any]


class _NotStreamable(Exception):
    """This file is read whole instead (see the module docstring)."""


def sample_large_file(source: Any, *, max_rows: int, max_bytes: int, **options: Any) -> SampledRows | None:
    """The rows ``load_corpus(source, max_rows=max_rows, **options)`` keeps, read in bounded memory, or None
    when ``source`` is not a large delimited file on disk or the file must be read whole. ``options``:
    ``text_column``, ``label_column``, ``pair_columns``, ``drop_duplicates``, ``seed``, ``name``."""
    seed = options.get("seed", 0)
    if (
        not isinstance(source, str | os.PathLike)
        or not _whole_number(max_rows, 1)
        or not _whole_number(seed, 0)
    ):
        return None  # the in-memory path checks every argument and words its message
    path = Path(source)
    try:
        size = path.stat().st_size
    except OSError:
        return None  # the in-memory path says why
    name = options.get("name") or path.name
    if not path.is_file() or size < STREAM_MIN_BYTES:
        return None
    _check_size(size, max_bytes, name)
    try:
        return _sample(path, name, size, max_rows, options)
    except _NotStreamable:
        return None


def _whole_number(value: Any, minimum: int) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= minimum


def _sample(path: Path, name: str, size: int, max_rows: int, options: dict[str, Any]) -> SampledRows:
    with open(path, "rb") as fh:
        head_bytes = fh.read(4 * _SNIFF_BYTES)  # at least the in-memory path's sniffing sample, in characters
    fmt = _detect_format(head_bytes, name)
    if fmt not in ("csv", "tsv"):
        raise _NotStreamable
    encoding, absent = _scan(path)
    head = head_bytes.decode("utf-8-sig" if encoding == "utf-8-sig" else "utf-8", errors="ignore")
    delimiter = _sniff_delimiter(head, prefer_tab=fmt == "tsv")
    sep = delimiter or next((c for c in ONE_COLUMN_SEPARATORS if c in absent), None)
    if sep is None:
        raise _NotStreamable
    _check_duplicate_columns([h.strip() for h in _first_record(head, sep)], f"'{name}'")
    row_bytes = len(head_bytes) / max(1, head_bytes.count(b"\n"))
    read = {
        "encoding": encoding,
        "sep": sep,
        "chunksize": int(min(CHUNK_ROWS, max(100, CHUNK_BYTES / row_bytes))),
    }
    src = f"'{name}'"
    chunks = _chunks(path, read)
    first = next(chunks)
    chunks.close()
    text_col, label_col, pairs = choose_columns(
        first,
        src,
        options.get("text_column"),
        options.get("label_column", AUTO),
        options.get("pair_columns", AUTO),
    )
    usable, digests, n_rows = _usable_rows(path, read, list(first.columns), text_col, label_col, src)
    _, first_of_each = np.unique(digests, return_index=True)
    unique = usable[np.sort(first_of_each)]
    keep = unique if options.get("drop_duplicates") else usable
    if max_rows >= len(keep):
        raise _NotStreamable  # nothing to sample: read as usual
    chosen = np.sort(
        np.random.default_rng(options.get("seed", 0)).choice(len(keep), size=max_rows, replace=False)
    )
    rows = keep[chosen]
    frame = _rows_of(path, read, rows)
    info = {
        "format": "tsv" if sep == "\t" else "csv",
        "encoding": encoding,
        "encoding_warning": None,
        "delimiter": delimiter,
        "n_bytes": size,
        "source_name": name,
    }
    counts = {
        "n_rows_read": n_rows,
        "n_empty_dropped": n_rows - len(usable),
        "n_duplicates": len(usable) - len(unique),
        "n_sampled_out": len(keep) - max_rows,
        "duplicates_dropped": bool(options.get("drop_duplicates")),
    }
    return SampledRows(frame.reset_index(drop=True), rows, info, (text_col, label_col, pairs), counts)


def _scan(path: Path) -> tuple[str, set[str]]:
    """The file's encoding (``utf-8`` or ``utf-8-sig``) and which one-column separators it lacks; files
    that are not clean UTF-8 or hold NUL bytes are read whole (their messages and fallbacks live there)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    absent = set(ONE_COLUMN_SEPARATORS)
    encoding = "utf-8"
    with open(path, "rb") as fh:
        first = True
        while block := fh.read(_BLOCK_BYTES):
            if first:
                if block.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
                    raise _NotStreamable
                if block.startswith(b"\xef\xbb\xbf"):
                    encoding = "utf-8-sig"
                first = False
            if b"\x00" in block:
                raise _NotStreamable
            try:
                decoder.decode(block)
            except UnicodeDecodeError:
                raise _NotStreamable from None
            absent -= {c for c in absent if c.encode() in block}
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise _NotStreamable from None
    return encoding, absent


def _chunks(path: Path, read: dict[str, Any], **extra: Any) -> Iterator[pd.DataFrame]:
    """The file's rows, ``read["chunksize"]`` at a time, parsed as the in-memory path parses them."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)  # more fields than the header
        try:
            with pd.read_csv(path, **read, **CSV_OPTIONS, **extra) as reader:
                for chunk in reader:
                    chunk.columns = [str(c).strip() for c in chunk.columns]
                    yield chunk
        except (ValueError, pd.errors.ParserWarning, OverflowError, MemoryError):
            raise _NotStreamable from None


def _usable_rows(
    path: Path, read: dict[str, Any], header: list[str], text_col: str, label_col: str | None, src: str
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(positions of the rows with a text, a 16-byte digest of each such text, rows read)``; a row with
    a text and no label makes the file be read whole (its message counts every such row). ``header``: the
    file's column names, stripped (as in every chunk)."""
    positions, digests, n_rows = [], [], 0
    wanted = [text_col] + ([label_col] if label_col is not None else [])
    for chunk in _chunks(path, read, usecols=[header.index(c) for c in wanted]):
        try:
            texts = text_values(chunk[text_col], text_col, src)
        except CorpusError:
            raise _NotStreamable from None
        has_text = np.array([t is not None for t in texts], dtype=bool)
        if label_col is not None and any(
            lab is None for lab in np.asarray(label_values(chunk[label_col]), dtype=object)[has_text]
        ):
            raise _NotStreamable
        positions.append(n_rows + np.flatnonzero(has_text))
        digests.append(
            np.array(
                [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts if t is not None],
                dtype="S16",
            )
        )
        n_rows += len(chunk)
    # per row kept: 8 bytes of position and 16 of digest (24 MB for a million rows), nothing of its text
    if not positions:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype="S16"), n_rows
    return np.concatenate(positions), np.concatenate(digests), n_rows


def _rows_of(path: Path, read: dict[str, Any], rows: np.ndarray) -> pd.DataFrame:
    """The file's rows at ``rows`` (sorted positions), every column, indexed by position."""
    parts, start = [], 0
    for chunk in _chunks(path, read):
        stop = start + len(chunk)
        inside = rows[(rows >= start) & (rows < stop)]
        if len(inside):
            part = chunk.iloc[inside - start]
            part.index = inside
            parts.append(part)
        start = stop
    return pd.concat(parts)
