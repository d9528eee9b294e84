"""Correlation table and ranking correlation against known vectors and scipy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr

from flare_core.analyses.correlate import (
    COLUMNS,
    correlation_table,
    ranking_correlation,
    spearman,
    spearman_rows,
)
from tests.properties import assert_finite

MODELS = [f"m{i}" for i in range(8)]


def _frames():
    rng = np.random.default_rng(0)
    base = np.arange(8, dtype=float)
    label_free = pd.DataFrame(
        {"mono": np.exp(base), "rev": -base, "noisy": base + rng.normal(0, 2, 8), "const": np.ones(8)},
        index=MODELS,
    )
    downstream = pd.DataFrame({"accuracy": base / 10.0}, index=MODELS)
    return label_free, downstream


def _row(table: pd.DataFrame, lf: str, ds: str = "accuracy") -> pd.Series:
    return table[(table["label_free"] == lf) & (table["downstream"] == ds)].iloc[0]


def test_table_shape_and_columns():
    lf, ds = _frames()
    table = correlation_table(lf, ds, n_boot=200)
    assert list(table.columns) == COLUMNS
    assert len(table) == 4
    assert list(table["label_free"]) == ["mono", "rev", "noisy", "const"]


def test_perfect_monotonic_and_reversed():
    lf, ds = _frames()
    table = correlation_table(lf, ds, n_boot=200)
    mono, rev = _row(table, "mono"), _row(table, "rev")
    assert mono["spearman_rho"] == pytest.approx(1.0) and mono["kendall_tau"] == pytest.approx(1.0)
    assert mono["pearson_r"] < 1.0  # exponential is monotonic, not linear
    assert rev["spearman_rho"] == pytest.approx(-1.0) and rev["kendall_tau"] == pytest.approx(-1.0)
    assert rev["pearson_r"] == pytest.approx(-1.0)
    assert mono["spearman_ci_low"] == pytest.approx(1.0) and mono["spearman_ci_high"] == pytest.approx(1.0)


def test_matches_scipy_reference_values():
    lf, ds = _frames()
    row = _row(correlation_table(lf, ds, n_boot=0), "noisy")
    a, b = lf["noisy"].to_numpy(), ds["accuracy"].to_numpy()
    assert row["spearman_rho"] == pytest.approx(spearmanr(a, b).statistic)
    assert row["spearman_p"] == pytest.approx(spearmanr(a, b).pvalue)
    assert row["pearson_r"] == pytest.approx(pearsonr(a, b).statistic)
    assert row["pearson_p"] == pytest.approx(pearsonr(a, b).pvalue)
    assert row["kendall_tau"] == pytest.approx(kendalltau(a, b).statistic)
    assert row["kendall_p"] == pytest.approx(kendalltau(a, b).pvalue)
    assert np.isnan(row["spearman_ci_low"])  # n_boot = 0


def test_constant_column_gives_nan_without_crash():
    lf, ds = _frames()
    row = _row(correlation_table(lf, ds, n_boot=100), "const")
    stats = ["spearman_rho", "spearman_p", "pearson_r", "kendall_tau", "spearman_ci_low"]
    assert all(np.isnan(row[s]) for s in stats)
    assert row["n_models"] == 8


def test_bootstrap_interval_contains_estimate_and_is_seeded():
    lf, ds = _frames()
    table = correlation_table(lf, ds, n_boot=500, seed=3)
    row = _row(table, "noisy")
    assert row["spearman_ci_low"] <= row["spearman_rho"] <= row["spearman_ci_high"]
    assert 0 < row["n_boot_valid"] <= 500
    assert_finite([row["spearman_ci_low"], row["spearman_ci_high"]])
    again = correlation_table(lf[["noisy"]], ds, n_boot=500, seed=3).iloc[0]
    assert again["spearman_ci_low"] == row["spearman_ci_low"]  # independent of other columns


def test_shared_models_only_and_small_pools():
    lf, ds = _frames()
    table = correlation_table(lf.iloc[:6], ds.iloc[2:].assign(extra=np.nan), n_boot=100)
    row = _row(table, "rev")
    assert row["n_models"] == 4 and row["spearman_rho"] == pytest.approx(-1.0)
    assert np.isnan(row["spearman_ci_low"])  # fewer than 5 models: no bootstrap
    assert _row(table, "rev", "extra")["n_models"] == 0


def test_validation():
    lf, ds = _frames()
    with pytest.raises(ValueError, match="DataFrame"):
        correlation_table(lf["mono"], ds)
    with pytest.raises(ValueError, match="share no model"):
        correlation_table(lf, ds.set_axis([f"x{i}" for i in range(8)]))
    with pytest.raises(ValueError, match="not numeric"):
        correlation_table(lf.assign(text="a"), ds)
    with pytest.raises(ValueError, match="duplicated models"):
        correlation_table(lf.set_axis(["m0"] * 8), ds)
    with pytest.raises(ValueError, match="ci must be"):
        correlation_table(lf, ds, ci=1.5)


def test_ranking_correlation():
    a = pd.Series([1.0, 2.0, 3.0, 4.0], index=["a", "b", "c", "d"])
    b = pd.Series([40.0, 30.0, 20.0, 10.0, 99.0], index=["a", "b", "c", "d", "e"])
    assert ranking_correlation(a, b) == pytest.approx(-1.0)
    assert ranking_correlation(a, a**3) == pytest.approx(1.0)
    assert np.isnan(ranking_correlation(a, a * 0))
    with pytest.raises(ValueError, match="Series"):
        ranking_correlation(a.to_numpy(), b)


def test_spearman_by_hand_and_against_pandas():
    # ranks 1,2,3,4 against 2,1,4,3: d = (-1, 1, -1, 1), rho = 1 - 6 * 4 / (4 * 15) = 0.6
    assert spearman([10.0, 20.0, 30.0, 40.0], [2.0, 1.0, 9.0, 5.0]) == pytest.approx(0.6, abs=1e-15)
    # ties take average ranks, non-finite pairs are left out, as pandas' corr(method="spearman") does
    x = np.array([1.0, 2.0, 2.0, 5.0, np.nan, 7.0, 3.0])
    y = np.array([3.0, 1.0, 4.0, 4.0, 8.0, np.nan, 0.5])
    expected = pd.Series(x).corr(pd.Series(y), method="spearman")
    assert spearman(x, y) == pytest.approx(expected, abs=1e-12)
    assert np.isnan(spearman([1.0, 2.0, 3.0], [4.0, 4.0, 4.0])) and np.isnan(spearman([1.0], [2.0]))
    with pytest.raises(ValueError, match="one length"):
        spearman([1.0, 2.0], [1.0, 2.0, 3.0])


def test_spearman_rows_are_scipy_s_spearmanr_row_by_row():
    rng = np.random.default_rng(4)
    a = np.round(rng.normal(size=(30, 9)), 1)  # rounded: ties
    b = np.round(rng.normal(size=(30, 9)), 1)
    a[3] = 1.0  # a constant row has no correlation
    expected = [spearmanr(a[i], b[i]).statistic if i != 3 else np.nan for i in range(30)]
    assert spearman_rows(a, b) == pytest.approx(np.array(expected), abs=1e-12, nan_ok=True)
    against_one = [spearmanr(a[i], b[0]).statistic if i != 3 else np.nan for i in range(30)]
    assert spearman_rows(a, b[0]) == pytest.approx(np.array(against_one), abs=1e-12, nan_ok=True)
