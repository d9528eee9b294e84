"""Benchmark: a run's 2-D map of one model (``embedding_map``) against umap-learn's own cosine metric.

Usage::

    python bench/speed/map_speed.py                             # stored embeddings of the default cache folder
    python bench/speed/map_speed.py --cache-dir DIR --models 5  # the first 5 models of DIR with enough texts

Each model's stored embeddings (``DIR/*.npy`` with their ``*.json``; the first ``--texts`` rows) are mapped
twice in this process, after one warm-up map of each kind: by umap-learn with ``metric="cosine"`` (its
numba metric, called once per pair below 4,096 points) and by :func:`flare_core.analyses.maps.embedding_map`
(the same cosine distances, computed at once). Prints the seconds of each, their ratio and each map's
trustworthiness (scikit-learn, 15 neighbours, cosine distances): how well the map keeps every point's
nearest neighbours, 1 at best.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.analyses.maps import _keep_umap_compiled, embedding_map  # noqa: E402
from flare_core.store.cache_folder import cache_root  # noqa: E402


def stored_models(folder: Path, n_texts: int, count: int) -> dict[str, np.ndarray]:
    """The first ``count`` models of ``folder`` with at least ``n_texts`` finite, non-zero rows."""
    found: dict[str, np.ndarray] = {}
    for meta in sorted(folder.glob("*.json")):
        model = json.loads(meta.read_text(encoding="utf-8")).get("model_id")
        npy = meta.with_suffix(".npy")
        if model in found or not npy.is_file():
            continue
        x = np.load(npy)[:n_texts].astype(np.float32)
        if len(x) == n_texts and np.isfinite(x).all() and (np.linalg.norm(x, axis=1) > 0).all():
            found[model] = x
        if len(found) == count:
            break
    return found


def umap_cosine(x: np.ndarray) -> np.ndarray:
    """The map drawn by umap-learn's own cosine metric, with the product's other settings."""
    import umap

    return umap.UMAP(n_neighbors=15, n_components=2, metric="cosine", random_state=0, n_jobs=1).fit_transform(
        x
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: the embedding cache")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--texts", type=int, default=2000)
    args = parser.parse_args()
    from sklearn.manifold import trustworthiness
    from sklearn.metrics import pairwise_distances

    folder = args.cache_dir or cache_root() / "embeddings"
    models = stored_models(folder, args.texts, args.models)
    if not models:
        raise SystemExit(f"no stored embeddings of {args.texts} texts in {folder}")
    _keep_umap_compiled()
    warm = np.random.default_rng(0).normal(size=(100, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        umap_cosine(warm)
        embedding_map(warm)
        totals = np.zeros(2)
        for model, x in models.items():
            start = time.perf_counter()
            before = umap_cosine(x)
            middle = time.perf_counter()
            after = embedding_map(x, seed=0)[["x", "y"]].to_numpy()
            seconds = np.array([middle - start, time.perf_counter() - middle])
            totals += seconds
            distances = pairwise_distances(x, metric="cosine")
            trust = [
                trustworthiness(distances, m, n_neighbors=15, metric="precomputed") for m in (before, after)
            ]
            print(
                f"{model:28s} {x.shape[1]:4d}-d  umap cosine {seconds[0]:6.2f} s  embedding_map {seconds[1]:6.2f} s"
                f"  ({seconds[0] / seconds[1]:.2f}x)  trustworthiness {trust[0]:.4f} -> {trust[1]:.4f}",
                flush=True,
            )
    print(f"all {len(models)} maps: {totals[0]:.1f} s -> {totals[1]:.1f} s ({totals[0] / totals[1]:.2f}x)")


if __name__ == "__main__":
    main()
