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
