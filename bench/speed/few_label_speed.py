"""Speed of one few-label batch: few_label_estimates + stopping_advice + next_rows, 10 models x 2,000 texts.

The product's estimate is closed-form (leave-one-out ridge, its curve from random halves of the labels)
and the row choice one k x k solve per model, so an update costs about as much as the naive reference:
5-fold logistic regression on the labelled rows of every model. On a loaded machine, run it with
OMP_NUM_THREADS=1: BLAS threads fighting for the cores cost more than they bring at these sizes. Embeddings are seeded Gaussian
matrices of the widths of the built-in pool with a class signal, so the script needs no model.

Usage::

    .venv/bin/python bench/speed/few_label_speed.py [--texts 2000] [--models 10] [--labels 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.choosing import label_scores  # noqa: E402
from flare_core.choosing.label_choice import next_rows  # noqa: E402
from flare_core.choosing.probes import few_label_estimates, probe_scores  # noqa: E402
from flare_core.choosing.stopping import stopping_advice  # noqa: E402

WIDTHS = (384, 768, 384, 384, 50, 64, 256, 100, 384, 768)


def pool(
    n_texts: int, n_models: int, n_classes: int = 4, seed: int = 0
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n_texts)
    embeddings = {}
    for i in range(n_models):
        d = WIDTHS[i % len(WIDTHS)]
        centres = rng.normal(size=(n_classes, d))
        embeddings[f"model-{i}"] = centres[labels] * (0.3 + 0.05 * i) + rng.normal(size=(n_texts, d))
    return embeddings, labels.astype(str)


def update(embeddings: dict[str, np.ndarray], rows: np.ndarray, labels: np.ndarray) -> float:
    start = time.perf_counter()
    frame = few_label_estimates(embeddings, rows, labels[rows].tolist())
    stopping_advice(frame, rows.size)
    next_rows(embeddings, rows, labels[rows].tolist(), 16)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--labels", type=int, default=64)
    args = parser.parse_args(argv)
    embeddings, labels = pool(args.texts, args.models)
    rows = np.random.default_rng(1).choice(args.texts, size=args.labels, replace=False)
    label_scores._GRAPHS.clear()
    first = update(embeddings, rows, labels)
    later = [update(embeddings, rows, labels) for _ in range(3)]
    start = time.perf_counter()
    codes = np.unique(labels[rows], return_inverse=True)[1]
    probe_scores(embeddings, rows, codes, "cv-lr")
    naive = time.perf_counter() - start
    print(f"{args.models} models x {args.texts} texts, {args.labels} labels:")
    print(f"  first update: {first:.2f} s")
    print(f"  later updates (median of 3): {np.median(later):.2f} s (target <= 2 s)")
    print(
        f"  5-fold logistic regression on the labelled rows alone: {naive:.2f} s "
        f"(later update / that = {np.median(later) / naive:.2f})"
    )


if __name__ == "__main__":
    main()
