"""Load and validate a user corpus (CSV/TSV, Parquet, JSONL) into a :class:`Corpus`.

The loader reads a table, picks (or checks) the text, label and pair columns, drops empty texts,
counts duplicates, optionally samples rows, and fingerprints the kept texts and labels with a
content hash that does not depend on the file format.

Every rejection raises :class:`CorpusError` (a ``ValueError``) whose message says what is wrong and
where (file, column, row or line). Row numbers in messages are 1-based data rows (the header is not
counted); line numbers are 1-based lines of the file. ``Corpus.ids`` are 0-based data-row indices.

Cells are only ever read as strings: nothing is evaluated, unpickled or written while loading.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import statistics
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from flare_core.checks import check_int
from flare_core.errors import CorpusError

__all__ = [
    "AUTO",
    "Corpus",
    "CorpusError",
    "corpus_summary",
    "detect_columns",
    "load_corpus",
    "read_table",
]

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
_DELIMITERS = (",", "\t", ";", "|")
_SNIFF_BYTES = 64 * 1024
_SNIFF_RECORDS = 200
_HASH_PREFIX = b"flare-corpus/v1\x00"

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
_FORMATS_BY_SUFFIX = {
    ".csv": "csv",
    ".txt": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
_UNSUPPORTED_SUFFIXES = {
    ".xlsx": "Excel workbooks",
    ".xls": "Excel workbooks",
    ".ods": "OpenDocument spreadsheets",
    ".zip": "ZIP archives",
    ".gz": "gzip archives",
    ".pkl": "pickle files",
    ".pickle": "pickle files",
}


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


@dataclass(frozen=True, eq=False)
class Corpus:
    """Texts (and optional labels and pairs) kept from one table, in file order.

    ``texts[i]`` came from data row ``ids[i]`` (0-based) of the file; ``labels[i]`` is its label
    as a string. ``pairs`` has columns ``text_a``, ``text_b``, ``score`` (float) indexed by data
    row id, or is ``None``. ``content_hash`` is the SHA-256 of the kept texts and labels.
    """

    texts: list[str]
    ids: list[int]
    labels: list[str] | None
    pairs: pd.DataFrame | None
    text_column: str
    label_column: str | None
    content_hash: str
    source_name: str
    stats: dict

    def __len__(self) -> int:
        return len(self.texts)

    def to_frame(self) -> pd.DataFrame:
        """Columns ``id`` (int), ``text`` (str), ``label`` (str, or None when unlabeled); one row per text."""
        labels = self.labels if self.labels is not None else [None] * len(self.texts)
        return pd.DataFrame({"id": list(self.ids), "text": list(self.texts), "label": list(labels)})


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


def read_table(
    source: str | os.PathLike | bytes | BinaryIO,
    *,
    name: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[pd.DataFrame, dict]:
    """Read a CSV/TSV, Parquet or JSONL table without interpreting its cells.

    ``source`` is a path, the file's bytes, or a binary file object (read from its current
    position). The size is checked against ``max_bytes`` before the content is read. The format
    comes from the suffix of ``name`` (or of the path), else it is sniffed from the content.

    Returns ``(frame, info)``: CSV/TSV/JSONL cells are strings (missing/empty cells are NaN), and
    ``info`` has ``format``, ``encoding``, ``encoding_warning`` (str or None), ``delimiter``
    (str, or None for non-CSV or one-column files) and ``n_bytes``.
    """
    check_int(max_bytes, "max_bytes", min_value=1, error=CorpusError)
    data, source_name = _read_source(source, name=name, max_bytes=max_bytes)
    label = f"'{source_name}'"
    if not data:
        raise CorpusError(f"{label} is empty (0 bytes)")
    fmt = _detect_format(data, source_name)
    info: dict[str, Any] = {
        "format": fmt,
        "encoding": None,
        "encoding_warning": None,
        "delimiter": None,
        "n_bytes": len(data),
        "source_name": source_name,
    }
    if fmt == "parquet":
        frame = _read_parquet(data, label)
        info["encoding"] = "parquet"
    else:
        text, encoding, warning = _decode(data, label)
        info["encoding"], info["encoding_warning"] = encoding, warning
        if not text.strip():
            raise CorpusError(f"{label} is empty: it contains only whitespace")
        if fmt == "jsonl":
            frame = _read_jsonl(text, label)
        else:
            frame, delimiter = _read_delimited(text, label, prefer_tab=fmt == "tsv")
            info["delimiter"] = delimiter
            fmt = "tsv" if delimiter == "\t" else "csv"
    info["format"] = fmt
    if frame.shape[1] == 0:
        raise CorpusError(f"{label} has no columns")
    if len(frame) == 0:
        raise CorpusError(
            f"{label} has no rows (only a header with columns {_list_columns(frame.columns)})"
            if fmt in ("csv", "tsv")
            else f"{label} has no rows"
        )
    return frame.reset_index(drop=True), info


def _read_source(source: Any, *, name: str | None, max_bytes: int) -> tuple[bytes, str]:
    """Return the raw bytes and a display name; check the size before reading everything."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        source_name = name or "<uploaded bytes>"
        _check_size(len(data), max_bytes, source_name)
        return data, source_name
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        source_name = name or path.name
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise CorpusError(f"file not found: '{path}'") from None
        except OSError as exc:
            raise CorpusError(f"cannot access '{path}': {exc.strerror or exc}") from None
        if path.is_dir():
            raise CorpusError(f"'{path}' is a folder, not a file")
        _check_size(st.st_size, max_bytes, source_name)
        try:
            with open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise CorpusError(f"cannot read '{path}': {exc.strerror or exc}") from None
        _check_size(len(data), max_bytes, source_name)
        return data, source_name
    if hasattr(source, "read"):
        source_name = name or Path(str(getattr(source, "name", "") or "<uploaded file>")).name
        size = _stream_size(source)
        if size is not None:
            _check_size(size, max_bytes, source_name)
        data = source.read(max_bytes + 1)
        if isinstance(data, str):
            raise CorpusError(f"'{source_name}' was opened in text mode; open it in binary mode ('rb')")
        data = bytes(data or b"")
        _check_size(len(data), max_bytes, source_name)
        return data, source_name
    raise CorpusError(
        f"cannot read a corpus from a {type(source).__name__}; pass a path, bytes or a binary file"
    )


