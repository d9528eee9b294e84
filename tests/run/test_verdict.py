from __future__ import annotations

import pandas as pd
import pytest

from flare_core.run.verdict import overlapping, verdict


def _scores(rows):
    return pd.DataFrame(rows, columns=["model", "score", "ci_low", "ci_high"])


def test_clear_winner_with_stable_ranking_is_high_confidence():
    scores = _scores([("a", 0.5, 0.45, 0.55), ("b", 0.3, 0.25, 0.35), ("c", 0.1, 0.05, 0.15)])
    out = verdict(scores, estimator="flow", stability=0.95)
    assert out["recommended"] == "a"
    assert out["confidence"] == "high"
    assert out["tied_with"] == []
    assert "Recommended: a." in out["text"] and "runner-up, b" in out["text"]


def test_overlapping_intervals_are_reported_as_indistinguishable():
    scores = _scores([("a", 0.5, 0.40, 0.60), ("b", 0.45, 0.35, 0.55), ("c", 0.1, 0.05, 0.15)])
    assert overlapping(scores, "a") == ["b"]
    out = verdict(scores, estimator="gmm", stability=0.95)
    assert out["tied_with"] == ["b"] and out["confidence"] == "moderate"
    assert "cannot be told apart from b" in out["text"]


@pytest.mark.parametrize(
    ("stability", "rows", "expected"),
    [
        (0.5, [("a", 0.5, 0.45, 0.55), ("b", 0.3, 0.25, 0.35)], "low"),  # unstable
        (0.95, [("a", 0.5, 0.3, 0.7), ("b", 0.45, 0.3, 0.6), ("c", 0.4, 0.3, 0.5)], "low"),  # two ties
        (0.8, [("a", 0.5, 0.45, 0.55), ("b", 0.3, 0.25, 0.35)], "moderate"),  # not stable enough for high
    ],
)
def test_confidence_levels(stability, rows, expected):
    assert verdict(_scores(rows), estimator="flow", stability=stability)["confidence"] == expected


def test_failed_models_are_named_and_empty_scores_refused():
    scores = _scores([("a", 0.5, 0.45, 0.55)])
    assert "failed: x and y" in verdict(scores, estimator="flow", failed=["x", "y"])["text"]
    with pytest.raises(ValueError, match="no scores"):
        verdict(scores.iloc[:0], estimator="flow")
