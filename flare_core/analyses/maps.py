"""2-D maps of a model's embeddings (UMAP), sampled above a size limit."""

from __future__ import annotations

import numpy as np
import pandas as pd


def sample_rows(n: int, max_points: int, seed: int = 0) -> np.ndarray:
    """Sorted row indices: all ``n`` rows, or a seeded sample of ``max_points`` of them."""
    if n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def embedding_map(
    x: np.ndarray, *, max_points: int = 3000, seed: int = 0, n_neighbors: int = 15
) -> pd.DataFrame:
    """UMAP of ``x`` (N, d) with cosine distance → columns ``row``, ``x``, ``y`` (≤ ``max_points`` rows).

    Falls back to the first two principal components when there are too few points for UMAP (< 5).
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"an embedding map needs a 2-D array with at least 2 rows, got shape {x.shape}")
    rows = sample_rows(len(x), max_points, seed)
    sample = x[rows]
    if len(sample) < 5:
        centred = sample - sample.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        coords = centred @ vt[:2].T
        if coords.shape[1] < 2:
            coords = np.column_stack([coords, np.zeros(len(coords))])
    else:
        import umap

        reducer = umap.UMAP(
            n_neighbors=min(n_neighbors, len(sample) - 1),
            n_components=2,
            metric="cosine",
            random_state=seed,
            n_jobs=1,
        )
        coords = reducer.fit_transform(sample)
    return pd.DataFrame({"row": rows, "x": coords[:, 0].astype(float), "y": coords[:, 1].astype(float)})
