"""Private helpers shared by the estimators: standardisation, seed derivation, data splits."""

from __future__ import annotations

import hashlib
import json

import numpy as np

_MIN_STD = 1e-8


def _check_matrix(name: str, x: np.ndarray, d: int | None = None) -> np.ndarray:
    """``x`` as a contiguous float32 (n, d) array with n ≥ 2, d ≥ 1 (and ``d`` columns when given), finite."""
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n, d), got shape {arr.shape}")
    if arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 rows and 1 column, got shape {arr.shape}")
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} has {arr.shape[1]} columns, expected {d}")
    if not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr).all():
        raise ValueError(f"{name} must be numeric and finite")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _fit_standardizer(x_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and std of ``x_train`` (n, d); a std below 1e-8 is replaced by 1.

    Returns ``(mean, std)``, both (d,) float64.
    """
    x = np.asarray(x_train, dtype=np.float64)
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std < _MIN_STD, 1.0, std)
    return mean, std


def _standardize(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` for ``x`` (n, d); returns float32 (n, d)."""
    return ((np.asarray(x, dtype=np.float64) - mean) / std).astype(np.float32)


def _derive_seed(seed: int, *parts: object) -> int:
    """A 31-bit seed derived from ``seed`` and ``parts`` with SHA-256 (stable across processes)."""
    payload = json.dumps([int(seed), *[str(p) for p in parts]], ensure_ascii=False).encode("utf-8")
    return int.from_bytes(hashlib.sha256(payload).digest()[:4], "little") & 0x7FFFFFFF


def _split_indices(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/validation split of ``range(n)``: ``(train_idx, val_idx)``, sorted int64 arrays."""
    rng = np.random.default_rng(_derive_seed(seed, "split"))
    perm = rng.permutation(n)
    n_val = max(1, int(round(n * val_fraction)))
    return np.sort(perm[n_val:]).astype(np.int64), np.sort(perm[:n_val]).astype(np.int64)
