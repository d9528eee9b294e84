"""Percentile bootstraps: rows resampled with replacement, and the percentile interval of the replicates.

Every bootstrap interval the product shows is drawn here: the Spearman intervals of the validation tables
(``correlate``), the gaps of models compared on scored pairs (``pair_probes``) or judged queries
(``retrieval_eval``), and the information-sufficiency scores (``sufficiency/scores``).

Hand-written rather than ``scipy.stats.bootstrap``: these statistics score many models on one resample
at once (a (models, rows) matrix), drop the resamples where a statistic does not exist (a constant side
of a Spearman correlation) or ignore them (NaN), draw in blocks to bound memory (the sufficiency scores'
(draws, rows) weights), and the answer reads the replicates themselves (``few_judgement_estimates``).
The resamples are ``rng.integers(0, n, size=(draws, n))``, as every caller drew them before, so a seed
gives the intervals it gave.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np

from flare_core.checks import check_int, check_probability


def resamples(
    n: int, draws: int, rng: np.random.Generator, *, block: int | None = None
) -> Iterator[np.ndarray]:
    """Row indices of ``draws`` resamples of ``n`` rows with replacement, each block (size, n).

    One block of every draw when ``block`` is None, else blocks of at most ``block`` draws, drawn one
    after another from ``rng`` (a block size is part of what a seed gives).
    """
    n = check_int(n, "n", min_value=1)
    draws = check_int(draws, "draws", min_value=0)
    step = draws if block is None else check_int(block, "block", min_value=1)
    for start in range(0, draws, max(step, 1)):
        yield rng.integers(0, n, size=(min(step, draws - start), n))


def percentile_interval(
    replicates: np.ndarray, level: float = 0.95, *, axis: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval at ``level`` of bootstrap ``replicates`` along ``axis``, NaN left out.

    Returns ``(low, high)``, the ``(1 - level) / 2`` and ``1 - (1 - level) / 2`` quantiles (linear
    interpolation), with ``axis`` removed; NaN where a slice holds no finite replicate.
    """
    check_probability(level, "level", include_min=False, include_max=False)
    values = np.asarray(replicates, dtype=np.float64)
    if values.shape[axis] == 0:
        empty = np.full(np.delete(values.shape, axis), np.nan)
        return empty, empty.copy()
    alpha = (1.0 - float(level)) / 2.0
    with warnings.catch_warnings():  # an all-NaN slice: its interval is NaN, as documented
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanquantile(values, [alpha, 1.0 - alpha], axis=axis)
    return low, high


def percentile_bootstrap(
    statistic: Callable[[np.ndarray], np.ndarray],
    n: int,
    *,
    draws: int,
    rng: np.random.Generator,
    level: float = 0.95,
    block: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``statistic`` on ``draws`` resamples of ``n`` rows, and its percentile interval.

    ``statistic`` maps a block of row indices (size, n) to its replicates (size, ...). Returns ``(low,
    high, replicates)``: the interval at ``level`` of each statistic (NaN replicates left out, see
    :func:`percentile_interval`) and every replicate (draws, ...).
    """
    replicates = np.concatenate([statistic(rows) for rows in resamples(n, draws, rng, block=block)])
    low, high = percentile_interval(replicates, level, axis=0)
    return low, high, replicates
