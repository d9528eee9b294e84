"""Which pairs of texts to compare: all of them, or a seeded random sample."""

from __future__ import annotations

from typing import Any

import numpy as np

from flare_core.checks import check_int


def sample_pairs(n: int, kind: str = "all", n_pairs: int | None = None, seed: int = 0) -> np.ndarray:
    """Index pairs ``(i, j)`` with ``i < j`` over ``n`` texts.

    Args:
        n: number of texts (``>= 2``).
        kind: ``"all"`` for every pair (``n (n - 1) / 2`` rows, row-major order) or ``"random"`` for
            ``n_pairs`` distinct pairs drawn uniformly without replacement.
        n_pairs: number of pairs for ``"random"`` (capped at the number of distinct pairs); with
            ``"all"`` it must be ``None``.
        seed: seed of the numpy generator for ``"random"``.

    Returns:
        int64 array of shape ``(P, 2)``, sorted lexicographically, ``i < j`` in every row.
    """
    n = check_int(n, "n", min_value=2)
    total = n * (n - 1) // 2
    if kind == "all":
        if n_pairs is not None:
            raise ValueError("n_pairs is only used with kind='random'")
        i, j = np.triu_indices(n, k=1)
        return np.stack([i, j], axis=1).astype(np.int64)
    if kind != "random":
        raise ValueError(f"kind must be 'all' or 'random', got {kind!r}")
    if (
        n_pairs is None
        or isinstance(n_pairs, bool)
        or not isinstance(n_pairs, int | np.integer)
        or n_pairs < 1
    ):
        raise ValueError(f"kind='random' needs n_pairs, an integer >= 1, got {n_pairs!r}")
    want = min(int(n_pairs), total)
    if want * 3 >= total:
        full = sample_pairs(n, "all")
        pick = np.random.default_rng(seed).choice(total, size=want, replace=False)
        return full[np.sort(pick)]
    rng = np.random.default_rng(seed)
    keys = np.empty(0, dtype=np.int64)
    while keys.size < want:
        m = 2 * (want - keys.size) + 16
        a = rng.integers(0, n, size=m)
        b = rng.integers(0, n, size=m)
        keep = a != b
        lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
        new = lo.astype(np.int64) * n + hi
        keys = np.concatenate([keys, new[~np.isin(new, keys)]])
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
    keys = np.sort(keys[:want])
    return np.stack([keys // n, keys % n], axis=1).astype(np.int64)


def check_pairs(pairs: Any, n_texts: int) -> np.ndarray:
    arr = np.asarray(pairs)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"pairs must have shape (P, 2), got {arr.shape}")
    if (
        arr.size
        and not np.issubdtype(arr.dtype, np.integer)
        and (not np.issubdtype(arr.dtype, np.floating) or not np.all(arr == np.round(arr)))
    ):
        raise ValueError(f"pairs must hold integer indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= n_texts):
        raise ValueError(f"pair indices must lie in [0, {n_texts - 1}], got range [{arr.min()}, {arr.max()}]")
    return arr
