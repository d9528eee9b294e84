"""Reading a stored run's results into plain Python structures (for ``flare show --json``, reports, pages)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES, estimator_label
from flare_core.store.runs import Run, RunStore, safe_name


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
    from flare_core.run.jobs import effective_status

    manifest = run.manifest
    out: dict[str, Any] = {"run_id": run.id, "status": effective_status(run), "manifest": manifest}
    if run.has("summary.parquet"):
        out["summary"] = _records(run.load_frame("summary.parquet"))
    sufficiency: dict[str, Any] = {}
    for estimator in ESTIMATOR_NAMES:
        frames = sufficiency_frames(run, estimator)
        if frames is None:
            continue
        sufficiency[estimator] = {
            "label": estimator_label(estimator),
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


def runs_table(store: RunStore) -> list[dict[str, Any]]:
    """One row per stored run, newest first: id, name, effective status, texts, models, created, stage, progress."""
    from flare_core.run.jobs import effective_status

    rows = []
    for manifest in store.list():
        progress = manifest.get("progress") or {}
        rows.append(
            {
                "id": manifest["id"],
                "name": manifest.get("name"),
                "status": effective_status(store.get(manifest["id"])),
                "texts": manifest.get("corpus", {}).get("n_texts"),
                "models": ",".join(m["id"] for m in manifest.get("models", [])),
                "created": manifest.get("created"),
                "stage": progress.get("stage", ""),
                "progress": f"{progress.get('done', '')}/{progress.get('total', '')}" if progress else "",
            }
        )
    return rows
