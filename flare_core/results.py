"""Reading a stored run's results into plain Python structures (for ``flare show --json``, reports, pages)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flare_core.store.runs import Run, safe_name

ESTIMATOR_LABELS = {"flow": "FLARE (normalizing flows)", "gmm": "EMIR (Gaussian mixtures)"}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.replace({np.nan: None}).to_dict(orient="records")


def sufficiency_frames(run: Run, estimator: str) -> dict[str, pd.DataFrame] | None:
    """Scores, IS matrices (nats and per target dimension) and per-pair figures of one estimator."""
    if not run.has("sufficiency", estimator, "scores.parquet"):
        return None
    from flare_core.analyses.sufficiency import SufficiencyResult

    result = SufficiencyResult.load(run.artefact("sufficiency", estimator, "result"))
    pairs = result.records
    per_dim = pairs.pivot(index="source", columns="target", values="is_per_dim")
    return {
        "scores": run.load_frame("sufficiency", estimator, "scores.parquet"),
        "all_scores": run.load_frame("sufficiency", estimator, "all_scores.parquet")
        if run.has("sufficiency", estimator, "all_scores.parquet")
        else pd.DataFrame(),
        "is_matrix": result.is_matrix,
        "is_per_dim": per_dim.reindex(index=result.is_matrix.index, columns=result.is_matrix.columns),
        "pairs": pairs,
    }


def run_results(run: Run) -> dict[str, Any]:
    """Everything a run has computed so far, JSON-ready (NaN becomes ``None`` on serialisation)."""
    from flare_core.jobs import effective_status

    manifest = run.manifest
    out: dict[str, Any] = {"run_id": run.id, "status": effective_status(run), "manifest": manifest}
    if run.has("summary.parquet"):
        out["summary"] = _records(run.load_frame("summary.parquet"))
    sufficiency: dict[str, Any] = {}
    for estimator in ("flow", "gmm"):
        frames = sufficiency_frames(run, estimator)
        if frames is None:
            continue
        sufficiency[estimator] = {
            "label": ESTIMATOR_LABELS[estimator],
            "scores": _records(frames["scores"]),
            "all_scores": _records(frames["all_scores"]),
            "is_matrix": {
                "sources": list(frames["is_matrix"].index),
                "targets": list(frames["is_matrix"].columns),
                "nats": frames["is_matrix"].to_numpy().tolist(),
                "per_dim": frames["is_per_dim"].to_numpy().tolist(),
            },
            "pairs": _records(frames["pairs"]),
        }
    out["sufficiency"] = sufficiency
    for key, parts in {
        "geometry": ("geometry.parquet",),
        "downstream": ("downstream.parquet",),
        "collapse": ("collapse", "summary.parquet"),
        "concentration": ("concentration.parquet",),
        "correlations": ("correlations.parquet",),
    }.items():
        if run.has(*parts):
            out[key] = _records(run.load_frame(*parts))
    if run.has("verdict.json"):
        out["verdict"] = run.load_json("verdict.json")
    if run.has("validation.json"):
        out["validation"] = run.load_json("validation.json")
    return out


def collapse_pairs(run: Run, model_id: str) -> pd.DataFrame | None:
    """Per-pair d_μ, d_Σ, SOCM of one model (columns i, j, row_i, row_j, d_mu, d_sigma, socm)."""
    parts = ("collapse", f"{safe_name(model_id)}.parquet")
    return run.load_frame(*parts) if run.has(*parts) else None


def collapse_for_run(run: Run, models: list[str] | None = None, n_texts: int | None = None) -> dict[str, Any]:
    """Compute (or recompute with ``n_texts``) SOCM for the run's transformer models and return the summary."""
    from flare_core import pipeline

    params = pipeline.RunParams.from_dict(run.manifest["params"])
    if n_texts is not None:
        params.collapse_texts = n_texts
    transformer_kinds = ("transformer", "control-transformer")
    available = [
        m["id"]
        for m in run.manifest["models"]
        if m.get("status") == "done" and m.get("encoder_kind") in transformer_kinds
    ]
    chosen = models or available
    unknown = [m for m in chosen if m not in available]
    if unknown:
        raise ValueError(
            f"no token states for {unknown}: collapse needs a transformer model of this run ({available})"
        )
    texts = run.corpus_frame()["text"].tolist()
    pipeline.run_collapse(run, chosen, texts, params, recompute=n_texts is not None)
    pipeline.run_concentration(run, chosen, texts, params)
    pipeline.summarise(run)
    results = run_results(run)
    most_collapsed = {}
    for model_id in chosen:
        top = collapse_pairs(run, model_id).nlargest(10, "socm")
        most_collapsed[model_id] = [
            {
                "socm": row.socm,
                "d_mu": row.d_mu,
                "d_sigma": row.d_sigma,
                "text_a": texts[row.row_i],
                "text_b": texts[row.row_j],
            }
            for row in top.itertuples()
        ]
    return {
        "run_id": run.id,
        "summary": [row for row in results.get("collapse", []) if row["model"] in chosen],
        "layers": [row for row in results.get("concentration", []) if row["model"] in chosen],
        "most_collapsed": most_collapsed,
    }