def _stream_size(stream: Any) -> int | None:
    """Bytes left from the current position, found with seek/tell; None if not seekable."""
    try:
        if hasattr(stream, "seekable") and not stream.seekable():
            return None
        start = stream.tell()
        end = stream.seek(0, os.SEEK_END)
        end = stream.tell() if end is None else end
        stream.seek(start)
        return int(end) - int(start)
    except (OSError, AttributeError, ValueError):
        return None


def _check_size(size: int, max_bytes: int, source_name: str) -> None:
    if size > max_bytes:
        raise CorpusError(
            f"'{source_name}' is {_human_bytes(size)}, larger than the limit of {_human_bytes(max_bytes)} "
            f"(max_bytes={max_bytes}); sample it down or raise the limit"
        )


def _human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return f"{n:.1f} TiB"  # pragma: no cover


def _detect_format(data: bytes, source_name: str) -> str:
    suffix = Path(source_name).suffix.lower()
    if suffix in _UNSUPPORTED_SUFFIXES:
        raise CorpusError(
            f"'{source_name}': {_UNSUPPORTED_SUFFIXES[suffix]} are not supported; "
            "save the table as CSV, Parquet or JSONL"
        )
    if data[:4] == b"PK\x03\x04":
        raise CorpusError(
            f"'{source_name}' is a ZIP archive (an Excel workbook?); save the table as CSV, Parquet or JSONL"
        )
    if data[:2] == b"\x1f\x8b":
        raise CorpusError(f"'{source_name}' is gzip-compressed; decompress it first")
    is_parquet = data[:4] == b"PAR1"
    fmt = _FORMATS_BY_SUFFIX.get(suffix)
    if fmt == "parquet" and not is_parquet:
        raise CorpusError(f"'{source_name}' is named like a Parquet file but does not start with 'PAR1'")
    if fmt is not None and fmt != "parquet" and is_parquet:
        return "parquet"
    if fmt is not None:
        return fmt
    if is_parquet:
        return "parquet"
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"{") or head.startswith(b"["):
        return "jsonl"
    return "csv"


