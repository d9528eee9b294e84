"""What each candidate of a run costs, and the cheapest candidate good enough by the run's answer.

The costs are those the embedding stage recorded for each model (:mod:`flare_core.encoders.cost`); the
quality is the answer's own: the labels' accuracy with the uncertainty of each gap, a person's few labels'
estimates with their intervals, or without labels the label-free score with its bootstrap interval (then
the sentence says it is label-free). :func:`flare_core.choosing.tradeoff.cheapest_within` decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.from_labels import tolerance_of
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


def answer_quality(verdict: Mapping[str, Any], tolerance_points: float | None = None) -> pd.DataFrame | None:
    """The quality behind a version-3 answer, one row per candidate: ``model``, ``quality`` (points),
    ``ci_low``, ``ci_high``, ``label``, and what the answer's own estimate says of each model against its
    choice: ``good_enough`` (within the tolerance of the best: with full labels, the paired gap interval's
    upper end at most ``tolerance_points``; with few labels, at least 90% chance of being within the few
    labels' own tolerance), ``undecided`` (the estimate cannot tell yet), ``gap_high`` (the gap's upper
    end, points) and ``more_labels`` (few labels: the one forecast of the labels that would settle it,
    for every model not yet good enough; NaN when there is none). ``tolerance_points``: the
    run's (:func:`~flare_core.answer.from_labels.tolerance_of`; the product's default when None). None for a
    label-free answer (the chart then uses the label-free score) or an answer with nothing to compare."""
    from flare_core.choosing.probes import DEFAULT_TOLERANCE, SURE

    full, few = verdict.get("labels"), verdict.get("few_labels") or {}
    points = float(few.get("tolerance_points") or tolerance_points or DEFAULT_TOLERANCE)
    if full:
        pairs = full.get("metric") == "spearman"
        rows = full["rows"]
        quality = np.array([100.0 * r[metric_column(full)] for r in rows])
        low = np.array([float(r["gap_low"]) if r["gap"] else 0.0 for r in rows])
        high = np.array([float(r["gap_high"]) if r["gap"] else 0.0 for r in rows])
        label = (
            "agreement with your pair scores (Spearman × 100)"
            if pairs
            else "nDCG@10 on your search queries (× 100)"
            if full.get("metric") == "ndcg@10"
            else "accuracy on your labels (points)"
        )
        # each gap's half-width is the uncertainty of its model; the best takes the widest of them
        halves = np.array(
            [(h - lo) / 2 if r["gap"] else np.nan for r, lo, h in zip(rows, low, high, strict=True)]
        )
        halves = np.where(np.isnan(halves), np.nanmax(halves) if np.isfinite(halves).any() else 0.0, halves)
        return pd.DataFrame(
            {
                "model": [r["model"] for r in rows],
                "quality": quality,
                "ci_low": quality - halves,
                "ci_high": quality + halves,
                "label": label,
                "good_enough": high <= points + 1e-9,
                "undecided": (low <= points) & (high > points + 1e-9),
                "gap_high": high,
                "more_labels": np.nan,
            }
        )
    if few.get("estimates"):
        rows = few["estimates"]
        n = int(few["n_labels"])
        p_within = np.array([float(r["p_within"]) for r in rows])
        # with too few labels to judge by, no model is called good enough yet; otherwise the one posterior's
        # chances say which are, and its one forecast says how many more labels would tell for the others
        advice = few.get("advice") or {}
        trusted = advice.get("reason") not in ("few labels", "few queries")
        good = p_within >= SURE if trusted else np.zeros(len(rows), dtype=bool)
        forecast = advice.get("more_labels")
        more = float(forecast) if forecast is not None else np.nan
        return pd.DataFrame(
            {
                "model": [r["model"] for r in rows],
                "quality": [100.0 * r["estimate"] for r in rows],
                "ci_low": [100.0 * r["ci_low"] for r in rows],
                "ci_high": [100.0 * r["ci_high"] for r in rows],
                "label": f"nDCG@10 on your {n} judged queries (points)"
                if few.get("metric") == "ndcg@10"
                else f"estimated accuracy from your {n} labels (points)",
                "good_enough": good,
                "undecided": ~good & (p_within >= 1.0 - SURE),
                "gap_high": [float(r["gap_high"]) for r in rows],
                "more_labels": [np.nan if g else more for g in good],
            }
        )
    return None


def cheapest_good_enough(run: Run, verdict: Mapping[str, Any]) -> dict[str, Any] | None:
    """:func:`~flare_core.choosing.tradeoff.cheapest_within` by speed for the run's answer, measured against
    the model the answer recommends (None without measured costs or quality)."""
    from flare_core.choosing.tradeoff import cheapest_within

    costs = run_costs(run)
    points = float((verdict.get("few_labels") or {}).get("tolerance_points") or tolerance_of(run))
    quality = answer_quality(verdict, points)
    if quality is None:
        if not label_free_speaks(run, verdict):
            return None
        quality = label_free_quality(run)
    if quality is None or not costs["texts_per_s"].notna().any():
        return None
    return cheapest_within(quality, costs, points=points, cost="texts_per_s", best=verdict.get("recommended"))


def label_free_speaks(run: Run, verdict: Mapping[str, Any]) -> bool:
    """Whether the label-free score may name a cheaper model as good enough: only where its benchmark
    record supports it (the rule the product follows for the run's use is information sufficiency
    itself) and where the answer does not call the label-free ranking untrustworthy on this corpus (its
    checks' trust level is "low")."""
    from flare_core.answer.label_free import rule_for

    if ((verdict.get("trust") or {}).get("level") or "moderate") == "low":
        return False
    use = str(run.manifest.get("params", {}).get("use") or "unsure")
    return rule_for(use).get("rule") in ("flow", "gmm")


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
                    "label": f"label-free: information sufficiency ({estimator_label(estimator)}, nats per "
                    "dimension)",
                }
            ).reset_index(drop=True)
    return None
