"""Choosing a model from scored pairs: Spearman correlations against scipy, paired intervals and ties."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from flare_core.choosing.pair_probes import compare_with_pair_scores


def test_the_model_that_follows_the_scores_wins_with_scipys_correlations():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, size=200)
    cosines = {
        "follows": gold + rng.normal(scale=0.5, size=200),
        "also": gold + rng.normal(scale=0.5, size=200),
        "random": rng.normal(size=200),
    }
    frame = compare_with_pair_scores(cosines, gold, seed=0).set_index("model")
    expected = {name: spearmanr(values, gold).statistic for name, values in cosines.items()}
    for name, rho in expected.items():
        assert frame.loc[name, "spearman"] == pytest.approx(rho)
    best = max(expected, key=expected.get)
    other = "also" if best == "follows" else "follows"  # as good, up to the noise: tied
    assert frame.attrs["best"] == best and frame.index[0] == best and frame.loc[best, "gap"] == 0
    assert frame.loc["random", "gap_low"] > 50 and not frame.loc["random", "tied"]  # far behind
    assert frame.loc[other, "tied"] and frame.loc[other, "gap_low"] <= 0 <= frame.loc[other, "gap_high"]
    assert frame.loc[other, "gap"] == pytest.approx(100 * (expected[best] - expected[other]))


def test_bad_pairs_are_refused():
    with pytest.raises(ValueError, match="need the same number"):
        compare_with_pair_scores({"a": np.ones(4)}, np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        compare_with_pair_scores({"a": np.array([1.0, np.nan, 2.0])}, np.ones(3))