def _decode(data: bytes, label: str) -> tuple[str, str, str | None]:
    """Decode text bytes: UTF-8 (with or without BOM), else cp1252, else latin-1 with a warning."""
    for bom, enc in (
        (b"\xff\xfe\x00\x00", "UTF-32"),
        (b"\x00\x00\xfe\xff", "UTF-32"),
        (b"\xff\xfe", "UTF-16"),
        (b"\xfe\xff", "UTF-16"),
    ):
        if data.startswith(bom):
            raise CorpusError(f"{label} is {enc}-encoded (byte-order mark at the start); save it as UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise CorpusError(
            f"{label} contains a NUL byte (0x00) at line {line} (byte offset {nul}): "
            "it looks like a binary or UTF-16 file; save it as UTF-8 text"
        )
    if data.startswith(b"\xef\xbb\xbf"):
        body, encoding = data[3:], "utf-8-sig"
    else:
        body, encoding = data, "utf-8"
    try:
        return body.decode("utf-8"), encoding, None
    except UnicodeDecodeError as exc:
        offset = exc.start + (len(data) - len(body))
        bad = data[offset : offset + 1].hex().upper()
    line = data.count(b"\n", 0, offset) + 1
    for fallback in ("cp1252", "latin-1"):
        try:
            text = data.decode(fallback)
        except UnicodeDecodeError:
            continue
        warning = (
            f"{label} is not valid UTF-8 (first invalid byte 0x{bad} at byte offset {offset}, line {line}); "
            f"it was decoded as {fallback} instead. Check accented characters and re-save the file as "
            "UTF-8 if they look wrong."
        )
        return text, fallback, warning
    raise AssertionError("latin-1 decodes every byte string")  # pragma: no cover


def _read_parquet(data: bytes, label: str) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(data))
        frame = table.to_pandas()
    except Exception as exc:  # pyarrow raises many types (ArrowInvalid, OSError, ...) on corrupt input
        raise CorpusError(f"{label} is not a readable Parquet file: {exc}") from None
    frame = frame.reset_index(drop=True)
    frame.columns = [str(c) for c in frame.columns]
    _check_duplicate_columns(list(frame.columns), label)
    return frame


def _read_jsonl(text: str, label: str) -> pd.DataFrame:
    stripped = text.lstrip()
    records: list[dict] = []
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise CorpusError(f"{label} is not valid JSON: {exc}") from None
        if not isinstance(value, list):
            raise CorpusError(f"{label}: expected a JSON array of objects")
        for i, item in enumerate(value, start=1):
            if not isinstance(item, dict):
                raise CorpusError(
                    f"{label}: item {i} of the JSON array is a {type(item).__name__}, not an object"
                )
            records.append(item)
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(
                    f"{label}: line {lineno} is not valid JSON ({exc.msg} at column {exc.colno})"
                ) from None
            except RecursionError:
                raise CorpusError(f"{label}: line {lineno} is nested too deeply") from None
            if not isinstance(value, dict):
                raise CorpusError(
                    f"{label}: line {lineno} is a JSON {type(value).__name__}, not an object; "
                    'JSONL needs one object per line, like {"text": "..."}'
                )
            records.append(value)
    if not records:
        raise CorpusError(f"{label} has no rows")
    columns: dict[str, None] = {}
    for record in records:
        for key in record:
            columns.setdefault(str(key), None)
    cols = list(columns)
    rows = [[_json_cell(record.get(c, None)) for c in cols] for record in records]
    frame = pd.DataFrame(rows, columns=cols, dtype=object)
    return frame


