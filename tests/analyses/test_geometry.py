"""Label-free baselines against analytic and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ortho_group

from flare_core.analyses.geometry import (
    effective_rank,
    geometry_report,
    isoscore,
    silhouette,
    silhouette_result,
    uniformity,
    uniformity_result,
)
from tests.properties import assert_finite, assert_invariant


def _blobs(n_per: int = 40, d: int = 8, k: int = 3, spread: float = 0.05, seed: int = 0):
    """``k`` tight blobs around orthogonal directions: x (k*n_per, d), labels (k*n_per,)."""
    rng = np.random.default_rng(seed)
    centres = np.eye(d)[:k] * 5.0
    x = np.concatenate([c + spread * rng.standard_normal((n_per, d)) for c in centres])
    return x, np.repeat(np.arange(k), n_per)


def _with_singular_values(s: np.ndarray, n: int = 50, seed: int = 0) -> np.ndarray:
    """A centred (n, d) matrix whose singular values are exactly ``s`` (d,)."""
    rng = np.random.default_rng(seed)
    d = s.shape[0]
    a = rng.standard_normal((n, d))
    q, _ = np.linalg.qr(a - a.mean(axis=0))  # columns orthonormal and orthogonal to the ones vector
    return q @ np.diag(s) @ ortho_group.rvs(d, random_state=seed)


# ---------------------------------------------------------------------------------------------- IsoScore


def test_isoscore_isotropic_gaussian_is_near_one():
    x = np.random.default_rng(0).standard_normal((5000, 16))
    assert isoscore(x) > 0.95


def test_isoscore_rank_one_cloud_is_near_zero():
    rng = np.random.default_rng(1)
    x = np.outer(rng.standard_normal(500), rng.standard_normal(16))
    assert isoscore(x) < 0.05


def test_isoscore_matches_paper_formula_by_hand():
    # variances 4, 1 along the axes of a 2-d cloud: n = 2
    x = _with_singular_values(np.array([2.0, 1.0]), n=50) * np.sqrt(49)
    var = np.array([4.0, 1.0])
    n = 2
    hat = np.sqrt(n) * var / np.linalg.norm(var)
    delta = np.linalg.norm(hat - 1) / np.sqrt(2 * (n - np.sqrt(n)))
    expected = ((n - delta**2 * (n - np.sqrt(n))) ** 2 - n) / (n * (n - 1))
    assert isoscore(x) == pytest.approx(expected, rel=1e-9)


def test_isoscore_invariances():
    x = np.random.default_rng(2).standard_normal((200, 6)) * np.array([3, 2, 1, 1, 0.5, 0.1])
    rot = ortho_group.rvs(6, random_state=3)
    perm = np.random.default_rng(4).permutation(200)
    assert_invariant(isoscore, [x], [x @ rot], name="isoscore under rotation")
    assert_invariant(isoscore, [x], [x[perm]], name="isoscore under row permutation")
    assert_invariant(isoscore, [x], [3.0 * x + 7.0], name="isoscore under scaling and shift")


# ------------------------------------------------------------------------------------------ effective rank


def test_effective_rank_known_singular_values():
    s = np.array([4.0, 2.0, 1.0, 1.0])
    p = s / s.sum()
    by_hand = np.exp(-np.sum(p * np.log(p)))
    assert effective_rank(_with_singular_values(s)) == pytest.approx(by_hand, rel=1e-9)


def test_effective_rank_equal_singular_values_is_dimension():
    assert effective_rank(_with_singular_values(np.full(7, 3.0))) == pytest.approx(7.0, rel=1e-9)


def test_effective_rank_invariances():
    x = np.random.default_rng(5).standard_normal((100, 5)) * np.array([5, 3, 1, 0.5, 0.1])
    rot = ortho_group.rvs(5, random_state=6)
    perm = np.random.default_rng(7).permutation(100)
    assert_invariant(effective_rank, [x], [x @ rot], name="effective rank under rotation")
    assert_invariant(effective_rank, [x], [x[perm]], name="effective rank under row permutation")


# ---------------------------------------------------------------------------------------------- uniformity


def test_uniformity_bounds_on_sphere():
    x = np.random.default_rng(8).standard_normal((300, 10))
    assert -4.0 <= uniformity(x) <= 0.0
    # Jensen: U >= -2t N / (N - 1); an antipodal pair (N = 2, ||x_i - x_j||^2 = 4) attains it
    assert uniformity(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(-8.0)
    simplex = np.eye(4) - 0.25  # regular simplex, mean zero: also attains the bound
    assert uniformity(simplex) == pytest.approx(-4.0 * 4 / 3)
    for seed in range(3):
        pts = np.random.default_rng(seed).standard_normal((int(5 + 10 * seed), 3))
        assert -4.0 * len(pts) / (len(pts) - 1) - 1e-12 <= uniformity(pts) <= 0.0


def test_uniformity_identical_points_is_zero():
    assert uniformity(np.tile([[0.3, -1.2, 2.0]], (20, 1))) == pytest.approx(0.0, abs=1e-12)


def test_uniformity_by_hand_three_points():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])  # unit directions e1, e2, -e1
    sq = np.array([2.0, 4.0, 2.0])
    assert uniformity(x, t=2.0) == pytest.approx(np.log(np.mean(np.exp(-2.0 * sq))), rel=1e-12)


def test_uniformity_sampled_close_to_exact():
    x = np.random.default_rng(9).standard_normal((400, 8))
    exact = uniformity_result(x)
    sampled = uniformity_result(x, max_pairs=20_000, seed=1)
    assert exact.exact and exact.n_pairs == 400 * 399 // 2
    assert not sampled.exact and sampled.n_pairs == 20_000
    assert sampled.value == pytest.approx(exact.value, abs=0.02)
    assert uniformity(x, max_pairs=20_000, seed=1) == sampled.value  # seeded


def test_uniformity_row_permutation_and_scale_invariant():
    x = np.random.default_rng(10).standard_normal((60, 5))
    perm = np.random.default_rng(11).permutation(60)
    assert_invariant(uniformity, [x], [x[perm]], name="uniformity under row permutation")
    assert_invariant(uniformity, [x], [x * 5.0], name="uniformity under scaling")


def test_uniformity_rejects_zero_rows_and_bad_t():
    with pytest.raises(ValueError, match="all-zero rows"):
        uniformity(np.array([[0.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="t must be"):
        uniformity(np.eye(3), t=0)


# ---------------------------------------------------------------------------------------------- silhouette


def test_silhouette_separated_blobs_high():
    x, y = _blobs()
    assert silhouette(x, y) > 0.8
    res = silhouette_result(x, n_clusters=3)
    assert res.source == "kmeans" and res.n_clusters == 3 and res.value > 0.8


def test_silhouette_random_labels_near_zero():
    x = np.random.default_rng(12).standard_normal((600, 8))
    y = np.random.default_rng(13).integers(0, 4, 600)
    assert abs(silhouette(x, y)) < 0.05


def test_silhouette_samples_large_inputs_and_permutation_invariance():
    x, y = _blobs(n_per=300)
    res = silhouette_result(x, y, max_samples=200, seed=0)
    assert res.n_samples == 200 and res.value > 0.8
    small_x, small_y = _blobs(n_per=15, spread=1.0)
    perm = np.random.default_rng(14).permutation(len(small_x))
    assert_invariant(silhouette, [small_x, small_y], [small_x[perm], small_y[perm]], name="silhouette")


def test_silhouette_label_validation():
    x, y = _blobs(n_per=5)
    with pytest.raises(ValueError, match="entries but x has"):
        silhouette(x, y[:-1])
    with pytest.raises(ValueError, match="distinct labels"):
        silhouette(x, np.zeros(len(x)))
    with pytest.raises(ValueError, match="missing values"):
        silhouette(x, np.array([None] + ["a"] * (len(x) - 1), dtype=object))


# ----------------------------------------------------------------------------------------------- report


def test_geometry_report_keys_and_values():
    x, y = _blobs(n_per=20)
    rep = geometry_report(x, y)
    assert rep["n"] == 60 and rep["dim"] == 8
    assert rep["uniformity_exact"] and rep["uniformity_pairs"] == 60 * 59 // 2
    assert rep["silhouette_source"] == "labels" and rep["silhouette_clusters"] == 3
    assert rep["uniformity"] == pytest.approx(uniformity(x))
    assert rep["isoscore"] == pytest.approx(isoscore(x))
    assert rep["effective_rank"] == pytest.approx(effective_rank(x))
    assert_finite([rep[k] for k in ("uniformity", "isoscore", "effective_rank", "silhouette")])


def test_geometry_report_degenerate_gives_nan_not_error():
    rep = geometry_report(np.ones((10, 4)))
    assert rep["uniformity"] == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(rep["isoscore"]) and np.isnan(rep["effective_rank"]) and np.isnan(rep["silhouette"])
    with pytest.raises(ValueError, match="zero variance"):
        isoscore(np.ones((10, 4)))


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.ones(5), "shape \\(N, d\\)"),
        (np.array([[1.0, np.nan], [0.0, 1.0], [1.0, 1.0]]), "non-finite"),
        (np.ones((2, 3)), "at least 3 rows"),
        ([["a", "b"]], "numeric"),
    ],
)
def test_geometry_report_validates(bad, match):
    with pytest.raises(ValueError, match=match):
        geometry_report(bad)
