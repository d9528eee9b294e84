"""Validation studies that tell a user how far to trust a ranking (FLARE §5, appendices C–D).

- ``subsampling_stability``: rankings recomputed on α% of the validation texts (flows not retrained).
- ``shuffle_study``: a fraction p of the source–target pairing shuffled before training; IS should fall to 0.
- ``pool_size_study``: rankings recomputed inside random sub-pools of the models.
- ``aggregation_study``: agreement between median, mean and 10%-trimmed-mean aggregations.

Each returns a tidy DataFrame; ``run_validation`` computes the chosen studies for a stored run and
saves them in ``validation/*.parquet`` plus a JSON digest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import ranking_correlation
from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.checks import check_int, check_probability
from flare_core.run.params import RunParams
from flare_core.run.progress import no_report
from flare_core.run.sufficiency_stage import sufficiency_rows
from flare_core.store.runs import Run

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


_SHUFFLE_TEXTS = 2000


def _downstream_series(run: Run) -> pd.Series | None:
    """The headline downstream score per model (classification accuracy, else STS Spearman), if any."""
    if not run.has("downstream.parquet"):
        return None
    downstream = run.load_frame("downstream.parquet").set_index("model")
    for column in ("accuracy", "cosine_spearman", "v_measure"):
        if column in downstream:
            return downstream[column].astype(float)
    return None


def run_studies(run: Run, studies: Sequence[str], *, repeats: int = 20, report=None) -> dict[str, Any]:
    """Compute the chosen validation studies for every estimator of ``run``; store and return a digest."""
    from flare_core.analyses import sufficiency
    from flare_core.run import studies as validation

    report = report or no_report
    unknown = sorted(set(studies) - set(validation.STUDIES))
    if unknown:
        raise ValueError(f"unknown validation studies {unknown}: choose from {list(validation.STUDIES)}")
    params = RunParams.from_dict(run.manifest["params"])
    downstream = _downstream_series(run)
    digest: dict[str, Any] = run.load_json("validation.json") if run.has("validation.json") else {}
    estimators = [e for e in ESTIMATOR_NAMES if run.has("sufficiency", e, "scores.parquet")]
    for index, estimator in enumerate(estimators):
        report("validation", index, len(estimators) + 1, f"validation studies for {estimator}")
        result = sufficiency.SufficiencyResult.load(run.artefact("sufficiency", estimator, "result"))
        block = digest.setdefault(estimator, {})
        if "subsampling" in studies:
            frame = validation.subsampling_stability(
                result, repeats=repeats, seed=params.seed, downstream=downstream
            )
            run.save_frame(frame, "validation", f"{estimator}_subsampling.parquet")
            block["subsampling"] = (
                frame.groupby("alpha").mean(numeric_only=True).drop(columns="repeat").reset_index()
            )
        if "aggregation" in studies:
            frame = validation.aggregation_study(result, downstream=downstream)
            run.save_frame(frame, "validation", f"{estimator}_aggregation.parquet")
            block["aggregation"] = frame
        if "pool_size" in studies:
            per_dim = result.records.pivot(index="source", columns="target", values="is_per_dim")
            try:
                frame = validation.pool_size_study(per_dim, repeats=repeats, seed=params.seed)
            except ValueError as exc:
                block["pool_size_skipped"] = str(exc)
            else:
                run.save_frame(frame, "validation", f"{estimator}_pool_size.parquet")
                block["pool_size"] = (
                    frame.groupby("pool_size")["rank_agreement"].agg(["mean", "std"]).reset_index()
                )
    if "shuffle" in studies:
        ok = [m for m in run.embedded_models()]
        # seven retrainings of the matrix: a seeded sample of at most 2,000 texts, whatever the run used
        limit = min(params.max_texts_sufficiency or _SHUFFLE_TEXTS, _SHUFFLE_TEXTS)
        rows = sufficiency_rows(len(run.corpus_frame()), limit, params.seed)
        embeddings = {m: np.asarray(run.load_embeddings(m, mmap=True)[rows]) for m in ok}
        frame = validation.shuffle_study(
            embeddings,
            # Flows, not mixtures: a mixture's conditional MLP out-fits its 8-mode marginal even when the
            # pairing is fully shuffled (0.097 nats/dim at p = 1 on the demo run), so only the flow
            # estimator can show the signal vanishing. The fast preset keeps the 7 retrainings affordable.
            estimator="flow",
            config=sufficiency.FlowConfig.fast(),
            seed=params.seed,
            max_dims=params.max_dims,
            progress=lambda done, total: report(
                "validation", len(estimators), len(estimators) + 1, f"shuffle study {done}/{total}"
            ),
        )
        run.save_frame(frame, "validation", "shuffle.parquet")
        digest["shuffle"] = frame
    report("validation", len(estimators) + 1, len(estimators) + 1, "validation done")
    digest = {k: _jsonable(v) for k, v in digest.items()}
    run.save_json(digest, "validation.json")
    return digest


def _jsonable(value: Any) -> Any:
    if isinstance(value, pd.DataFrame):
        return value.to_dict(orient="records")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value