def _json_cell(value: Any) -> Any:
    """JSON scalars become strings (so every format gives the same text); null stays missing."""
    if value is None:
        return np.nan
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float) and not math.isfinite(value):
        return np.nan
    if isinstance(value, int | float):
        return str(value)
    return value  # lists/dicts stay as they are; column checks reject them as text


def _read_delimited(text: str, label: str, *, prefer_tab: bool) -> tuple[pd.DataFrame, str | None]:
    delimiter = _sniff_delimiter(text, prefer_tab=prefer_tab)
    sep = delimiter
    if sep is None:
        sep = next((c for c in ("\x1f", "\x1e", "\x1d", "\x1c") if c not in text), None)
        if sep is None:
            raise CorpusError(f"{label}: could not find a column delimiter (tried , ; tab |)")
    header = _first_record(text, sep)
    _check_duplicate_columns([h.strip() for h in header], label)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = pd.read_csv(
                io.StringIO(text),
                sep=sep,
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                index_col=False,
                engine="c",
                quotechar='"',
                skip_blank_lines=True,
            )
    except pd.errors.EmptyDataError:
        raise CorpusError(f"{label} is empty: no header row found") from None
    except (ValueError, csv.Error, OverflowError, MemoryError) as exc:
        msg = str(exc).strip().replace("Error tokenizing data. C error: ", "")
        raise CorpusError(
            f"{label} could not be parsed as {'tab' if sep == chr(9) else repr(sep)}-delimited text: {msg}"
        ) from None
    for w in caught:
        if issubclass(w.category, pd.errors.ParserWarning):
            raise CorpusError(
                f"{label}: a data row has more fields than the header "
                f"({len(header)} columns: {_list_columns(header)}); quote cells that contain the delimiter"
            )
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame, delimiter


def _first_record(text: str, sep: str) -> list[str]:
    try:
        for row in csv.reader(io.StringIO(text[:_SNIFF_BYTES]), delimiter=sep, quotechar='"'):
            if row:
                return row
    except csv.Error:
        pass
    return []


def _check_duplicate_columns(columns: list[str], label: str) -> None:
    dupes = sorted({c for c, k in Counter(columns).items() if k > 1})
    if dupes:
        raise CorpusError(
            f"{label} has duplicate column names: {', '.join(repr(d) for d in dupes)}; rename them"
        )


def _sniff_delimiter(text: str, *, prefer_tab: bool) -> str | None:
    """Pick the delimiter among , tab ; | that splits the sample into a consistent number (>1) of fields.

    ``csv.Sniffer`` proposes one; it is kept when it is consistent on the sample, otherwise the
    consistent candidate with the most fields wins. None means a one-column file.
    """
    sample = text[:_SNIFF_BYTES]
    truncated = len(text) > len(sample)
    if truncated and "\n" in sample:
        sample = sample[: sample.rfind("\n") + 1]
    try:
        sniffed: str | None = csv.Sniffer().sniff(sample[:16384], delimiters="".join(_DELIMITERS)).delimiter
    except csv.Error:
        sniffed = None
    widths: dict[str, int] = {}
    for delim in _DELIMITERS:
        counts = _field_counts(sample, delim, drop_last=truncated)
        if counts and len(set(counts)) == 1 and counts[0] > 1:
            widths[delim] = counts[0]
    if prefer_tab and "\t" in widths:
        return "\t"
    if sniffed in widths:
        return sniffed
    if widths:
        order = {d: i for i, d in enumerate(_DELIMITERS)}
        return max(widths, key=lambda d: (widths[d], -order[d]))
    header = sample.split("\n", 1)[0]
    if sniffed is not None and sniffed in header:
        return sniffed
    present = [d for d in _DELIMITERS if d in header]
    if prefer_tab and "\t" in present:
        return "\t"
    return max(present, key=header.count) if present else None


