"""Validation studies that tell a user how far to trust a ranking (FLARE §5, appendices C–D).

- ``subsampling_stability``: rankings recomputed on α% of the validation texts (flows not retrained).
- ``shuffle_study``: a fraction p of the source–target pairing shuffled before training; IS should fall to 0.
- ``pool_size_study``: rankings recomputed inside random sub-pools of the models.
- ``aggregation_study``: agreement between median, mean and 10%-trimmed-mean aggregations.

Each returns a tidy DataFrame; the pipeline's stage ``validation`` (:mod:`flare_core.run.validation_stage`)
computes the chosen studies for a stored run and saves them in ``validation/*.parquet`` plus a JSON digest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import ranking_correlation
from flare_core.checks import check_int, check_probability

ALPHAS = (0.05, 0.10, 0.20, 0.40, 0.60, 0.80, 1.00)
SHUFFLE_PS = (0.0, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
STUDIES = ("subsampling", "aggregation", "pool_size", "shuffle")


def _scores(result, **kwargs) -> pd.Series:
    from flare_core.analyses.sufficiency import model_scores

    return model_scores(result, n_boot=0, **kwargs).set_index("model")["score"]


def subsampling_stability(
    result,
    *,
    alphas: Sequence[float] = ALPHAS,
    repeats: int = 20,
    seed: int = 0,
    downstream: pd.Series | None = None,
) -> pd.DataFrame:
    """Ranking stability when only a fraction α of the validation texts is used.

    Returns one row per (alpha, repeat): ``rank_agreement`` (Spearman between the subsample's scores
    and the full scores) and, when ``downstream`` (per-model scores) is given, ``rho_downstream`` and
    ``delta_rho`` = |ρ(α) − ρ(1.0)| as in FLARE's Figure 4.
    """
    check_int(repeats, "repeats", min_value=1)
    for alpha in alphas:
        check_probability(alpha, "every alpha", include_min=False)
    full = _scores(result)
    rho_full = ranking_correlation(full, downstream) if downstream is not None else float("nan")
    n_val = len(next(iter(result.val_logp_marg.values())))
    rng = np.random.default_rng(seed)
    rows = []
    for alpha in alphas:
        size = max(2, int(round(alpha * n_val)))
        for repeat in range(1 if alpha >= 1 else repeats):
            subset = np.sort(rng.choice(n_val, size=min(size, n_val), replace=False))
            scores = _scores(result, val_subset=subset)
            row = {
                "alpha": alpha,
                "repeat": repeat,
                "n_val": len(subset),
                "rank_agreement": ranking_correlation(scores, full),
            }
            if downstream is not None:
                rho = ranking_correlation(scores, downstream)
                row.update(rho_downstream=rho, delta_rho=abs(rho - rho_full))
            rows.append(row)
    return pd.DataFrame(rows)


def aggregation_study(result, *, downstream: pd.Series | None = None) -> pd.DataFrame:
    """Agreement of each aggregation (median, mean, trim10) with the median, and with ``downstream``."""
    median = _scores(result, aggregation="median")
    rows = []
    for aggregation in ("median", "mean", "trim10"):
        scores = _scores(result, aggregation=aggregation)
        row = {"aggregation": aggregation, "rank_agreement_with_median": ranking_correlation(scores, median)}
        if downstream is not None:
            row["rho_downstream"] = ranking_correlation(scores, downstream)
        rows.append(row)
    return pd.DataFrame(rows)


def pool_size_study(
    is_per_dim: pd.DataFrame, *, repeats: int = 20, seed: int = 0, min_size: int = 3
) -> pd.DataFrame:
    """Rankings recomputed inside random sub-pools of k models (no retraining).

    ``is_per_dim``: (sources × targets) IS/d_target. Within a sub-pool S, a model's score is the median
    of IS/d over the targets in S; ``rank_agreement`` is the Spearman correlation with the full pool's
    scores on the models of S.
    """
    sources = [s for s in is_per_dim.index if s in is_per_dim.columns]
    if len(sources) < min_size:
        raise ValueError(
            f"the pool-size study needs at least {min_size} models that are both sources and targets"
        )
    full = is_per_dim.loc[sources, sources].median(axis=1, skipna=True)
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(min_size, len(sources) + 1):
        for repeat in range(1 if k == len(sources) else repeats):
            pool = sorted(rng.choice(sources, size=k, replace=False).tolist())
            scores = is_per_dim.loc[pool, pool].median(axis=1, skipna=True)
            rows.append(
                {
                    "pool_size": k,
                    "repeat": repeat,
                    "rank_agreement": ranking_correlation(scores, full.loc[pool]),
                }
            )
    return pd.DataFrame(rows)


def partially_shuffled(x: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """Copy of ``x`` (N, d) in which a random fraction ``p`` of the rows is permuted among itself."""
    check_probability(p, "p")
    out = np.array(x, copy=True)
    chosen = rng.choice(len(x), size=int(round(p * len(x))), replace=False)
    out[chosen] = x[rng.permutation(chosen)]
    return out


def shuffle_study(
    embeddings: Mapping[str, np.ndarray],
    *,
    ps: Sequence[float] = SHUFFLE_PS,
    estimator: str = "flow",
    config=None,
    seed: int = 0,
    progress=None,
    max_dims: int | None = None,
) -> pd.DataFrame:
    """IS when a fraction p of the source rows is shuffled against the targets (retrains for each p).

    Every model acts as a source through a partially shuffled copy of its rows and as a target
    through its original rows, so each pair (a → b, a ≠ b) sees its pairing broken for a fraction p.
    Returns one row per p: ``mean_is_per_dim`` and ``max_is_per_dim`` over the pairs, and
    ``rank_agreement`` of the resulting ranking with the one at the first p; ``max_dims`` whitens as the
    run's matrix does. At p = 1 the pairing
    carries no information and IS should be ≈ 0: true of the flow estimator (the default); the mixture
    estimator keeps a positive floor from the capacity gap between its conditional and marginal models.
    """
    from flare_core.analyses.sufficiency import sufficiency_matrix

    names = list(embeddings)
    if len(names) < 2:
        raise ValueError("the shuffle study needs at least two models")
    n = len(next(iter(embeddings.values())))
    rows, reference = [], None
    for index, p in enumerate(ps):
        order = partially_shuffled(np.arange(n), p, np.random.default_rng(seed + index))
        pool = {f"target:{name}": np.asarray(x) for name, x in embeddings.items()}
        pool.update({f"source:{name}": np.asarray(x)[order] for name, x in embeddings.items()})
        result = sufficiency_matrix(
            pool,
            estimator=estimator,
            config=config,
            sources=[f"source:{name}" for name in names],
            targets=[f"target:{name}" for name in names],
            seed=seed,
            max_dims=max_dims,
        )
        records = result.records.assign(
            source=lambda f: f["source"].str.removeprefix("source:"),
            target=lambda f: f["target"].str.removeprefix("target:"),
        )
        records = records[records["source"] != records["target"]]
        scores = records.groupby("source")["is_per_dim"].median()
        if reference is None:
            reference = scores
        rows.append(
            {
                "p": p,
                "mean_is_per_dim": float(records["is_per_dim"].mean()),
                "max_is_per_dim": float(records["is_per_dim"].max()),
                "rank_agreement": ranking_correlation(scores, reference),
            }
        )
        if progress is not None:
            progress(index + 1, len(ps))
    return pd.DataFrame(rows)
