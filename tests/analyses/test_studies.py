from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core.analyses.studies import partially_shuffled, pool_size_study, shuffle_study


def test_partial_shuffle_moves_about_a_fraction_p_of_rows():
    x = np.arange(1000)
    rng = np.random.default_rng(0)
    assert np.array_equal(partially_shuffled(x, 0.0, rng), x)
    moved = (partially_shuffled(x, 0.4, rng) != x).mean()
    assert 0.35 < moved <= 0.4
    full = partially_shuffled(x, 1.0, rng)
    assert sorted(full.tolist()) == x.tolist() and (full != x).mean() > 0.99
    with pytest.raises(ValueError, match="p must be"):
        partially_shuffled(x, 1.5, rng)


def test_pool_size_study_on_a_consistent_matrix_agrees_perfectly():
    # IS/d where model i is better than model j for every target: every sub-pool ranks like the full pool
    names = list("abcde")
    strength = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    values = np.outer(strength, np.ones(5))
    np.fill_diagonal(values, np.nan)
    matrix = pd.DataFrame(values, index=names, columns=names)
    frame = pool_size_study(matrix, repeats=5, seed=0)
    assert sorted(frame["pool_size"].unique()) == [3, 4, 5]
    assert np.allclose(frame["rank_agreement"], 1.0)
    assert (frame["pool_size"] == 5).sum() == 1


def test_pool_size_study_needs_three_models():
    matrix = pd.DataFrame([[np.nan, 1.0], [2.0, np.nan]], index=["a", "b"], columns=["a", "b"])
    with pytest.raises(ValueError, match="at least 3"):
        pool_size_study(matrix)


@pytest.mark.slow
def test_shuffle_study_destroys_the_is_signal_at_p_1():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(500, 4))
    # two models: each p trains both directions (a -> b, b -> a), the fewest pairs a study has
    pool = {"a": base, "b": base @ rng.normal(size=(4, 5)) + 0.3 * rng.normal(size=(500, 5))}
    from flare_core.analyses.sufficiency import FlowConfig

    frame = shuffle_study(pool, ps=(0.0, 1.0), estimator="flow", config=FlowConfig.fast(), seed=0)
    intact, shuffled = frame.set_index("p")["mean_is_per_dim"].loc[[0.0, 1.0]]
    assert intact > 0.3  # strongly dependent models share a lot of information
    assert abs(shuffled) <= 0.05  # with the pairing destroyed, nothing is left (≤ 0.05 nats/dim)