def _field_counts(sample: str, delim: str, *, drop_last: bool) -> list[int]:
    counts: list[int] = []
    try:
        for row in csv.reader(io.StringIO(sample), delimiter=delim, quotechar='"', strict=False):
            if row:
                counts.append(len(row))
            if len(counts) > _SNIFF_RECORDS:
                break
    except csv.Error:
        return []
    if drop_last and len(counts) > 1 and len(counts) <= _SNIFF_RECORDS:
        counts = counts[:-1]
    return counts


# --------------------------------------------------------------------------------------------------
# Column detection
# --------------------------------------------------------------------------------------------------


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
    if all(_is_number(s) for s in strings[:1000]):
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
    if all(_is_number(s) for s in sample):
        if not all(re.fullmatch(r"[+-]?\d+(\.0+)?", s) for s in sample):
            return None
        return 1
    return 0


def _looks_like_id(name: str) -> bool:
    n = name.lower()
    return n in ("id", "idx", "index", "uuid", "guid", "key") or n.endswith("_id") or n.startswith("unnamed:")


def _is_number(s: str) -> bool:
    try:
        float(s)
    except (TypeError, ValueError):
        return False
    return True


# --------------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------------


def load_corpus(
    source: str | os.PathLike | bytes | BinaryIO,
    *,
    text_column: str | None = None,
    label_column: str | None | _Auto = AUTO,
    pair_columns: tuple[str, str, str] | None | _Auto = AUTO,
    drop_duplicates: bool = False,
    max_rows: int | None = None,
    seed: int = 0,
    name: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    min_texts: int = 2,
) -> Corpus:
    """Read ``source`` with :func:`read_table` and validate it into a :class:`Corpus`.

    ``text_column=None`` and the default ``AUTO`` of ``label_column``/``pair_columns`` detect the
    column with :func:`detect_columns`; ``label_column=None`` (or ``""``) loads without labels and
    ``pair_columns=None`` (or ``()``) ignores pair columns.
    Empty, NaN and whitespace-only texts are dropped and counted; duplicate texts are counted and
    dropped (first occurrence kept) only with ``drop_duplicates``. With ``max_rows``, that many
    texts are sampled without replacement (``numpy.random.default_rng(seed)``), kept in file order.
    A kept row with a missing label is rejected.
    """
    check_int(min_texts, "min_texts", min_value=1, error=CorpusError)
    check_int(max_rows, "max_rows", min_value=1, allow_none=True, error=CorpusError)
    check_int(seed, "seed", min_value=0, error=CorpusError)

    frame, info = read_table(source, name=name, max_bytes=max_bytes)
    src = f"'{info['source_name']}'"
    needs_detection = text_column is None or label_column is AUTO or pair_columns is AUTO
    detected = detect_columns(frame) if needs_detection else {}

    if text_column is None:
        text_column = detected.get("text")
        if text_column is None:
            raise CorpusError(
                f"{src}: no text column found among {_list_columns(frame.columns)} "
                "(no column holds non-numeric strings); choose one with text_column="
            )
    _require_column(frame, text_column, "text", src)

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
        pair_columns = (*pair_columns, None)[:3] if len(pair_columns) == 2 else tuple(pair_columns)  # type: ignore[arg-type]
        for col in pair_columns:
            if col is not None:
                _require_column(frame, col, "pair", src)

    if label_column is AUTO:
        label_column = detected.get("label")
        if label_column is not None and pair_columns is not None and label_column in pair_columns:
            label_column = None
    elif label_column == "":
        label_column = None
    if label_column is not None:
        _require_column(frame, label_column, "label", src)
        if label_column == text_column:
            raise CorpusError(
                f"{src}: the label column '{label_column}' is also the text column; choose another"
            )

    n_rows = len(frame)
    raw_texts = _text_values(frame[text_column], text_column, src)
    keep = [i for i, t in enumerate(raw_texts) if t is not None]
    n_empty = n_rows - len(keep)

    seen: set[str] = set()
    unique_keep: list[int] = []
    for i in keep:
        t = raw_texts[i]
        if t not in seen:
            seen.add(t)
            unique_keep.append(i)
    n_duplicates = len(keep) - len(unique_keep)
    if drop_duplicates:
        keep = unique_keep

    labels_all: list[str | None] | None = None
    if label_column is not None:
        labels_all = _label_values(frame[label_column])
        missing = [i for i in keep if labels_all[i] is None]
        if missing:
            raise CorpusError(
                f"{src}: label column '{label_column}' is empty on {len(missing)} of {len(keep)} kept rows "
                f"({_rows_desc(missing)}); fill those labels, drop the rows, or load without labels "
                "(label_column=None)"
            )

    n_before_sampling = len(keep)
    if max_rows is not None and max_rows < len(keep):
        rng = np.random.default_rng(seed)
        chosen = np.sort(rng.choice(len(keep), size=max_rows, replace=False))
        keep = [keep[int(j)] for j in chosen]
    n_sampled_out = n_before_sampling - len(keep)

    if len(keep) < min_texts:
        raise CorpusError(
            f"{src}: only {len(keep)} usable text(s) in column '{text_column}' "
            f"({n_rows} rows read, {n_empty} empty dropped"
            + (f", {n_duplicates} duplicates dropped" if drop_duplicates and n_duplicates else "")
            + f"); at least {min_texts} are needed"
        )

    texts = [raw_texts[i] for i in keep]
    labels = [labels_all[i] for i in keep] if labels_all is not None else None
    pairs, n_pairs_dropped = (
        _pairs_frame(frame, pair_columns, keep, src) if pair_columns is not None else (None, 0)
    )

    stats = {
        "n_rows_read": n_rows,
        "n_empty_dropped": n_empty,
        "n_duplicates": n_duplicates,
        "duplicates_dropped": bool(drop_duplicates),
        "n_sampled_out": n_sampled_out,
        "n_pairs_dropped": n_pairs_dropped,
        "encoding": info["encoding"],
        "encoding_warning": info["encoding_warning"],
        "delimiter": info["delimiter"],
        "format": info["format"],
    }
    return Corpus(
        texts=texts,
        ids=list(keep),
        labels=labels,  # type: ignore[arg-type]  # no None left after the check above
        pairs=pairs,
        text_column=text_column,
        label_column=label_column,
        content_hash=_content_hash(texts, labels),  # type: ignore[arg-type]
        source_name=info["source_name"],
        stats=stats,
    )


