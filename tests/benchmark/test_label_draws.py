"""The labels' benchmark on a tiny synthetic pool whose best model is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core.benchmark.label_draws import (
    few_label_draws,
    few_label_table,
    full_label_table,
    stopping_table,
)


def _pool(n: int = 90, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    onehot = np.eye(3)[y]
    pool = {
        "clear": np.hstack([4.0 * onehot, rng.normal(size=(n, 4))]),
        "blurred": np.hstack([0.1 * onehot, rng.normal(size=(n, 4))]),
        "noise": rng.normal(size=(n, 7)),
    }
    return pool, np.array(["x", "y", "z"])[y]


def test_few_label_draws_judge_every_method_against_the_oracle():
    pool, labels = _pool()
    oracle = pd.Series({"clear": 1.0, "blurred": 0.5, "noise": 0.33})
    draws = few_label_draws(pool, labels, ks=(8, 16), draws=3, oracle=oracle)
    assert len(draws) == 3 * 2 * 5 and set(draws["texts"]) == {"random", "chosen"}
    # points lost are the oracle's gaps: 0 for the clear model, 50 for the blurred one, 67 for noise
    expected = {"clear": 0.0, "blurred": 50.0, "noise": 67.0}
    assert np.allclose(draws["points_lost"], draws["pick"].map(expected))
    assert (draws["within"] == (draws["points_lost"] <= 2)).all()
    table = few_label_table(draws)
    product = table[(table["estimator"] == "product") & (table["k"] == 16)]
    assert (product["share_within"] == 1.0).all() and (product["draws"] == 3).all()
    stop = stopping_table(draws, texts="chosen")
    assert list(stop["k"]) == [8, 16] and stop["share_settled"].between(0, 1).all()
    settled = stop.dropna()
    assert (settled["settled_within"] == 1.0).all()


def test_few_label_draws_are_seeded():
    pool, labels = _pool()
    oracle = pd.Series({"clear": 1.0, "blurred": 0.5, "noise": 0.33})
    one = few_label_draws(pool, labels, ks=(8,), draws=2, oracle=oracle, seed=4)
    two = few_label_draws(pool, labels, ks=(8,), draws=2, oracle=oracle, seed=4)
    pd.testing.assert_frame_equal(one, two)


def test_full_label_table_picks_on_one_half_and_judges_on_the_other():
    pool, labels = _pool(n=120)
    table = full_label_table(pool, labels, splits=2)
    assert list(table["pick"]) == ["clear", "clear"]
    assert (table["points_lost"] == 0).all() and (table["best_tied_lost"] == 0).all()
    assert (table["points_lost_tuned"] == 0).all()
    with pytest.raises(ValueError, match="splits"):
        full_label_table(pool, labels, splits=0)
