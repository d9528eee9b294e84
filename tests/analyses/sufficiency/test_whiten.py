"""PCA whitening on the training split, against scikit-learn's PCA(whiten=True)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA

from flare_core.analyses.sufficiency import _standardize
from flare_core.analyses.sufficiency._whiten import fit_whitening, whiten


def _data(n: int = 400, d: int = 24, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(d, d)) * np.linspace(3.0, 0.1, d)
    return (rng.normal(size=(n, d)) @ mixing + rng.normal(size=d) * 5).astype(np.float32)


def test_matches_sklearn_pca_whitening_of_the_standardised_training_rows():
    x = _data()
    train = np.arange(0, 400, 2)
    mean, std, projection = fit_whitening(x, train, 8)
    assert projection.shape == (24, 8)
    ours = whiten(x, mean, std, projection)
    z = (x.astype(np.float64) - x[train].mean(0)) / x[train].std(0)
    pca = PCA(n_components=8, whiten=True, svd_solver="full").fit(z[train])
    # sklearn scales by the unbiased variance (n - 1); ours by the biased one (n), like the standardiser
    theirs = pca.transform(z) * np.sqrt(len(train) / (len(train) - 1))
    signs = np.sign((ours * theirs).sum(0))
    np.testing.assert_allclose(ours, theirs * signs, atol=2e-4)
    # unit variance and no correlation on the training rows
    np.testing.assert_allclose(np.cov(ours[train].T, bias=True), np.eye(8), atol=1e-4)


def test_rank_deficient_data_keeps_only_the_real_axes():
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(50, 3)) @ rng.normal(size=(3, 30))).astype(np.float32)  # rank 3 in 30-d
    _, _, projection = fit_whitening(x, np.arange(50), 16)
    assert projection.shape == (30, 3)


def test_chunked_covariance_equals_the_one_pass_fit(monkeypatch):
    x = _data(n=500)
    rows = np.arange(1, 500, 3)
    whole = fit_whitening(x, rows, 10)
    monkeypatch.setattr("flare_core.analyses.sufficiency._whiten._CHUNK_ROWS", 7)
    monkeypatch.setattr(_standardize, "_CHUNK_ROWS", 7)
    chunked = fit_whitening(x, rows, 10)
    for a, b in zip(whole, chunked, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_no_projection_is_plain_standardisation():
    x = _data()
    mean, std, projection = fit_whitening(x, np.arange(400), None)
    assert projection is None
    np.testing.assert_allclose(whiten(x, mean, std, None), _standardize._standardize(x, mean, std), atol=1e-6)


def test_axis_signs_are_fixed():
    x = _data()
    _, _, p = fit_whitening(x, np.arange(400), 6)
    assert (p[np.abs(p).argmax(axis=0), np.arange(6)] > 0).all()
    with pytest.raises(ValueError):
        fit_whitening(x, np.arange(0), 6)
