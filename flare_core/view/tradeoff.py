"""Quality against cost for one stored run: the frames the quality–cost chart and the "cheapest model
that is good enough" sentence read (the Overview page and the HTML report call the same functions)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.costs import (
    COST_COLUMNS,
    answer_quality,
    label_free_quality,
    label_free_speaks,
    run_costs,
)
from flare_core.answer.from_labels import tolerance_of
from flare_core.answer.stored import load_verdict
from flare_core.store.runs import Run

__all__ = [
    "COST_COLUMNS",
    "COST_WORDS",
    "cheapest_sentence",
    "cost_table",
    "run_costs",
    "run_quality",
    "tradeoff_view",
]

#: What the quality–cost section says instead of a cheaper model when the label-free score is all it has
#: and the answer does not trust that score for quality on this run.
NOT_SUGGESTED = (
    "No cheaper model is suggested: without labels, the score in this chart is not trusted to say which "
    "models are good enough on your texts. Label a few texts or judge a few queries (Check with a few "
    "labels) to weigh quality against cost."
)

#: The cost columns in words, as the page and the report show them.
COST_WORDS = {
    "model": "model",
    "texts_per_s": "texts per second",
    "chars_per_s": "characters per second",
    "load_s": "seconds to load",
    "peak_memory_mib": "peak memory (MiB)",
    "model_size_mib": "size (MiB)",
    "bytes_per_vector_float32": "bytes per vector (float32)",
    "bytes_per_vector_int8": "bytes per vector (int8)",
    "device": "device",
}
#: The label-based quality of a run, by the downstream metric it has: (column, words).
_LABELLED = (
    ("accuracy", "accuracy on the labels (points: 5-fold logistic regression)"),
    ("cosine_spearman", "agreement with the similarity scores (Spearman ρ × 100)"),
    ("ndcg_at_10", "retrieval nDCG@10 × 100"),
)


def run_quality(run: Run) -> pd.DataFrame | None:
    """What the run says of each ranked model's quality: ``model``, ``quality``, ``ci_low``, ``ci_high``,
    ``label``. The answer's own when it rests on labels (:func:`~flare_core.answer.costs.answer_quality`),
    else the downstream score when the run has one (classification accuracy, similarity or retrieval, in
    points), else the label-free information-sufficiency score with its bootstrap interval (its label starts
    with "label-free"); None when the run has none yet."""
    verdict = load_verdict(run)
    if verdict is not None:
        quality = answer_quality(verdict, tolerance_of(run))
        if quality is not None:
            return quality
    ranked = set(run_costs(run)["model"])
    if run.has("downstream.parquet"):
        downstream = run.load_frame("downstream.parquet")
        for column, words in _LABELLED:
            if column in downstream.columns and downstream[column].notna().any():
                frame = downstream[downstream["model"].isin(ranked)]
                return pd.DataFrame(
                    {
                        "model": frame["model"],
                        "quality": 100.0 * frame[column].astype(float),
                        "ci_low": np.nan,
                        "ci_high": np.nan,
                        "label": words,
                    }
                ).reset_index(drop=True)
    return label_free_quality(run)


def tradeoff_view(run: Run, quality: pd.DataFrame | None = None) -> dict[str, Any] | None:
    """``{"quality", "costs", "best"}`` of ``run`` for the quality–cost chart (``quality`` replaces the
    run's own :func:`run_quality`; ``best``: the answer's choice when the quality is the answer's own or
    label-free, else None), or None when the run has no quality or no measured cost yet."""
    costs = run_costs(run)
    own = quality is None
    quality = run_quality(run) if quality is None else quality
    if quality is None or quality.empty or not costs["texts_per_s"].notna().any():
        return None
    verdict = load_verdict(run) or {}
    # the answer's choice is what the other models are measured against, on the answer's own quality or
    # the label-free score (a downstream score of the run's labels names its own best)
    answers = own and (
        "good_enough" in quality.columns or str(quality["label"].iloc[0]).startswith("label-free")
    )
    # a label-free score names no cheaper model where the answer does not trust it for quality
    free = str(quality["label"].iloc[0]).startswith("label-free")
    suggest = not free or label_free_speaks(run, verdict)
    return {
        "quality": quality,
        "costs": costs,
        "best": verdict.get("recommended") if answers else None,
        "suggest": suggest,
    }


def cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """The measured costs with headings in words (:data:`COST_WORDS`), fastest model first."""
    ordered = costs.sort_values("texts_per_s", ascending=False, na_position="last", kind="stable")
    return ordered.rename(columns=COST_WORDS).reset_index(drop=True)


def cheapest_sentence(view: dict[str, Any], cost: str = "texts_per_s") -> str | None:
    """The "cheapest model that is good enough" sentence of a :func:`tradeoff_view` (None without one)."""
    from flare_core.choosing.tradeoff import cheapest_within

    if not view.get("suggest", True):
        return NOT_SUGGESTED
    pick = cheapest_within(view["quality"], view["costs"], cost=cost, best=view.get("best"))
    return None if pick is None else str(pick["sentence"])
