"""The label-free ranking's verdict read from what a run stored: the evidence the trust checks read, the
version-2 verdict of the ranking (the map), and what a run of one model can still say of it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.answer.stored import MapVerdict
from flare_core.answer.trust import RANDOM_WEIGHTS, ROWS_SHUFFLED, Evidence, assess
from flare_core.answer.verdict import MIN_RANKED, unranked_verdict, verdict
from flare_core.store.manifest import RANKED_ROLES, roles
from flare_core.store.runs import Run

_CONTROL_KINDS = {"control: random weights": RANDOM_WEIGHTS, "control: rows shuffled": ROWS_SHUFFLED}


def control_kind(model_id: str) -> str:
    """ "random weights", "rows shuffled", or "control" for a control the registry does not describe."""
    from flare_core.encoders import get_spec

    try:
        return _CONTROL_KINDS.get(get_spec(model_id).family, "control")
    except ValueError:
        return "control"


def _stability(run: Run, estimator: str) -> float | None:
    digest = run.load_json("validation.json") if run.has("validation.json") else {}
    for row in digest.get(estimator, {}).get("subsampling", []):
        if abs(row["alpha"] - 0.2) < 1e-9:
            return row.get("rank_agreement")
    return None


def _agreement(run: Run, available: list[str]) -> float | None:
    from flare_core.analyses.correlate import ranking_correlation

    if len(available) < 2:
        return None
    a, b = (
        run.load_frame("sufficiency", e, "scores.parquet").set_index("model")["score"] for e in available[:2]
    )
    return ranking_correlation(a, b)


def gather_evidence(run: Run, estimator: str, available: list[str]) -> tuple[Evidence, pd.DataFrame]:
    """What the trust checks read for ``estimator``'s ranking, and the controls' placed scores."""
    from flare_core.analyses.sufficiency import SufficiencyResult

    role_of = roles(run)
    scores = run.load_frame("sufficiency", estimator, "scores.parquet")
    trained = scores[scores["model"].map(role_of).fillna("candidate") == "candidate"]
    trained = trained[np.isfinite(trained["score"].astype(float))]
    controls = (
        run.load_frame("sufficiency", estimator, "controls.parquet")
        if run.has("sufficiency", estimator, "controls.parquet")
        else pd.DataFrame(columns=["model", "score", "would_rank"])
    )
    controls = controls.assign(kind=[control_kind(m) for m in controls["model"]])
    result = SufficiencyResult.load(run.artefact("sufficiency", estimator, "result"))
    ranked_pairs = result.records[result.records["source"].isin(scores["model"])]
    evidence = Evidence(
        scores=trained.reset_index(drop=True),
        controls={r.model: (r.kind, float(r.score)) for r in controls.itertuples(index=False)},
        stability=_stability(run, estimator),
        agreement=_agreement(run, available),
        n_train=len(result.train_idx),
        n_val=result.n_val,
        dims=max(result.dims.values()) if result.dims else None,
        raw_dim=max(result.raw_dims.values()) if result.raw_dims else None,
        median_gap=float(np.median(ranked_pairs["delta_emp_cond"])) if len(ranked_pairs) else None,
        median_is=float(np.median(ranked_pairs["is_nats"])) if len(ranked_pairs) else None,
    )
    return evidence, controls


def ranking_verdict(run: Run, *, provisional: bool) -> MapVerdict:
    """The version-2 verdict of the label-free ranking (the map): from the first estimator that scored at
    least two candidates, else the verdict of a run with nothing to rank (what its one model's analyses
    say)."""
    role_of = roles(run)
    failed = [m["id"] for m in run.manifest["models"] if m.get("status") == "failed"]
    available = [e for e in ESTIMATOR_NAMES if run.has("sufficiency", e, "scores.parquet")]
    scored = {e: _scored(run, e) for e in available}
    ranked_by = [e for e in available if len(scored[e]) >= MIN_RANKED]
    if not ranked_by:
        ranked = [
            m["id"]
            for m in run.manifest["models"]
            if m.get("status") == "done" and role_of.get(m["id"]) in RANKED_ROLES
        ]
        facts = single_model_facts(run, ranked[0]) if len(ranked) == 1 else []
        return unranked_verdict(
            ranked, facts=facts, failed=failed, provisional=provisional, drawing=map_drawing(run)
        )
    estimator = ranked_by[0]
    evidence, controls = gather_evidence(run, estimator, ranked_by)
    scores = scored[estimator]
    partial = [m for m in scores["model"] if role_of.get(m) == "partial"]
    return verdict(
        scores,
        estimator=estimator,
        trust=assess(evidence),
        controls=controls,
        partial=partial,
        failed=failed,
        provisional=provisional,
    )


def map_drawing(run: Run) -> bool:
    """Whether the map of ``run`` is still being drawn: one of its estimators has no outcome yet (it has
    neither scored the models nor failed nor been skipped)."""
    manifest = run.manifest
    outcomes = manifest.get("outcomes") or {}
    estimators = (manifest.get("params") or {}).get("estimators") or []
    return any(f"sufficiency_{e}" not in outcomes for e in estimators)


def _scored(run: Run, estimator: str) -> pd.DataFrame:
    """The ranked models of ``estimator`` that have a score (a model whose every pair failed has none)."""
    scores = run.load_frame("sufficiency", estimator, "scores.parquet")
    return scores[np.isfinite(scores["score"].astype(float))].reset_index(drop=True)


def single_model_facts(run: Run, model: str) -> list[str]:
    """Sentences on one model from the run's stored analyses: its accuracy on the labels, its collapse
    under mean pooling, and how many of its dimensions its texts spread over (each when computed)."""
    facts = []
    if run.has("downstream.parquet"):
        row = run.load_frame("downstream.parquet").set_index("model")
        if model in row.index and "accuracy" in row and np.isfinite(row.loc[model, "accuracy"]):
            facts.append(
                f"On your labels it reaches {100 * row.loc[model, 'accuracy']:.1f}% accuracy "
                "(5-fold logistic regression)."
            )
        elif (
            model in row.index and "cosine_spearman" in row and np.isfinite(row.loc[model, "cosine_spearman"])
        ):
            facts.append(
                "Its cosine similarities follow your pair scores at Spearman "
                f"{row.loc[model, 'cosine_spearman']:.2f}."
            )
    if run.has("collapse", "summary.parquet"):
        row = run.load_frame("collapse", "summary.parquet").set_index("model")
        if model in row.index and np.isfinite(row.loc[model, "socm_mean"]):
            facts.append(
                f"Its mean-pooling collapse averages {row.loc[model, 'socm_mean']:.2f} over pairs of texts "
                "(0: pooling hides none of what tells two texts apart, 1: all of it)."
            )
    if run.has("geometry.parquet"):
        row = run.load_frame("geometry.parquet").set_index("model")
        dim = next((m.get("dim") for m in run.manifest["models"] if m["id"] == model), None)
        if model in row.index and "effective_rank" in row and np.isfinite(row.loc[model, "effective_rank"]):
            of = f" of its {dim}" if dim else ""
            facts.append(
                f"Its texts spread over about {row.loc[model, 'effective_rank']:.0f}{of} dimensions."
            )
    return facts
