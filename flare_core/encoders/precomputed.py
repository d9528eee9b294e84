"""Embeddings a user computed elsewhere and uploads as ``.npy`` or Parquet."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np

from flare_core.checks import check_int
from flare_core.encoders.base import EncoderBase, ModelSpec, ProgressFn

_NPY_MAGIC = b"\x93NUMPY"
_PARQUET_MAGIC = b"PAR1"


def _read_source(source: str | Path | bytes | bytearray | memoryview, name: str) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"{name}: no such file {str(path)!r}")
        return path.read_bytes()
    raise ValueError(f"{name}: source must be a path or bytes, got {type(source).__name__}")


def _load_npy(data: bytes, name: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise ValueError(
                f"{name}: the .npy file holds a pickled object array; pickles are never loaded. "
                "Save a numeric array instead, e.g. np.save(path, emb.astype('float32'), allow_pickle=False)"
            ) from None
        raise ValueError(f"{name}: not a readable .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise ValueError(f"{name}: not a readable .npy file ({exc})") from None


def _load_parquet(data: bytes, name: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{name}: not a readable Parquet file ({exc})") from None
    if table.num_columns == 0:
        raise ValueError(f"{name}: the Parquet file has no columns")
    types = table.schema.types
    if table.num_columns == 1 and (
        pa.types.is_list(types[0])
        or pa.types.is_large_list(types[0])
        or pa.types.is_fixed_size_list(types[0])
    ):
        column = table.column(0).combine_chunks()
        if column.null_count:
            raise ValueError(f"{name}: column {table.column_names[0]!r} has {column.null_count} missing rows")
        values_type = types[0].value_type
        if not (pa.types.is_integer(values_type) or pa.types.is_floating(values_type)):
            raise ValueError(
                f"{name}: column {table.column_names[0]!r} holds lists of {values_type}, expected numbers"
            )
        lengths = np.asarray(column.value_lengths(), dtype=np.int64) if len(column) else np.zeros(0, np.int64)
        if len(lengths) and (lengths != lengths[0]).any():
            raise ValueError(
                f"{name}: rows of column {table.column_names[0]!r} have different lengths "
                f"({int(lengths.min())} to {int(lengths.max())}); every row must be one vector of the same "
                "size"
            )
        dim = int(lengths[0]) if len(lengths) else 0
        flat = column.flatten().to_numpy(zero_copy_only=False)
        if flat.dtype == object:  # nulls inside the lists
            raise ValueError(f"{name}: column {table.column_names[0]!r} has missing values inside its lists")
        return np.asarray(flat, dtype=np.float64).reshape(len(column), dim)
    bad = [
        f"{col} ({typ})"
        for col, typ in zip(table.column_names, types, strict=True)
        if not (pa.types.is_integer(typ) or pa.types.is_floating(typ))
    ]
    if bad:
        raise ValueError(
            f"{name}: Parquet columns must all be numeric (or one list column); non-numeric: {', '.join(bad)}"
        )
    columns = []
    for col in table.column_names:
        arr = table.column(col).to_numpy()  # nulls become NaN for floats, or float64 with NaN for ints
        columns.append(np.asarray(arr, dtype=np.float64))
    return np.stack(columns, axis=1) if columns else np.zeros((table.num_rows, 0))


def load_precomputed(source: str | Path | bytes, *, n_rows: int | None, name: str) -> np.ndarray:
    """Load an uploaded embedding matrix and check it: float32 array of shape (n_rows, d).

    ``source`` is a path or the file's bytes, either ``.npy`` (loaded with ``allow_pickle=False``) or
    Parquet (all columns numeric — one dimension each — or a single list column of equal-length
    vectors). The format is recognised from the file's first bytes. Raises ``ValueError`` naming
    ``name`` when the array is not 2-D, has the wrong number of rows, a non-numeric dtype, NaN or
    infinite values, zero columns, or is a pickle. ``n_rows=None`` checks the file alone (any number of
    rows, at least one).
    """
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    check_int(n_rows, f"{name}: n_rows", min_value=1, allow_none=True)
    data = _read_source(source, name)
    if data.startswith(_NPY_MAGIC):
        arr = _load_npy(data, name)
    elif data.startswith(_PARQUET_MAGIC):
        arr = _load_parquet(data, name)
    elif data[:2] == b"PK":
        raise ValueError(f"{name}: .npz archives are not accepted; upload one .npy array or a Parquet file")
    else:
        raise ValueError(f"{name}: not a .npy or Parquet file (unrecognised first bytes)")
    return _check_upload(arr, n_rows=None if n_rows is None else int(n_rows), name=name)


def _check_upload(arr: np.ndarray, *, n_rows: int | None, name: str) -> np.ndarray:
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name}: embeddings must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind == "b":
        raise ValueError(f"{name}: embeddings must be numeric, got booleans")
    if arr.ndim != 2:
        raise ValueError(f"{name}: embeddings must be a 2-D array (rows × dimensions), got shape {arr.shape}")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise ValueError(f"{name}: has {arr.shape[0]} rows but the corpus has {n_rows} texts")
    if arr.shape[0] < 1:
        raise ValueError(f"{name}: has no rows")
    if arr.shape[1] < 1:
        raise ValueError(f"{name}: has 0 dimensions (columns)")
    if arr.dtype.kind == "f":
        nan = np.isnan(arr)
        if nan.any():
            rows = np.flatnonzero(nan.any(axis=1))
            raise ValueError(
                f"{name}: has {int(nan.sum())} NaN values (in {len(rows)} rows, first row {rows[0]})"
            )
        inf = np.isinf(arr)
        if inf.any():
            rows = np.flatnonzero(inf.any(axis=1))
            raise ValueError(
                f"{name}: has {int(inf.sum())} infinite values (in {len(rows)} rows, first row {rows[0]})"
            )
    if arr.size and np.abs(arr).max() > np.finfo(np.float32).max:
        raise ValueError(f"{name}: values exceed the float32 range (|x| > 3.4e38)")
    out = arr.astype(np.float32)
    if out.shape[0] > 1 and (out == out[0]).all():
        raise ValueError(
            f"{name}: every row is the same vector, so it tells no text from another; check how it was made"
        )
    return np.ascontiguousarray(out)


def array_hash(arr: np.ndarray) -> str:
    """sha256 of an array's dtype, shape and bytes."""
    h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


class PrecomputedEncoder(EncoderBase):
    """Wraps an uploaded matrix (N, d) as an ``Encoder`` for the corpus it was computed on."""

    pooling = "precomputed"

    def __init__(self, name: str, embeddings: np.ndarray, *, licence: str = "user-supplied") -> None:
        arr = _check_upload(np.asarray(embeddings), n_rows=len(embeddings), name=name)
        self.embeddings = arr
        self.spec = ModelSpec(
            id=name,
            dim=int(arr.shape[1]),
            layers=None,
            max_tokens=None,
            source="precomputed",
            licence=licence,
            kind="precomputed",
            description=f"uploaded embeddings ({arr.shape[0]} × {arr.shape[1]})",
            revision=array_hash(arr)[:16],
        )

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """The stored matrix, float32 (N, d); ``texts`` must be the N texts it was computed on."""
        if len(texts) != self.embeddings.shape[0]:
            raise ValueError(
                f"{self.spec.id}: precomputed embeddings have {self.embeddings.shape[0]} rows, "
                f"but {len(texts)} texts were given"
            )
        if progress is not None:
            progress(len(texts), len(texts))
        return self.embeddings.copy()
