"""Training data read one mini-batch at a time: standardised rows of an array or a memory-mapped ``.npy``.

The estimators train on ``torch.Tensor`` inputs held in memory, or on :class:`StandardizedRows`, which
keeps only the row indices and the standardisation statistics and gathers ``(x[rows[p]] - mean) / std``
for the positions ``p`` of each mini-batch. A batch is the same float32 values the in-memory path would
produce (the same float64 elementwise arithmetic), so both paths give bit-identical fits. Pickling a
:class:`StandardizedRows` over a memory-mapped file sends the file's path, not its data, so a task in
another process or on another machine with the same file system reads the rows it needs itself.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import numpy as np
import torch


class StandardizedRows:
    """Rows ``rows`` (m,) of ``x`` (n, d), standardised with ``mean`` and ``std`` (d,) float64 on the fly,
    then projected on ``projection`` (d, k) when given (PCA whitening, :mod:`._whiten`).

    ``take(positions (b,))`` returns float32 (b, k) equal to ``whiten(x, mean, std,
    projection)[rows][positions]``. ``x`` may be an ``np.memmap`` opened from a ``.npy`` file (``np.load(path,
    mmap_mode="r")``).
    """

    def __init__(
        self,
        x: np.ndarray,
        rows: np.ndarray,
        mean: np.ndarray,
        std: np.ndarray,
        projection: np.ndarray | None = None,
    ) -> None:
        if np.ndim(x) != 2:
            raise ValueError(f"x must be a 2-D array (n, d), got shape {np.shape(x)}")
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 1 or (len(rows) and (rows.min() < 0 or rows.max() >= x.shape[0])):
            raise ValueError(f"rows must be 1-D indices into {x.shape[0]} rows")
        mean = np.asarray(mean, dtype=np.float64)
        std = np.asarray(std, dtype=np.float64)
        if mean.shape != (x.shape[1],) or std.shape != (x.shape[1],):
            raise ValueError(
                f"mean and std must have shape ({x.shape[1]},), got {mean.shape} and {std.shape}"
            )
        if projection is not None:
            projection = np.asarray(projection, dtype=np.float64)
            if projection.ndim != 2 or projection.shape[0] != x.shape[1]:
                raise ValueError(f"projection must have shape ({x.shape[1]}, k), got {projection.shape}")
        self._x = x
        self.rows = rows
        self.mean = mean
        self.std = std
        self.projection = projection

    @property
    def shape(self) -> tuple[int, int]:
        width = self._x.shape[1] if self.projection is None else self.projection.shape[1]
        return (len(self.rows), int(width))

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, positions: np.ndarray | slice) -> np.ndarray:
        """Standardised (and projected) rows at ``positions`` (indices into ``rows``, or a slice): float32 (b,
        k)."""
        z = (np.asarray(self._x[self.rows[positions]], dtype=np.float64) - self.mean) / self.std
        return (z if self.projection is None else z @ self.projection).astype(np.float32)

    def to_array(self) -> np.ndarray:
        """All rows, standardised: float32 (m, d) in memory."""
        return self.take(slice(None))

    def __getstate__(self) -> dict[str, Any]:
        state = {"rows": self.rows, "mean": self.mean, "std": self.std, "projection": self.projection}
        path = _npy_path(self._x)
        if path is not None:
            state["path"] = path
        else:
            state["x"] = np.asarray(self._x)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.rows, self.mean, self.std = state["rows"], state["mean"], state["std"]
        self.projection = state.get("projection")
        self._x = np.load(state["path"], mmap_mode="r", allow_pickle=False) if "path" in state else state["x"]


def _npy_path(x: np.ndarray) -> str | None:
    """The ``.npy`` file ``x`` maps in full, read-only, or None for any other array.

    Only the array ``np.load(path, mmap_mode="r")`` returned qualifies: a view of it (a slice, a reversed
    or transposed one) keeps the file name but not the file's layout, so it travels as data.
    """
    if not isinstance(x, np.memmap) or not x.filename or x.mode != "r":
        return None
    if not isinstance(x.base, mmap.mmap) or not x.flags.c_contiguous:
        return None
    path = Path(x.filename)
    try:
        reopened = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    same = reopened.shape == x.shape and reopened.dtype == x.dtype and reopened.offset == x.offset
    return str(path) if same else None


TrainingData = torch.Tensor | StandardizedRows


def n_rows(data: TrainingData) -> int:
    return int(data.shape[0])


def gather(data: TrainingData, index: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Rows ``index`` (b,) of ``data`` as a float32 (b, d) tensor on ``device``."""
    if isinstance(data, torch.Tensor):
        return data[index]
    positions = index.detach().to("cpu").numpy()
    return torch.from_numpy(data.take(positions)).to(device)


def row_slice(data: TrainingData, start: int, stop: int, device: torch.device) -> torch.Tensor:
    """Rows ``start:stop`` of ``data`` as a float32 tensor on ``device``."""
    if isinstance(data, torch.Tensor):
        return data[start:stop]
    return torch.from_numpy(data.take(slice(start, stop))).to(device)


def as_training_data(x: np.ndarray | StandardizedRows, device: torch.device) -> TrainingData:
    """A standardised (n, d) array as a float32 tensor on ``device``; :class:`StandardizedRows` as is."""
    if isinstance(x, StandardizedRows):
        return x
    return torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32), device=device)
