"""Model scores from a sufficiency matrix: aggregation over targets and bootstrap intervals.

score(a) = agg_{b != a} IS(a -> b) / d_b  (FLARE Eq. 4; ``normalize=False`` drops the / d_b), or, for
``variant="cond_only"``, agg_b of minus the validation conditional NLL of b given a (per dimension when
normalised). Every pair's value is recomputed from the per-sample validation log-likelihoods, so
bootstrap replicates and validation subsets need no retraining.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from flare_core.analyses.resampling import percentile_bootstrap
from flare_core.analyses.sufficiency.result import SufficiencyResult
from flare_core.checks import check_int, check_probability

_AGGREGATIONS = ("median", "mean", "trim10")
_VARIANTS = ("is", "cond_only")
SCORE_COLUMNS = ["model", "score", "ci_low", "ci_high", "rank", "n_targets"]


def _aggregate(values: np.ndarray, aggregation: str) -> np.ndarray:
    """Aggregate along the last axis: values (..., n_targets) -> (...)."""
    if aggregation == "median":
        return np.median(values, axis=-1)
    if aggregation == "mean":
        return values.mean(axis=-1)
    return stats.trim_mean(values, 0.1, axis=-1)


def _pair_table(result: SufficiencyResult) -> list[tuple[str, str]]:
    """Computed (source, target) pairs with a stored marginal, sources in result order."""
    pairs = []
    for source in result.sources:
        for target in result.names:
            if (
                target != source
                and (source, target) in result.val_logp_cond
                and target in result.val_logp_marg
            ):
                pairs.append((source, target))
    return pairs


def _per_sample(
    result: SufficiencyResult, pairs: list[tuple[str, str]], variant: str, normalize: bool
) -> np.ndarray:
    """(n_pairs, n_val) per-sample contributions whose mean over samples is each pair's value."""
    rows = []
    for source, target in pairs:
        cond = np.asarray(result.val_logp_cond[(source, target)], dtype=np.float64)
        row = cond - np.asarray(result.val_logp_marg[target], dtype=np.float64) if variant == "is" else cond
        rows.append(row / result.dims[target] if normalize else row)
    return np.stack(rows) if rows else np.zeros((0, result.n_val))


def _scores_from_pair_values(
    pair_values: np.ndarray, groups: list[np.ndarray], aggregation: str
) -> np.ndarray:
    """pair_values (..., n_pairs) -> per-model scores (..., n_models); NaN for models without pairs."""
    out = np.full(pair_values.shape[:-1] + (len(groups),), np.nan)
    for m, idx in enumerate(groups):
        if len(idx):
            out[..., m] = _aggregate(pair_values[..., idx], aggregation)
    return out


def _check_result(result: SufficiencyResult) -> None:
    if not isinstance(result, SufficiencyResult):
        raise ValueError(f"result must be a SufficiencyResult, got {type(result).__name__}")


def _check_options(aggregation: str, variant: str) -> None:
    if aggregation not in _AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {_AGGREGATIONS}, got {aggregation!r}")
    if variant not in _VARIANTS:
        raise ValueError(f"variant must be one of {_VARIANTS}, got {variant!r}")


def _check_subset(val_subset: np.ndarray | None, n_val: int) -> np.ndarray:
    if val_subset is None:
        return np.arange(n_val)
    subset = np.asarray(val_subset)
    if subset.ndim != 1 or subset.size == 0:
        raise ValueError(f"val_subset must be a non-empty 1-D array of positions, got shape {subset.shape}")
    if not np.issubdtype(subset.dtype, np.integer):
        raise ValueError(
            f"val_subset must hold integer positions into the validation split, got {subset.dtype}"
        )
    if subset.min() < 0 or subset.max() >= n_val:
        raise ValueError(
            f"val_subset positions must lie in [0, {n_val}), got range [{subset.min()}, {subset.max()}]"
        )
    return subset.astype(np.int64)


