from __future__ import annotations

import numpy as np
import pytest
import torch

from flare_core.analyses.sufficiency.gmm import ConditionalGMM, DiagonalGMM, GMMConfig, GMMEstimator
from tests.properties import assert_finite, assert_shape


def test_mixture_log_prob_matches_scipy_single_mode():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(0)
    mean = rng.standard_normal(3)
    model = DiagonalGMM(3, 1, 1.0, torch.as_tensor(mean[None], dtype=torch.float64)).double()
    with torch.no_grad():
        model.raw_scales.fill_(0.3)
    x = rng.standard_normal((5, 3))
    std = np.exp(np.tanh(0.3))
    expected = multivariate_normal(mean, np.diag(np.full(3, std**2))).logpdf(x)
    got = model(torch.as_tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_conditional_gmm_shapes():
    model = ConditionalGMM(context_features=4, features=3, n_modes=8, hidden=3, log_scale_bound=1.0)
    out = model(torch.randn(6, 3), torch.randn(6, 4))
    assert_shape(out, (6,))
    assert_finite(out)


def test_emir_mode_has_no_early_stopping():
    rng = np.random.default_rng(0)
    v = rng.standard_normal((200, 3)).astype(np.float32)
    cfg = GMMConfig.emir()
    out = GMMEstimator().fit_marginal(v, v, cfg, seed=0, device="cpu")
    assert out.epochs == cfg.max_epochs == 5
    assert out.history == []
    np.testing.assert_array_equal(out.logp_train, out.logp_val)


def test_gmm_config_validation():
    with pytest.raises(ValueError, match="evaluate_on"):
        GMMConfig(evaluate_on="test")
    with pytest.raises(ValueError, match="n_modes"):
        GMMConfig(n_modes=0)
    with pytest.raises(ValueError, match="log_scale_bound"):
        GMMConfig(log_scale_bound=0.0)


def test_a_full_covariance_component_matches_scipy():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(1)
    d = 3
    model = DiagonalGMM(d, 1, 1.0, torch.zeros(1, d, dtype=torch.float64), covariance="full").double()
    tri = np.tril(rng.standard_normal((d, d)), k=-1)
    raw = rng.uniform(-0.5, 0.5, d)
    with torch.no_grad():
        model.mixing.copy_(
            torch.as_tensor(tri[None] + np.triu(rng.standard_normal((d, d)))[None])
        )  # upper ignored
        model.raw_scales.copy_(torch.as_tensor(raw[None]))
    precision_factor = (np.eye(d) + tri) @ np.diag(np.exp(-np.tanh(raw)))
    cov = np.linalg.inv(precision_factor.T @ precision_factor)
    x = rng.standard_normal((6, d))
    expected = multivariate_normal(np.zeros(d), cov).logpdf(x)
    np.testing.assert_allclose(model(torch.as_tensor(x)).detach().numpy(), expected, rtol=1e-10)


def test_the_em_start_is_scikit_learns_mixture_and_the_warm_start_equals_it():
    from sklearn.mixture import GaussianMixture

    rng = np.random.default_rng(2)
    v = np.concatenate([rng.normal(-2, 0.5, (300, 2)), rng.normal(2, 0.7, (300, 2))]).astype(np.float32)
    u = rng.standard_normal((600, 4)).astype(np.float32)
    cfg = GMMConfig(n_modes=2, max_epochs=1, log_scale_bound=2.0)
    est = GMMEstimator()
    reference = GaussianMixture(2, covariance_type="diag", reg_covar=1e-4, max_iter=200, random_state=0).fit(
        v.astype(np.float64)
    )
    start = DiagonalGMM(2, 2, 2.0, torch.zeros(2, 2))
    from flare_core.analyses.sufficiency.gmm import _em_start

    _em_start(start, torch.as_tensor(v), cfg, seed=0)
    with torch.no_grad():
        got = start(torch.as_tensor(v)).double().numpy()
    np.testing.assert_allclose(got, reference.score_samples(v.astype(np.float64)), rtol=1e-4)
    # the warm-started conditional is the trained marginal until it is trained itself
    marginal = est.fit_marginal(v[:500], v[500:], cfg, seed=0, device="cpu")
    conditional = ConditionalGMM(4, 2, 2, 8, 2.0, input_norm=False, base=marginal.model, skip=True)
    with torch.no_grad():
        np.testing.assert_array_equal(
            conditional(torch.as_tensor(v), torch.as_tensor(u)).numpy(),
            marginal.model(torch.as_tensor(v)).numpy(),
        )
    fitted = est.fit_conditional(
        u[:500], v[:500], u[500:], v[500:], cfg, seed=0, device="cpu", marginal=marginal.model
    )
    assert fitted.history[0] == pytest.approx(marginal.nll_val, rel=1e-6)
    assert fitted.nll_val <= marginal.nll_val + 1e-9 and fitted.raw_nll_val == min(fitted.history[1:])


def test_knife_and_emir_presets_keep_knifes_architecture():
    knife = GMMConfig.knife()
    assert (knife.n_modes, knife.hidden_features, knife.input_norm, knife.warm_start, knife.init) == (
        8,
        None,
        True,
        False,
        "rows",
    )
    assert GMMConfig.emir().evaluate_on == "train" and GMMConfig.emir().n_modes == 8
    model = ConditionalGMM(context_features=4, features=3, n_modes=8, hidden=3, log_scale_bound=1.0)
    assert isinstance(model.trunk[0], torch.nn.LayerNorm)
    plain = ConditionalGMM(4, 3, 1, 8, 1.0, input_norm=False)
    assert isinstance(plain.trunk[0], torch.nn.Linear)
    with pytest.raises(ValueError, match="covariance"):
        GMMConfig(covariance="banded")
    with pytest.raises(ValueError, match="init"):
        GMMConfig(init="kmeans")
