"""Reading a table a person uploaded (CSV/TSV, Parquet, JSONL) without interpreting its cells.

The format comes from the file name or is sniffed from the content; text is decoded as UTF-8 (with or
without BOM), else cp1252 or latin-1 with a visible warning; CSV delimiters are sniffed among
``, tab ; |``. Every rejection raises :class:`~flare_core.errors.CorpusError` naming the file and,
where it applies, the line (1-based lines of the file). Nothing is evaluated or unpickled.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from flare_core.checks import check_int
from flare_core.errors import CorpusError

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
#: The most columns a table may have: a corpus needs a few; a wider file is refused before it is parsed.
MAX_COLUMNS = 2_000
_DELIMITERS = (",", "\t", ";", "|")
_SNIFF_BYTES = 64 * 1024
#: How every delimited file is parsed: cells as strings, only empty cells missing, nothing evaluated.
CSV_OPTIONS: dict[str, Any] = {
    "dtype": str,
    "keep_default_na": False,
    "na_values": [""],
    "index_col": False,
    "engine": "c",
    "quotechar": '"',
    "skip_blank_lines": True,
}
#: Characters that split nothing, used as the delimiter of a one-column file (the first absent one).
ONE_COLUMN_SEPARATORS = ("\x1f", "\x1e", "\x1d", "\x1c")
_SNIFF_RECORDS = 200
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


def read_table(
    source: str | os.PathLike | bytes | BinaryIO,
    *,
    name: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_columns: int = MAX_COLUMNS,
) -> tuple[pd.DataFrame, dict]:
    """Read a CSV/TSV, Parquet or JSONL table without interpreting its cells.

    ``source`` is a path, the file's bytes, or a binary file object (read from its current
    position). The size is checked against ``max_bytes`` before the content is read, the number of
    columns against ``max_columns`` before the rows are (from the whole header row, the Parquet schema,
    or the keys of every JSON record). The format comes from the suffix of ``name`` (or of the path),
    else it is sniffed from the content.

    Returns ``(frame, info)``: CSV/TSV/JSONL cells are strings (missing/empty cells are NaN), and
    ``info`` has ``format``, ``encoding``, ``encoding_warning`` (str or None), ``delimiter``
    (str, or None for non-CSV or one-column files) and ``n_bytes``.
    """
    check_int(max_bytes, "max_bytes", min_value=1, error=CorpusError)
    check_int(max_columns, "max_columns", min_value=1, error=CorpusError)
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
        frame = _read_parquet(data, label, max_columns)
        info["encoding"] = "parquet"
    else:
        text, encoding, warning = _decode(data, label)
        info["encoding"], info["encoding_warning"] = encoding, warning
        if not text.strip():
            raise CorpusError(f"{label} is empty: it contains only whitespace")
        if fmt == "jsonl":
            frame = _read_jsonl(text, label, max_columns)
        else:
            frame, delimiter = _read_delimited(text, label, max_columns, prefer_tab=fmt == "tsv")
            info["delimiter"] = delimiter
            fmt = "tsv" if delimiter == "\t" else "csv"
    info["format"] = fmt
    if frame.shape[1] == 0:
        raise CorpusError(f"{label} has no columns")
    if len(frame) == 0:
        raise CorpusError(
            f"{label} has no rows (only a header with columns {list_columns(frame.columns)})"
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


def _check_width(n_columns: int, label: str, max_columns: int) -> None:
    if n_columns > max_columns:
        raise CorpusError(f"{label} has {n_columns:,} columns; at most {max_columns:,} are read")


def _read_parquet(data: bytes, label: str, max_columns: int) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        width = len(pq.read_schema(io.BytesIO(data)).names)
    except Exception as exc:  # pyarrow raises many types (ArrowInvalid, OSError, ...) on corrupt input
        raise CorpusError(f"{label} is not a readable Parquet file: {exc}") from None
    _check_width(width, label, max_columns)
    try:
        table = pq.read_table(io.BytesIO(data))
        frame = table.to_pandas()
    except Exception as exc:  # pyarrow raises many types (ArrowInvalid, OSError, ...) on corrupt input
        raise CorpusError(f"{label} is not a readable Parquet file: {exc}") from None
    frame = frame.reset_index(drop=True)
    frame.columns = [str(c) for c in frame.columns]
    _check_duplicate_columns(list(frame.columns), label)
    return frame


def _read_jsonl(text: str, label: str, max_columns: int) -> pd.DataFrame:
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
    _check_width(len(cols), label, max_columns)
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


def _read_delimited(
    text: str, label: str, max_columns: int, *, prefer_tab: bool
) -> tuple[pd.DataFrame, str | None]:
    delimiter = _sniff_delimiter(text, prefer_tab=prefer_tab)
    sep = delimiter
    if sep is None:
        sep = next((c for c in ONE_COLUMN_SEPARATORS if c not in text), None)
        if sep is None:
            raise CorpusError(f"{label}: could not find a column delimiter (tried , ; tab |)")
    header = _first_record(text, sep)
    _check_width(len(header), label, max_columns)
    _check_duplicate_columns([h.strip() for h in header], label)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = pd.read_csv(  # from UTF-8 bytes: a StringIO would hold 4 bytes per character
                io.BytesIO(text.encode("utf-8")), encoding="utf-8", sep=sep, **CSV_OPTIONS
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
                f"({len(header)} columns: {list_columns(header)}); quote cells that contain the delimiter"
            )
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame, delimiter


def _first_record(text: str, sep: str) -> list[str]:
    """The header row, whole however long it is (its lines are read one at a time, not the file)."""
    try:
        for row in csv.reader(_lines(text), delimiter=sep, quotechar='"'):
            if row:
                return row
    except csv.Error:
        pass
    return []


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` with their line ends, one at a time."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


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


def list_columns(columns: Any) -> str:
    cols = [str(c) for c in columns]
    shown = ", ".join(repr(c) for c in cols[:30])
    return shown + (f" and {len(cols) - 30} more" if len(cols) > 30 else "")
