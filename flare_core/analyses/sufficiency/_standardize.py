"""Private helpers shared by the estimators: standardisation, seed derivation, data splits."""

from __future__ import annotations

import hashlib
import json

import numpy as np

_MIN_STD = 1e-8
_CHUNK_ROWS = 8192


def _fit_standardizer(x: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and std of ``x[rows]`` (all rows when None), both (d,) float64.

    ``x`` (n, d) may be memory-mapped: it is read 8192 rows at a time, in two float64 passes (the mean,
    then the mean squared deviation), so with at most 8192 rows the result is exactly
    ``x[rows].mean(0)`` and ``x[rows].std(0)``. A std below 1e-8 is replaced by 1.
    """
    rows = np.arange(x.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    n = len(rows)
    if n == 0:
        raise ValueError("cannot standardise zero rows")
    blocks = range(0, n, _CHUNK_ROWS)
    total = np.zeros(x.shape[1], dtype=np.float64)
    for start in blocks:
        total += np.asarray(x[rows[start : start + _CHUNK_ROWS]], dtype=np.float64).sum(axis=0)
    mean = total / n
    squares = np.zeros(x.shape[1], dtype=np.float64)
    for start in blocks:
        dev = np.asarray(x[rows[start : start + _CHUNK_ROWS]], dtype=np.float64) - mean
        squares += np.multiply(dev, dev).sum(axis=0)
    std = np.sqrt(squares / n)
    std = np.where(std < _MIN_STD, 1.0, std)
    return mean, std


def _standardize(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` for ``x`` (n, d); returns float32 (n, d)."""
    return ((np.asarray(x, dtype=np.float64) - mean) / std).astype(np.float32)


def _derive_seed(seed: int, *parts: object) -> int:
    """A 31-bit seed derived from ``seed`` and ``parts`` with SHA-256 (stable across processes)."""
    payload = json.dumps([int(seed), *[str(p) for p in parts]], ensure_ascii=False).encode("utf-8")
    return int.from_bytes(hashlib.sha256(payload).digest()[:4], "little") & 0x7FFFFFFF


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/validation split of ``range(n)``: ``(train_idx, val_idx)``, sorted int64 arrays."""
    rng = np.random.default_rng(_derive_seed(seed, "split"))
    perm = rng.permutation(n)
    n_val = max(1, int(round(n * val_fraction)))
    return np.sort(perm[n_val:]).astype(np.int64), np.sort(perm[:n_val]).astype(np.int64)
