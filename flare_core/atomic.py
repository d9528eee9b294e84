"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename.

A reader never sees a half-written file; a writer killed mid-way leaves only a ``.tmp-*`` file
that readers ignore.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

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


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")