def _require_column(frame: pd.DataFrame, column: Any, role: str, src: str) -> None:
    if not isinstance(column, str) or column not in frame.columns:
        raise CorpusError(
            f"{src}: {role} column {column!r} not found; available columns: {_list_columns(frame.columns)}"
        )


def _list_columns(columns: Any) -> str:
    cols = [str(c) for c in columns]
    shown = ", ".join(repr(c) for c in cols[:30])
    return shown + (f" and {len(cols) - 30} more" if len(cols) > 30 else "")


def _rows_desc(ids: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(i + 1) for i in ids[:limit])
    word = "row" if len(ids) == 1 else "rows"
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"{word} {shown}{more}"


def _text_values(series: pd.Series, column: str, src: str, ids: list[int] | None = None) -> list[str | None]:
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
            f"{src}: column '{column}' holds lists or objects, not text, on {_rows_desc(non_text)}"
        )
    if nul:
        raise CorpusError(f"{src}: column '{column}' contains a NUL character on {_rows_desc(nul)}")
    present = [t for t in out if t is not None]
    if present and all(_is_number(t) for t in present):
        raise CorpusError(
            f"{src}: column '{column}' holds only numbers, not text; choose another text column"
        )
    return out


def _label_values(series: pd.Series) -> list[str | None]:
    out: list[str | None] = []
    for value in series.tolist():
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            out.append(None)
            continue
        text = str(value).strip()
        out.append(text if text else None)
    return out


