"""What each candidate of a run costs, and the cheapest candidate good enough by the run's answer.

The costs are those the embedding stage recorded for each model (:mod:`flare_core.encoders.cost`); the
quality is the answer's own: the labels' accuracy with the uncertainty of each gap, a person's few labels'
estimates with their intervals, or without labels the label-free score with its bootstrap interval (then
the sentence says it is label-free). :func:`flare_core.analyses.tradeoff.cheapest_within` decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.stored import metric_column
from flare_core.store.manifest import roles
from flare_core.store.runs import Run

COST_COLUMNS = (
    "texts_per_s",
    "chars_per_s",
    "load_s",
    "peak_memory_mib",
    "model_size_mib",
    "bytes_per_vector_float32",
    "bytes_per_vector_int8",
    "device",
)


def run_costs(run: Run) -> pd.DataFrame:
    """One row per ranked model of ``run`` (candidates and partial models) with the costs its embedding
    stage recorded: ``model`` and :data:`COST_COLUMNS` (NaN where a model recorded none, as uploaded
    embeddings)."""
    kinds = roles(run)
    rows = [
        {"model": m["id"], **{c: m.get(c) for c in COST_COLUMNS}}
        for m in run.manifest.get("models", [])
        if kinds.get(m["id"]) in ("candidate", "partial") and m.get("status") == "done"
    ]
    frame = pd.DataFrame(rows, columns=["model", *COST_COLUMNS])
    numeric = [c for c in COST_COLUMNS if c != "device"]
    frame[numeric] = frame[numeric].apply(pd.to_numeric, errors="coerce")
    return frame


def answer_quality(verdict: Mapping[str, Any]) -> pd.DataFrame | None:
    """The quality behind a version-3 answer, one row per candidate: ``model``, ``quality`` (points),
    ``ci_low``, ``ci_high``, ``label``; None for a label-free answer (the chart then uses the label-free
    score) or an answer with nothing to compare."""
    full, few = verdict.get("labels"), verdict.get("few_labels") or {}
    if full:
        pairs = full.get("metric") == "spearman"
        rows = full["rows"]
        spread = max([(r["gap_high"] - r["gap_low"]) / 2 for r in rows if r["gap"]] or [0.0])
        quality = [100.0 * r[metric_column(full)] for r in rows]
        halves = [(r["gap_high"] - r["gap_low"]) / 2 if r["gap"] else spread for r in rows]
        label = (
            "agreement with your pair scores (Spearman × 100)"
            if pairs
            else "nDCG@10 on your search queries (× 100)"
            if full.get("metric") == "ndcg@10"
            else "accuracy on your labels (points)"
        )
        return pd.DataFrame(
            {"model": [r["model"] for r in rows], "quality": quality,
             "ci_low": np.subtract(quality, halves), "ci_high": np.add(quality, halves), "label": label}
        )  # fmt: skip
    if few.get("estimates"):
        rows = few["estimates"]
        return pd.DataFrame(
            {"model": [r["model"] for r in rows], "quality": [100.0 * r["estimate"] for r in rows],
             "ci_low": [100.0 * r["ci_low"] for r in rows], "ci_high": [100.0 * r["ci_high"] for r in rows],
             "label": f"estimated accuracy from your {few['n_labels']} labels (points)"}
        )  # fmt: skip
    return None


def cheapest_good_enough(run: Run, verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """:func:`~flare_core.analyses.tradeoff.cheapest_within` by speed for the run's answer (None without
    measured costs or quality)."""
    from flare_core.analyses.tradeoff import cheapest_within

    costs = run_costs(run)
    quality = answer_quality(verdict)
    if quality is None:
        quality = label_free_quality(run)
    if quality is None or not costs["texts_per_s"].notna().any():
        return None
    return cheapest_within(quality, costs, cost="texts_per_s")


def label_free_quality(run: Run) -> pd.DataFrame | None:
    """The label-free score of each ranked model (the first estimator's information sufficiency, with its
    bootstrap interval; its label starts with "label-free"), None before the run has one."""
    from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES, estimator_label

    ranked = set(run_costs(run)["model"])
    for estimator in ESTIMATOR_NAMES:
        if run.has("sufficiency", estimator, "scores.parquet"):
            scores = run.load_frame("sufficiency", estimator, "scores.parquet")
            scores = scores[scores["model"].isin(ranked)]
            return pd.DataFrame(
                {
                    "model": scores["model"],
                    "quality": scores["score"].astype(float),
                    "ci_low": scores["ci_low"].astype(float),
                    "ci_high": scores["ci_high"].astype(float),
                    "label": f"label-free: information sufficiency ({estimator_label(estimator)}, nats per dimension)",
                }
            ).reset_index(drop=True)
    return None
