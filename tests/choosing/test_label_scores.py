"""Few-label scores against direct computations: LogME's evidence by its Gaussian density and a numerical
optimum, the closed-form leave-one-out ridge by refitting without each row, kNN by scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import multivariate_normal
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import cross_val_predict

from flare_core.choosing import label_scores as ls


def _direct_log_evidence(f: np.ndarray, y: np.ndarray, alpha: float, beta: float) -> float:
    """log N(y; 0, I/beta + f fᵀ/alpha): the marginal likelihood of the Bayesian linear model."""
    cov = np.eye(f.shape[0]) / beta + f @ f.T / alpha
    return float(multivariate_normal(np.zeros(f.shape[0]), cov).logpdf(y))


@pytest.mark.parametrize("shape", [(12, 3), (5, 9)])  # more rows than features, and fewer
def test_logme_is_the_maximum_of_the_direct_evidence(shape):
    rng = np.random.default_rng(0)
    f = rng.normal(size=shape)
    y = f @ rng.normal(size=shape[1]) + 0.5 * rng.normal(size=shape[0])
    per_text, alpha, beta = ls.logme_evidence(f, y)
    assert per_text * shape[0] == pytest.approx(_direct_log_evidence(f, y, alpha, beta), rel=1e-9)
    best = minimize(lambda p: -_direct_log_evidence(f, y, np.exp(p[0]), np.exp(p[1])), [0.0, 0.0])
    # with fewer rows than features the evidence rises towards a supremum as the noise vanishes
    # (beta -> infinity); the paper's fixed point stops just short of it
    assert per_text * shape[0] == pytest.approx(-best.fun, abs=1e-3 if shape[0] > shape[1] else 1e-2)


def test_logme_of_classes_is_the_mean_over_one_hot_columns_and_prefers_separating_features():
    rng = np.random.default_rng(1)
    y = np.arange(30) % 3
    good = np.eye(3)[y] + 0.1 * rng.normal(size=(30, 3))
    noise = rng.normal(size=(30, 3))
    expected = np.mean([ls.logme_evidence(good, (y == c).astype(float))[0] for c in range(3)])
    assert ls.logme(good, y) == pytest.approx(expected)
    assert ls.logme(good, y) > ls.logme(noise, y)


def test_ridge_leave_one_out_equals_refitting_without_each_row():
    rng = np.random.default_rng(2)
    y = np.arange(20) % 3
    x = np.hstack([np.eye(3)[y] * 0.8, np.zeros((20, 3))]) + rng.normal(size=(20, 6))
    for penalty in (0.1, 3.0):
        onehot = np.eye(3)[y]
        loo = np.empty_like(onehot)
        for i in range(20):
            keep = np.arange(20) != i
            loo[i] = Ridge(alpha=penalty).fit(x[keep], onehot[keep]).predict(x[i : i + 1])[0]
        assert np.array_equal(ls.ridge_loo_correct(x, y, penalties=(penalty,)), loo.argmax(axis=1) == y)


def test_knn_leave_one_out_matches_a_one_neighbour_search_and_cv_matches_sklearn():
    rng = np.random.default_rng(3)
    y = np.arange(24) % 2
    x = np.column_stack([y * 2.0 - 1, np.zeros(24)]) + rng.normal(size=(24, 2))
    unit = ls.unit_rows(x)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    assert np.array_equal(ls.knn_loo_correct(x, y, neighbours=1), y[sims.argmax(axis=1)] == y)
    folds = ls.folds(y, 4, 0)
    expected = cross_val_predict(LogisticRegression(C=1.0, max_iter=1000), x, y, cv=folds) == y
    assert np.array_equal(ls.cv_correct(x, y, n_splits=4, seed=0), expected)
