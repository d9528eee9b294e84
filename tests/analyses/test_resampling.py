"""The one percentile bootstrap against scipy.stats.bootstrap and numpy's percentiles, and its blocks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from flare_core.analyses.resampling import percentile_bootstrap, percentile_interval, resamples


@pytest.mark.parametrize(("n", "draws", "level"), [(37, 999, 0.9), (5, 200, 0.95), (120, 1000, 0.5)])
def test_the_mean_s_interval_is_scipy_s_percentile_bootstrap(n, draws, level):
    x = np.random.default_rng(n).normal(size=n)
    ours = percentile_bootstrap(
        lambda rows: x[rows].mean(axis=1), n, draws=draws, rng=np.random.default_rng(4), level=level
    )
    theirs = stats.bootstrap(
        (x,),
        np.mean,
        n_resamples=draws,
        method="percentile",
        rng=np.random.default_rng(4),
        confidence_level=level,
    )
    assert ours[0] == pytest.approx(theirs.confidence_interval.low, abs=1e-12)
    assert ours[1] == pytest.approx(theirs.confidence_interval.high, abs=1e-12)
    assert np.sort(ours[2]) == pytest.approx(np.sort(theirs.bootstrap_distribution), abs=1e-12)


def test_the_interval_of_known_replicates():
    values = np.arange(101.0)  # the p-th percentile of 0..100 is p
    low, high = percentile_interval(values, 0.9)
    assert (float(low), float(high)) == pytest.approx((5.0, 95.0))
    # NaN replicates are left out; a column with none finite has no interval
    table = np.column_stack([np.r_[values, np.nan, np.nan], np.full(103, np.nan)])
    low, high = percentile_interval(table, 0.9)
    assert low[0] == pytest.approx(5.0) and high[0] == pytest.approx(95.0)
    assert np.isnan(low[1]) and np.isnan(high[1])
    # along another axis, and with no replicate at all
    low, high = percentile_interval(values[None, :], 0.5, axis=1)
    assert low.tolist() == [25.0] and high.tolist() == [75.0]
    empty = percentile_interval(np.zeros((0, 3)))
    assert np.isnan(empty[0]).all() and empty[0].shape == (3,)
    with pytest.raises(ValueError, match="level"):
        percentile_interval(values, 1.0)


def test_resamples_are_the_generator_s_integers_in_blocks():
    one = list(resamples(9, 10, np.random.default_rng(1)))
    assert len(one) == 1 and np.array_equal(one[0], np.random.default_rng(1).integers(0, 9, size=(10, 9)))
    blocks = list(resamples(9, 10, np.random.default_rng(1), block=4))
    assert [b.shape for b in blocks] == [(4, 9), (4, 9), (2, 9)]
    rng = np.random.default_rng(1)
    expected = [rng.integers(0, 9, size=(size, 9)) for size in (4, 4, 2)]
    assert all(np.array_equal(b, e) for b, e in zip(blocks, expected, strict=True))
    assert list(resamples(9, 0, np.random.default_rng(1))) == []
