"""The ladder of known truth: its analytic values, and the estimators on its small rungs."""

from __future__ import annotations

import numpy as np
import pytest

from bench.studies.known_truth import (
    cubic_map,
    full_rank_pair,
    gaussian_information,
    latent_pair,
    projected_information,
    shuffled,
)
from flare_core.analyses.sufficiency import sufficiency_matrix


def _joint_information(cov_u: np.ndarray, cov_v: np.ndarray, cov_vu: np.ndarray) -> float:
    """I(U; V) = H(U) + H(V) - H(U, V) from the joint covariance (an independent route to the same value)."""
    joint = np.block([[cov_u, cov_vu.T], [cov_vu, cov_v]])
    logdet = [np.linalg.slogdet(c)[1] for c in (cov_u, cov_v, joint)]
    return 0.5 * (logdet[0] + logdet[1] - logdet[2])


def test_the_full_rank_pair_has_the_textbook_information():
    pair = full_rank_pair(50, 8, sigma=0.5, seed=3)
    w = pair.cov_vu  # V = U W^T + σ ε with U ~ N(0, I): Cov(V, U) = W
    expected = 0.5 * np.linalg.slogdet(w @ w.T + 0.25 * np.eye(8))[1] - 8 * np.log(0.5)
    assert pair.information == pytest.approx(expected, rel=1e-10)
    assert pair.u.shape == pair.v.shape == (50, 8) and pair.u.dtype == np.float32


def test_the_latent_pair_agrees_with_the_joint_entropy_and_its_samples():
    pair = latent_pair(10000, 64, latent=16, seed=1)
    assert pair.information == pytest.approx(
        _joint_information(pair.cov_u, pair.cov_v, pair.cov_vu), rel=1e-9
    )
    assert gaussian_information(pair.cov_u, pair.cov_v, pair.cov_vu) == pytest.approx(pair.information)
    # the samples follow the stated covariance (sampling error of 10,000 rows)
    np.testing.assert_allclose(np.cov(pair.v.T), pair.cov_v, atol=0.1)
    np.testing.assert_allclose((pair.v.T @ pair.u) / len(pair.u), pair.cov_vu, atol=0.1)
    # the noise grows with the width so that the information stays near 8 nats
    assert 7.0 < pair.information < 8.5
    assert 7.0 < latent_pair(10, 768, seed=1).information < 8.5


def test_projections_keep_at_most_the_information_and_all_of_it_when_invertible():
    pair = latent_pair(10, 64, seed=2)
    rotation = np.linalg.qr(np.random.default_rng(0).standard_normal((64, 64)))[0]
    assert projected_information(pair, rotation, 3.0 * np.eye(64)) == pytest.approx(pair.information)
    assert projected_information(pair, np.eye(64)[:, :8], np.eye(64)) < pair.information
    with pytest.raises(ValueError, match=r"proj_u must have shape \(64, k\)"):
        projected_information(pair, np.eye(8), np.eye(64))


def test_the_cubic_map_is_increasing_and_the_shuffled_pair_carries_nothing():
    x = np.linspace(-4, 4, 101)[:, None]
    assert np.all(np.diff(cubic_map(x, np.ones(1))[:, 0]) > 0)
    pair = latent_pair(300, 64, cubic=True, seed=0)
    assert pair.cov_u is None and pair.information > 0
    with pytest.raises(ValueError, match="nonlinear map"):
        projected_information(pair, np.eye(64), np.eye(64))
    mixed = shuffled(pair, seed=1)
    assert mixed.information == 0 and np.array_equal(mixed.v, pair.v)
    assert sorted(map(tuple, mixed.u)) == sorted(map(tuple, pair.u))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="n must be"):
        latent_pair(1, 64)
    with pytest.raises(ValueError, match="noise must be"):
        latent_pair(10, 64, noise=0.0)
    with pytest.raises(ValueError, match="covariances must be"):
        gaussian_information(np.eye(2), np.eye(3), np.eye(2))


def _bar_check(estimator: str):
    """V = U W^T + 0.5 ε in 8 dimensions (4,000 rows, a fifth held out), a noisy copy of U and U with its
    rows shuffled, through the run's own pipeline (whitened width 32)."""
    pair = full_rank_pair(4000, 8, sigma=0.5, seed=0)
    noisy = pair.u + np.random.default_rng(1).standard_normal(pair.u.shape).astype(np.float32)
    pool = {"V": pair.v, "U": pair.u, "noisy U": noisy, "shuffled U": shuffled(pair, seed=2).u}
    result = sufficiency_matrix(
        pool,
        estimator=estimator,
        sources=["U", "noisy U", "shuffled U"],
        targets=["V"],
        val_fraction=0.2,
        device="cpu",
        max_dims=32,
    )
    return pair.information, result.records.set_index("source")


@pytest.mark.slow
@pytest.mark.parametrize("estimator,tolerance", [("flow", 0.10), ("gmm", 0.20)])
def test_the_8d_bar_check(estimator, tolerance):
    # measured: flows -2.6%, mixtures -8.3% of the analytic 4.38 nats
    truth, records = _bar_check(estimator)
    estimate = records.loc["U", "is_nats"]
    assert abs(estimate - truth) / truth < tolerance, (estimate, truth)
    assert records.loc["noisy U", "is_nats"] < estimate
    # the shuffled source: the raw figure before the floor is within 0.05 nats per dimension of 0
    shuffled_row = records.loc["shuffled U"]
    assert abs(shuffled_row["is_raw_nats"]) / shuffled_row["d_target"] <= 0.05
    assert shuffled_row["is_nats"] >= shuffled_row["is_raw_nats"]
    assert (records["is_nats"] >= records["is_raw_nats"] - 1e-9).all()


@pytest.mark.slow
@pytest.mark.parametrize("estimator,tolerance", [("flow", 0.10), ("gmm", 0.20)])
def test_the_64d_rung_of_16_latent_factors(estimator, tolerance):
    # measured at 2,000 texts: flows -8.2%, mixtures -6.6% of the analytic 7.36 nats (whitening to 32
    # dimensions keeps 7.15 of them)
    pair = latent_pair(2000, 64, seed=0)
    result = sufficiency_matrix(
        {"U": pair.u, "V": pair.v},
        estimator=estimator,
        sources=["U"],
        targets=["V"],
        device="cpu",
        max_dims=32,
    )
    estimate = float(result.is_matrix.loc["U", "V"])
    assert abs(estimate - pair.information) / pair.information < tolerance, (estimate, pair.information)
