"""PCA whitening of an embedding on the training split: the coordinates the densities are fitted in.

Each embedding is standardised per dimension (training-split mean and std), then projected on the
leading principal axes of its standardised training rows and scaled to unit variance along each:

    w = ((x - mean) / std) @ V_k / sqrt(λ_k)          x (n, d) -> w (n, k),  k <= max_dims

where λ_k are the largest eigenvalues of the training rows' covariance and V_k their eigenvectors.
Axes with λ below 1e-6 of the largest are dropped (a corpus of 300 texts gives a 768-d model at most
299 axes). The whitened coordinates of a model keep the directions along which its texts differ most,
all on one scale, so that every model is compared in the same number of dimensions: a 768-d model no
longer brings 12 times the dimensions of a 64-d one to the estimators.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from flare_core.analyses.sufficiency._standardize import _CHUNK_ROWS, _fit_standardizer

_RELATIVE_FLOOR = 1e-6


def fit_whitening(
    x: np.ndarray, rows: np.ndarray, max_dims: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(mean (d,), std (d,), projection (d, k) | None)`` fitted on ``x[rows]``; all float64.

    ``max_dims`` None keeps the standardised coordinates (no projection). ``x`` (n, d) may be
    memory-mapped: it is read 8,192 rows at a time (the covariance is accumulated in float64).
    """
    mean, std = _fit_standardizer(x, rows)
    if max_dims is None:
        return mean, std, None
    rows = np.asarray(rows, dtype=np.int64)
    d = x.shape[1]
    # one BLAS thread: products and eigendecompositions of this size gain nothing from more, and on a
    # busy CPU OpenBLAS's threads wait on each other (a 384-d eigh took 9.4 s with 2 threads and 0.15 s
    # with 1 at load 7 on 2 cores)
    with threadpool_limits(1, user_api="blas"):
        cov = np.zeros((d, d), dtype=np.float64)
        for start in range(0, len(rows), _CHUNK_ROWS):
            z = (np.asarray(x[rows[start : start + _CHUNK_ROWS]], dtype=np.float64) - mean) / std
            cov += z.T @ z
        cov /= len(rows)
        values, vectors = np.linalg.eigh(cov)  # ascending
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    keep = int(min(max_dims, np.sum(values > _RELATIVE_FLOOR * max(values[0], 0.0))))
    keep = max(keep, 1)
    # a fixed sign per axis (largest loading positive), so the projection does not depend on LAPACK
    signs = np.sign(vectors[np.abs(vectors[:, :keep]).argmax(axis=0), np.arange(keep)])
    signs[signs == 0] = 1.0
    return mean, std, vectors[:, :keep] * signs / np.sqrt(values[:keep])


def whiten(x: np.ndarray, mean: np.ndarray, std: np.ndarray, projection: np.ndarray | None) -> np.ndarray:
    """``((x - mean) / std) @ projection`` for ``x`` (n, d): float32 (n, k), or (n, d) without projection."""
    z = (np.asarray(x, dtype=np.float64) - mean) / std
    return (z if projection is None else z @ projection).astype(np.float32)