def _pairs_frame(
    frame: pd.DataFrame, columns: tuple[str, str, str], keep: list[int], src: str
) -> tuple[pd.DataFrame | None, int]:
    a_col, b_col, s_col = columns
    sub = frame.iloc[keep]
    if s_col is None:  # retrieval pairs (query, document): no score
        a = _text_values(sub[a_col], a_col, src, keep)
        b = _text_values(sub[b_col], b_col, src, keep)
        rows = [
            (i, ta, tb, np.nan)
            for i, ta, tb in zip(keep, a, b, strict=True)
            if ta is not None and tb is not None
        ]
        pairs = pd.DataFrame(rows, columns=["id", "text_a", "text_b", "score"]).set_index("id")
        pairs["score"] = pairs["score"].astype(float)
        return pairs, len(keep) - len(rows)
    scores = pd.to_numeric(sub[s_col], errors="coerce")
    bad = [
        int(i)
        for i, v, s in zip(keep, sub[s_col].tolist(), scores.tolist(), strict=True)
        if pd.notna(v) and not np.isfinite(s)
    ]
    if bad:
        raise CorpusError(f"{src}: score column '{s_col}' is not a number on {_rows_desc(bad)}")
    a = _text_values(sub[a_col], a_col, src, keep)
    b = _text_values(sub[b_col], b_col, src, keep)
    rows = [
        (i, ta, tb, float(s))
        for i, ta, tb, s in zip(keep, a, b, scores.tolist(), strict=True)
        if ta is not None and tb is not None and np.isfinite(s)
    ]
    pairs = pd.DataFrame(rows, columns=["id", "text_a", "text_b", "score"]).set_index("id")
    pairs["score"] = pairs["score"].astype(float)
    return pairs, len(keep) - len(rows)


def _content_hash(texts: list[str], labels: list[str] | None) -> str:
    """SHA-256 hex of the kept texts (and labels), length-prefixed UTF-8, in order."""
    h = hashlib.sha256(_HASH_PREFIX)
    h.update(b"L" if labels is not None else b"U")
    for i, text in enumerate(texts):
        for part in (text,) if labels is None else (text, labels[i]):
            encoded = part.encode("utf-8", "surrogatepass")
            h.update(len(encoded).to_bytes(8, "big"))
            h.update(encoded)
    return h.hexdigest()


def corpus_summary(corpus: Corpus) -> dict:
    """Counts and length statistics: ``n_texts``, ``n_labels``, ``label_counts`` and
    mean/median/max characters and words per text."""
    if not isinstance(corpus, Corpus):
        raise CorpusError(f"corpus_summary needs a Corpus, got {type(corpus).__name__}")
    chars = [len(t) for t in corpus.texts]
    words = [len(t.split()) for t in corpus.texts]
    counts = Counter(corpus.labels) if corpus.labels is not None else Counter()
    return {
        "n_texts": len(corpus.texts),
        "n_labels": len(counts),
        "label_counts": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "mean_chars": float(np.mean(chars)) if chars else 0.0,
        "median_chars": float(statistics.median(chars)) if chars else 0.0,
        "max_chars": int(max(chars)) if chars else 0,
        "mean_words": float(np.mean(words)) if words else 0.0,
        "median_words": float(statistics.median(words)) if words else 0.0,
        "max_words": int(max(words)) if words else 0,
        "n_duplicates": int(corpus.stats.get("n_duplicates", 0)),
    }