def model_scores(
    result: SufficiencyResult,
    *,
    aggregation: str = "median",
    normalize: bool = True,
    variant: str = "is",
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    val_subset: np.ndarray | None = None,
) -> pd.DataFrame:
    """Score and rank the sources of ``result``; reference models (targets only) are not ranked.

    Each pair's value is the mean, over the validation rows in ``val_subset`` (positions into
    ``result.val_idx``; default all), of log p(v|u) - log p(v) (``variant="is"``) or log p(v|u)
    (``"cond_only"``), divided by d_target when ``normalize``. A model's score aggregates its pairs
    ("median", "mean", or "trim10" = scipy ``trim_mean`` cutting 10% at each end, i.e. floor(0.1 n)
    values). The interval is the percentile bootstrap over validation rows: one resample of rows per
    replicate, shared by all pairs. ``n_boot=0`` gives NaN intervals.

    Returns a DataFrame with columns :data:`SCORE_COLUMNS`, sorted by rank (1 = best; ties share the
    lowest rank; NaN for models with no computed pair).
    """
    _check_result(result)
    _check_options(aggregation, variant)
    check_int(n_boot, "n_boot", min_value=0)
    check_probability(ci, "ci", include_min=False, include_max=False)
    subset = _check_subset(val_subset, result.n_val)

    pairs = _pair_table(result)
    models = list(result.sources)
    groups = [np.array([k for k, (s, _) in enumerate(pairs) if s == m], dtype=np.int64) for m in models]
    per_sample = _per_sample(result, pairs, variant, normalize)[:, subset]  # (n_pairs, m)
    point = _scores_from_pair_values(per_sample.mean(axis=1), groups, aggregation)

    low = np.full(len(models), np.nan)
    high = np.full(len(models), np.nan)
    if n_boot > 0 and len(pairs):
        m = per_sample.shape[1]

        def replicates(draws: np.ndarray) -> np.ndarray:  # (size, models) from (size, m) resampled rows
            weights = np.stack([np.bincount(row, minlength=m) for row in draws]) / m  # (size, m)
            return _scores_from_pair_values(weights @ per_sample.T, groups, aggregation)

        # blocks of 256 resamples bound the (draws, m) weights' memory
        low, high, _ = percentile_bootstrap(
            replicates, m, draws=n_boot, rng=np.random.default_rng(seed), level=float(ci), block=256
        )

    frame = pd.DataFrame(
        {
            "model": models,
            "score": point,
            "ci_low": low,
            "ci_high": high,
            "n_targets": [len(g) for g in groups],
        }
    )
    frame["rank"] = frame["score"].rank(ascending=False, method="min")
    frame = frame.sort_values(["rank", "model"], na_position="last", kind="stable").reset_index(drop=True)
    return frame[SCORE_COLUMNS]


def indistinguishable(scores_df: pd.DataFrame) -> list[tuple[str, str]]:
    """Pairs (better, worse) of models whose bootstrap intervals overlap, in rank order.

    Models with a NaN interval are left out.
    """
    if not isinstance(scores_df, pd.DataFrame):
        raise ValueError(f"scores_df must be a DataFrame, got {type(scores_df).__name__}")
    missing = [c for c in ("model", "score", "ci_low", "ci_high") if c not in scores_df.columns]
    if missing:
        raise ValueError(f"scores_df lacks columns {missing}; pass the output of model_scores")
    frame = scores_df.dropna(subset=["ci_low", "ci_high"]).sort_values(
        "score", ascending=False, kind="stable"
    )
    rows = list(frame[["model", "ci_low", "ci_high"]].itertuples(index=False, name=None))
    out = []
    for i, (a, lo_a, hi_a) in enumerate(rows):
        for b, lo_b, hi_b in rows[i + 1 :]:
            if lo_a <= hi_b and lo_b <= hi_a:
                out.append((a, b))
    return out


def all_scores(result: SufficiencyResult) -> pd.DataFrame:
    """Every score variant as a column, one row per source model (no bootstrap).

    Columns: ``model``, ``n_targets`` and ``{variant}_{aggregation}_{norm|raw}`` for variant in
    (is, cond_only), aggregation in (median, mean, trim10), normalised or not: 12 score columns.
    """
    _check_result(result)
    out = pd.DataFrame({"model": list(result.sources)})
    first = model_scores(result, n_boot=0)
    out["n_targets"] = out["model"].map(dict(zip(first["model"], first["n_targets"], strict=True)))
    for variant in _VARIANTS:
        for aggregation in _AGGREGATIONS:
            for normalize in (True, False):
                name = f"{variant}_{aggregation}_{'norm' if normalize else 'raw'}"
                frame = model_scores(
                    result, aggregation=aggregation, normalize=normalize, variant=variant, n_boot=0
                )
                out[name] = out["model"].map(dict(zip(frame["model"], frame["score"], strict=True)))
                if "n_targets" not in out:
                    out["n_targets"] = out["model"].map(
                        dict(zip(frame["model"], frame["n_targets"], strict=True))
                    )
    return out
