"""Choosing a model from scored pairs of texts (similarity data): each model's cosines of the pairs against
the people's scores, compared honestly.

The score of a model is the Spearman correlation of its pair cosines with the gold scores. The gap of each
model to the best has a 95% interval from a paired bootstrap over the pairs (every model's correlation
recomputed on the same resampled pairs), and a model whose interval reaches 0 is tied with the best.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import spearman_rows
from flare_core.analyses.resampling import percentile_bootstrap
from flare_core.checks import check_int

#: Bootstrap draws behind the intervals.
DRAWS = 1000


def compare_with_pair_scores(
    cosines: Mapping[str, np.ndarray], gold: np.ndarray, *, seed: int = 0, draws: int = DRAWS
) -> pd.DataFrame:
    """Rank models by how well their pair cosines follow the gold scores.

    ``cosines[m]`` is (P,) for the P scored pairs, ``gold`` (P,). Returns one row per model, best first:
    ``model, spearman, gap`` (points: 100 × the difference of correlations with the best), ``gap_low,
    gap_high`` (95% paired bootstrap over pairs), ``tied``, ``n_pairs``; ``attrs``: ``best``, ``method``.
    """
    draws = check_int(draws, "draws", min_value=100)
    gold = np.asarray(gold, dtype=np.float64)
    names = list(cosines)
    if len(names) < 1:
        raise ValueError("cosines must hold at least one model")
    matrix = np.stack([np.asarray(cosines[m], dtype=np.float64) for m in names])
    if matrix.shape[1] != gold.shape[0] or gold.shape[0] < 3:
        raise ValueError(
            f"need the same number (3 or more) of cosines and gold scores; got {matrix.shape[1]} and "
            f"{gold.shape[0]}"
        )
    if not (np.isfinite(matrix).all() and np.isfinite(gold).all()):
        raise ValueError("cosines and gold scores must be finite")
    full = spearman_rows(matrix, gold)
    best = int(np.nanargmax(full))

    def gaps(samples: np.ndarray) -> np.ndarray:  # (draws, models): points behind the best on each resample
        out = np.empty((samples.shape[0], len(names)))
        for d, rows in enumerate(samples):
            boot = spearman_rows(matrix[:, rows], gold[rows])
            out[d] = 100.0 * (boot[best] - boot)
        return out

    low, high, _ = percentile_bootstrap(gaps, gold.shape[0], draws=draws, rng=np.random.default_rng(seed))
    frame = pd.DataFrame(
        {
            "model": names,
            "spearman": full,
            "gap": 100.0 * (full[best] - full),
            "gap_low": low,
            "gap_high": high,
            "tied": [(i != best) and low[i] <= 0.0 for i in range(len(names))],
            "n_pairs": gold.shape[0],
        }
    )
    frame = frame.sort_values(["spearman", "model"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )
    frame.attrs.update(
        best=names[best],
        method=f"Spearman of pair cosines with your scores, {draws} paired bootstrap draws over pairs",
    )
    return frame
