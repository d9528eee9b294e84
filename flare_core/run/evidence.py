"""The run's verdict written from what is stored: the evidence the trust checks read, and ``verdict.json``.

:func:`write_verdict` is called after each estimator (a provisional verdict, so the Overview shows an
answer as soon as the first ranking exists) and by the summary at the end of the run (the final one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.run.manifest import roles
from flare_core.run.trust import RANDOM_WEIGHTS, ROWS_SHUFFLED, Evidence, assess
from flare_core.run.verdict import verdict
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


def write_verdict(run: Run, *, provisional: bool) -> None:
    """Write ``verdict.json`` from the first estimator that has scores (nothing when none has)."""
    available = [e for e in ESTIMATOR_NAMES if run.has("sufficiency", e, "scores.parquet")]
    if not available:
        return
    estimator = available[0]
    evidence, controls = gather_evidence(run, estimator, available)
    role_of = roles(run)
    scores = run.load_frame("sufficiency", estimator, "scores.parquet")
    partial = [m for m in scores["model"] if role_of.get(m) == "partial"]
    failed = [m["id"] for m in run.manifest["models"] if m.get("status") == "failed"]
    run.save_json(
        verdict(
            scores, estimator=estimator, trust=assess(evidence), controls=controls, partial=partial,
            failed=failed, provisional=provisional,
        ),
        "verdict.json",
    )  # fmt: skip
