"""The validity benchmark's arithmetic against hand-built cases and scipy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from flare_core.analyses.geometry import uniformity
from flare_core.choosing.validity import agreement, baseline_scores, oracle_scores, regret_points


def _blobs(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    labels = ["a", "b"] * (n // 2)
    centres = np.where(np.array(labels)[:, None] == "a", 4.0, -4.0)
    separable = centres + rng.normal(size=(n, 8))
    noise = rng.normal(size=(n, 8))
    return separable, noise, labels


def test_oracle_accuracy_is_perfect_on_separated_classes_and_near_chance_on_noise():
    separable, noise, labels = _blobs()
    oracle = oracle_scores({"separable": separable, "noise": noise}, labels=labels)
    assert oracle.loc["separable", "accuracy"] == 1.0 and oracle.loc["separable", "knn_accuracy"] == 1.0
    assert 0.3 < oracle.loc["noise", "accuracy"] < 0.7 and 0.3 < oracle.loc["noise", "knn_accuracy"] < 0.7


def test_similarity_oracle_is_the_spearman_of_pair_cosines_with_the_scores():
    angles = np.array([0.0, 0.1, 0.3, 0.7, 1.5, 3.1]) / 2.5  # all pair gaps distinct: no tied scores
    on_circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    i, j = np.triu_indices(6, k=1)
    pairs = pd.DataFrame({"i": i, "j": j, "score": -np.abs(angles[i] - angles[j])})  # closer = more similar
    rng = np.random.default_rng(1)
    other = rng.normal(size=(6, 3))
    oracle = oracle_scores({"circle": on_circle, "other": other}, pairs=pairs)
    assert oracle.loc["circle", "sts_spearman"] == pytest.approx(1.0)
    unit = other / np.linalg.norm(other, axis=1, keepdims=True)
    expected = spearmanr((unit[i] * unit[j]).sum(axis=1), pairs["score"]).statistic
    assert oracle.loc["other", "sts_spearman"] == pytest.approx(expected)


def test_oracle_needs_exactly_one_kind_of_truth():
    separable, _, labels = _blobs()
    pairs = pd.DataFrame({"i": [0], "j": [1], "score": [1.0]})
    for kwargs in ({}, {"labels": labels, "pairs": pairs}):
        with pytest.raises(ValueError, match="either labels"):
            oracle_scores({"m": separable}, **kwargs)


def test_baselines_are_oriented_higher_is_better_and_ignore_zero_rows_for_uniformity():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 6))
    with_zero = np.vstack([x, np.zeros((5, 6))])
    table = baseline_scores({"m": with_zero}, n_clusters=3)
    assert table.loc["m", "uniformity"] == pytest.approx(-uniformity(x))
    assert table.loc["m", "dim"] == 6.0
    with pytest.raises(ValueError, match="n_clusters"):
        baseline_scores({"m": x}, n_clusters=1)


def test_agreement_matches_scipy_and_its_extremes():
    models = [f"m{k}" for k in range(6)]
    oracle = pd.Series([0.5, 0.6, 0.7, 0.8, 0.9, 0.95], index=models)
    rng = np.random.default_rng(3)
    noisy = rng.normal(size=6)
    scores = pd.DataFrame(
        {"same": oracle.values * 3, "reverse": -oracle.values, "noisy": noisy}, index=models
    )
    table = agreement(scores, oracle, models).set_index("score")
    assert table.loc["same", "spearman"] == pytest.approx(1.0)
    assert table.loc["reverse", "spearman"] == pytest.approx(-1.0)
    assert table.loc["noisy", "spearman"] == pytest.approx(spearmanr(noisy, oracle.values).statistic)
    assert (table["n_models"] == 6).all()
    # restricted to a subset, only those models count
    assert agreement(scores, oracle, models[:4]).set_index("score").loc["same", "n_models"] == 4


def test_regret_is_the_points_lost_against_the_best_of_the_candidates():
    oracle = pd.Series({"a": 0.80, "b": 0.71, "control": 0.95})
    assert regret_points(oracle, "b", ["a", "b"]) == pytest.approx(9.0)
    assert regret_points(oracle, "a", ["a", "b"]) == 0.0
    assert np.isnan(regret_points(oracle, None, ["a", "b"]))
