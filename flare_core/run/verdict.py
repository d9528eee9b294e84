"""The plain-language verdict of a run: which model to pick, how sure we are, and which are tied."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATORS


def overlapping(scores: pd.DataFrame, model: str) -> list[str]:
    """Models whose bootstrap interval overlaps ``model``'s (they cannot be told apart on this corpus)."""
    row = scores.set_index("model").loc[model]
    others = scores[scores["model"] != model]
    hit = (others["ci_low"] <= row["ci_high"]) & (others["ci_high"] >= row["ci_low"])
    return others.loc[hit, "model"].tolist()


def verdict(
    scores: pd.DataFrame,
    *,
    estimator: str,
    stability: float | None = None,
    agreement: float | None = None,
    failed: list[str] | None = None,
) -> dict[str, Any]:
    """Build the verdict from one estimator's ranking.

    scores: columns ``model``, ``score``, ``ci_low``, ``ci_high`` (candidates only).
    stability: mean Spearman agreement of rankings made on 20% of the validation texts with the full one.
    agreement: Spearman agreement between the flow and the mixture rankings, when both exist.
    Confidence is *high* when the best model's interval overlaps no other and the ranking is stable
    (≥ 0.9), *low* when it overlaps two or more models or stability is below 0.7, else *moderate*.
    """
    if scores.empty:
        raise ValueError("no scores to build a verdict from")
    ranked = scores.sort_values("score", ascending=False).reset_index(drop=True)
    best = ranked.iloc[0]
    tied = overlapping(ranked, best["model"]) if len(ranked) > 1 else []
    stable = stability is None or (np.isfinite(stability) and stability >= 0.9)
    unstable = stability is not None and np.isfinite(stability) and stability < 0.7
    if len(tied) >= 2 or unstable:
        confidence = "low"
    elif not tied and stable:
        confidence = "high"
    else:
        confidence = "moderate"
    name = ESTIMATORS[estimator].short_label if estimator in ESTIMATORS else estimator
    sentences = [
        f"Recommended: {best['model']}.",
        f"Of the {len(ranked)} candidate models it holds the most information about the others on your texts "
        f"({name} score {best['score']:.3g} nats per target dimension, 95% interval "
        f"{best['ci_low']:.3g} to {best['ci_high']:.3g}).",
    ]
    if tied:
        sentences.append(
            f"It cannot be told apart from {_join(tied)} on this corpus: their intervals overlap, so pick among "
            "them on cost, speed or licence."
        )
    elif len(ranked) > 1:
        runner = ranked.iloc[1]
        sentences.append(f"It is clearly ahead of the runner-up, {runner['model']} ({runner['score']:.3g}).")
    if stability is not None and np.isfinite(stability):
        sentences.append(
            f"Rankings made from only 20% of the validation texts agree with the full ranking at "
            f"Spearman {stability:.2f}."
        )
    if agreement is not None and np.isfinite(agreement):
        sentences.append(f"The flow and mixture estimators agree at Spearman {agreement:.2f}.")
    if failed:
        sentences.append(f"Not ranked because they failed: {_join(failed)}.")
    sentences.append(f"Confidence: {confidence}.")
    return {
        "recommended": str(best["model"]),
        "estimator": estimator,
        "confidence": confidence,
        "tied_with": tied,
        "stability": stability,
        "estimator_agreement": agreement,
        "text": " ".join(sentences),
    }


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
