"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename.

A reader never sees a half-written file; a writer killed mid-way leaves only a ``.tmp-*`` file
that readers ignore.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` then rename ``tmp_path`` onto ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write strict JSON (NaN and infinities become ``null``)."""
    return write_text(path, to_json(obj))


def to_json(obj: Any, indent: int | None = 2) -> str:
    """Serialise to strict JSON: numpy scalars/arrays become Python values, NaN/inf become ``null``."""
    return json.dumps(_finite(obj), indent=indent, sort_keys=True, default=_json_default, allow_nan=False)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float | np.floating):
        value = float(obj)
        return value if np.isfinite(value) else None
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def write_npy(path: str | os.PathLike, array: np.ndarray) -> Path:
    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(array), allow_pickle=False)

    return atomic_write(path, _write)


def write_parquet(path: str | os.PathLike, frame: Any) -> Path:
    """Write a pandas DataFrame as Parquet (pyarrow engine), atomically."""
    return atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))


def read_npy(path: str | os.PathLike) -> np.ndarray:
    """Load a ``.npy`` file, refusing pickled object arrays."""
    return np.load(path, allow_pickle=False)


def copy_file(src: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Copy the file ``src`` to ``path`` atomically (the kernel copies; nothing is read into memory)."""
    return atomic_write(path, lambda tmp: shutil.copyfile(src, tmp))


# ---------------------------------------------------------------------------- streamed .npy files

_NPY_MAGIC = b"\x93NUMPY\x01\x00"
_NPY_PREFIX = len(_NPY_MAGIC) + 2  # magic, version, little-endian uint16 header length
_NPY_ALIGN = 64
_MAX_ROWS_DIGITS = len(str(2**63 - 1))


def _npy_dict(shape: tuple[int, ...], dtype: np.dtype) -> str:
    descr = np.lib.format.dtype_to_descr(dtype)
    return f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {tuple(int(n) for n in shape)!r}, }}"


def _npy_header_size(shape: tuple[int | None, ...], dtype: np.dtype) -> int:
    """Bytes reserved for a version 1.0 header that fits any number of rows (a multiple of 64)."""
    widest = (int("9" * _MAX_ROWS_DIGITS), *shape[1:])
    need = _NPY_PREFIX + len(_npy_dict(widest, dtype)) + 1
    return -(-need // _NPY_ALIGN) * _NPY_ALIGN


def _npy_header(shape: tuple[int, ...], dtype: np.dtype, size: int) -> bytes:
    """A version 1.0 ``.npy`` header of exactly ``size`` bytes (the dictionary padded with spaces)."""
    text = _npy_dict(shape, dtype)
    body = size - _NPY_PREFIX
    if len(text) + 1 > body or body > 0xFFFF:
        raise ValueError(f"an .npy header for shape {shape} does not fit in {size} bytes")
    return _NPY_MAGIC + struct.pack("<H", body) + (text.ljust(body - 1) + "\n").encode("latin1")


class NpyWriter:
    """Appends rows to a C-ordered ``.npy`` array being written; made by :func:`open_npy_writer`.

    Attributes:
        shape: the shape given when opening (``shape[0]`` is ``None`` when the row count is left open).
        dtype: the stored dtype.
        rows: rows written so far.
    """

    def __init__(self, fh: Any, shape: tuple[int | None, ...], dtype: np.dtype) -> None:
        self._fh = fh
        self.shape = shape
        self.dtype = dtype
        self.rows = 0

    @property
    def row_shape(self) -> tuple[int, ...]:
        """The shape of one row, ``shape[1:]``."""
        return tuple(int(n) for n in self.shape[1:])

    def write(self, rows: ArrayLike) -> None:
        """Append ``rows``, an array of shape ``(m, *row_shape)`` cast to ``dtype`` (same kind only)."""
        arr = np.asarray(rows)
        if arr.ndim != len(self.shape) or arr.shape[1:] != self.row_shape:
            raise ValueError(f"rows of shape {arr.shape} do not fit an array of shape {self.shape}")
        if not np.can_cast(arr.dtype, self.dtype, casting="same_kind"):
            raise ValueError(f"cannot store {arr.dtype} rows in a {self.dtype} array")
        total = self.shape[0]
        if total is not None and self.rows + arr.shape[0] > total:
            raise ValueError(f"{self.rows + arr.shape[0]} rows written to an array of {total} rows")
        arr = np.ascontiguousarray(arr, dtype=self.dtype)
        if arr.size:
            self._fh.write(memoryview(arr).cast("B"))
        self.rows += arr.shape[0]


def _check_npy_shape(shape: Any) -> tuple[int | None, ...]:
    if not isinstance(shape, tuple | list) or not shape:
        raise ValueError(f"shape must be a non-empty tuple, got {shape!r}")
    out: list[int | None] = []
    for k, n in enumerate(shape):
        if n is None and k == 0:
            out.append(None)
        elif isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise ValueError(f"shape must hold non-negative integers (shape[0] may be None), got {shape!r}")
        else:
            out.append(int(n))
    return tuple(out)


@contextlib.contextmanager
def open_npy_writer(
    path: str | os.PathLike, shape: tuple[int | None, ...], dtype: Any = np.float32
) -> Iterator[NpyWriter]:
    """Write a ``.npy`` file row block by row block, atomically.

    ``shape[0]`` is the number of rows, or ``None`` when it is known only at the end. The rows go
    to a temporary file in the same folder behind a header reserved at a fixed size; on a clean
    exit the header is rewritten with the rows written (which must equal ``shape[0]`` when given),
    the file is fsynced and renamed onto ``path``. On any exception (``KeyboardInterrupt`` too) the
    temporary file is removed and ``path`` is left as it was. The result loads with ``np.load``,
    ``mmap_mode="r"`` included.

    Example::

        with open_npy_writer("emb.npy", (n, d), np.float32) as out:
            for block in blocks:  # (m, d) each
                out.write(block)
    """
    shape = _check_npy_shape(shape)
    dt = np.dtype(dtype)
    if dt.hasobject or dt.kind not in "biufc":
        raise ValueError(f"dtype must be a numeric dtype, got {dt}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    size = _npy_header_size(shape, dt)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_npy_header((0, *shape[1:]), dt, size))
            writer = NpyWriter(fh, shape, dt)
            yield writer
            if shape[0] is not None and writer.rows != shape[0]:
                raise ValueError(f"{writer.rows} rows written to an array of {shape[0]} rows")
            fh.seek(0)
            fh.write(_npy_header((writer.rows, *shape[1:]), dt, size))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def npy_blocks(path: str | os.PathLike, max_bytes: int = 8 << 20) -> Iterator[np.ndarray]:
    """Read a C-ordered ``.npy`` file in blocks of whole rows of at most ``max_bytes`` (one row at least).

    Blocks are read with ordinary file reads (nothing stays mapped into memory); each is an array of
    shape ``(m, *shape[1:])``. Raises ``ValueError`` for Fortran-ordered, object or truncated files.
    """
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"{path}: unsupported .npy version {version}")
        if fortran or dtype.hasobject or not shape:
            raise ValueError(f"{path}: not a C-ordered numeric array with rows")
        row_shape = tuple(shape[1:])
        row_bytes = dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
        step = max(1, max_bytes // max(row_bytes, 1))
        for start in range(0, shape[0], step):
            m = min(step, shape[0] - start)
            data = fh.read(m * row_bytes)
            if len(data) != m * row_bytes:
                raise ValueError(f"{path}: the file ends before row {start + len(data) // max(row_bytes, 1)}")
            yield np.frombuffer(data, dtype=dtype).reshape((m, *row_shape))


# ---------------------------------------------------------------------------- folders


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; on a clean exit rename it onto ``path``.

    A reader sees either no folder, the previous one, or the complete new one. On any exception
    (``KeyboardInterrupt`` too) the temporary folder is removed. An existing non-empty ``path``
    raises ``FileExistsError`` unless ``overwrite`` (then the old folder is swapped out and deleted).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a folder")
    if not overwrite and path.is_dir() and any(path.iterdir()):
        raise FileExistsError(f"{path} exists and is not empty")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}-", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_UMASK)
        old = None
        if path.is_dir() and any(path.iterdir()):
            if not overwrite:
                raise FileExistsError(f"{path} exists and is not empty")
            old = Path(tempfile.mkdtemp(prefix=f".tmp-old-{path.name}-", dir=path.parent))
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")
