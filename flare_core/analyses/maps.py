"""2-D maps of a model's embeddings (UMAP), sampled above a size limit."""

from __future__ import annotations

import functools
import importlib
import warnings

import numpy as np
import pandas as pd

#: Below this many points umap-learn computes every pairwise distance (its ``_small_data`` switch).
_UMAP_SMALL_DATA = 4096
#: umap-learn's modules whose numba functions a map compiles.
_UMAP_MODULES = ("umap.umap_", "umap.layouts", "umap.utils", "umap.spectral", "umap.distances", "umap.sparse")


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
        from sklearn.metrics import pairwise_distances

        _keep_umap_compiled()
        # Below 4,096 points umap-learn takes every pairwise distance with its numba metric called once per
        # pair from Python: 2,000 points took 7-12 s a map, most of it in those calls. The same cosine
        # distances from one vectorised call make seven models' maps 2.5x faster (71.0 -> 28.7 s), their
        # neighbourhoods as faithful (mean trustworthiness 0.832 -> 0.835; ``bench/speed/map_speed.py``).
        # Above it, umap-learn's approximate neighbours need no (N, N) matrix.
        small = len(sample) < _UMAP_SMALL_DATA
        reducer = umap.UMAP(
            n_neighbors=min(n_neighbors, len(sample) - 1),
            n_components=2,
            metric="precomputed" if small else "cosine",
            random_state=seed,
            n_jobs=1,
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*precomputed.*", category=UserWarning)
            coords = reducer.fit_transform(pairwise_distances(sample, metric="cosine") if small else sample)
    return pd.DataFrame({"row": rows, "x": coords[:, 0].astype(float), "y": coords[:, 1].astype(float)})


def compile_ahead() -> None:
    """Draw one small map so that umap-learn's and pynndescent's compiled code is on disk before a run needs
    it: ``install.sh`` runs this (``python -m flare_core.analyses.maps``) while the model pool installs, on
    the core that the installer leaves idle, so that a fresh install's first map does not wait 13-19 s."""
    embedding_map(np.random.default_rng(0).normal(size=(60, 12)), seed=0)


@functools.cache
def _keep_umap_compiled() -> int:
    """Let numba keep umap-learn's compiled functions on disk, as pynndescent already does for its own.

    Most of umap-learn's ``numba.njit`` functions are compiled again in every new process: the first map of
    a run's worker took 13-19 s of compiling for 200 points on 2 cores, and takes 0.3 s once the compiled
    code is on disk (the same machine code, so the same map). Returns how many functions were switched.
    """
    from numba.core.dispatcher import Dispatcher

    switched = 0
    for name in _UMAP_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and type(value._cache).__name__ == "NullCache":
                value.enable_caching()
                switched += 1
    return switched


if __name__ == "__main__":
    compile_ahead()
