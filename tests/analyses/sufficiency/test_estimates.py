"""Accuracy and sanity of the IS estimates on data with a known answer."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flare_core.analyses.sufficiency import FlowConfig, sufficiency_matrix
from tests.analyses.sufficiency._data import gaussian_pair
from tests.properties import assert_finite


def _is(result, source: str, target: str) -> float:
    return float(result.is_matrix.loc[source, target])


@pytest.mark.slow
@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "bf16-autocast"])
def test_flow_recovers_gaussian_is_within_10_percent(autocast):
    # measured: +0.8% (float32) and +0.5% (bfloat16 conditioners, float32 transforms) of the true IS
    u, v, true = gaussian_pair(n=4000, d=8, sigma=0.5, seed=1)
    result = sufficiency_matrix(
        {"U": u, "V": v},
        config=dataclasses.replace(FlowConfig.fast(), autocast=autocast),
        sources=["U"],
        targets=["V"],
        val_fraction=0.2,
        device="cpu",
    )
    est = _is(result, "U", "V")
    assert_finite(result.val_logp_cond[("U", "V")])
    assert abs(est - true) / true < 0.10, (est, true)


@pytest.mark.slow
def test_gmm_recovers_isotropic_gaussian_is_within_30_percent():
    # The KNIFE conditional (input LayerNorm, which discards the mean and scale of u, then a width-d_v
    # ReLU MLP) under-fits a linear-Gaussian kernel: it recovers about 77% of the true IS here (80% at
    # 100 epochs), while the marginal mixture is within 1% of the true entropy. The check therefore
    # allows 30% and pins the marginal tightly. Noise sigma = 0.7 keeps the conditional std inside the
    # mixture's scale bound (std in [1/e, e] after standardisation); the orthogonal W makes V's marginal
    # isotropic, i.e. representable by a diagonal mixture.
    d = 32
    u, v, true = gaussian_pair(n=4000, d=d, sigma=0.7, seed=2, orthogonal=True)
    result = sufficiency_matrix(
        {"U": u, "V": v}, estimator="gmm", sources=["U"], targets=["V"], val_fraction=0.2, device="cpu"
    )
    est = _is(result, "U", "V")
    assert 0 < est < true
    assert abs(est - true) / true < 0.30, (est, true)
    true_entropy = 0.5 * d * np.log(2 * np.pi * np.e)  # standardised isotropic Gaussian
    assert abs(result.records.iloc[0]["nll_marg_val"] - true_entropy) / true_entropy < 0.01


@pytest.mark.slow
def test_flow_is_decreases_with_noise_and_vanishes_when_shuffled():
    rng = np.random.default_rng(5)
    pool = {}
    for k, sigma in enumerate((0.3, 1.0, 3.0)):
        u, v, _ = gaussian_pair(n=2000, d=6, sigma=sigma, seed=7)
        pool["U"], pool[f"V{k}"] = u, v
    pool["U_shuffled"] = pool["U"][rng.permutation(2000)]
    result = sufficiency_matrix(
        pool, config=FlowConfig.fast(), sources=["U", "U_shuffled"], targets=["V0", "V1", "V2"], device="cpu"
    )
    values = [_is(result, "U", f"V{k}") for k in range(3)]
    assert values[0] > values[1] > values[2] > 0, values
    for k in range(3):
        assert abs(_is(result, "U_shuffled", f"V{k}")) / 6 <= 0.05


@pytest.mark.slow
def test_flow_noisy_source_scores_lower_and_copy_scores_highest():
    rng = np.random.default_rng(11)
    u, v, _ = gaussian_pair(n=2000, d=6, sigma=0.5, seed=3)
    pool = {
        "V": v,
        "copy of V": v.copy(),
        "U": u,
        "noisy U": u + 1.0 * rng.standard_normal(u.shape).astype(np.float32),
        "independent": rng.standard_normal((2000, 6)).astype(np.float32),
    }
    result = sufficiency_matrix(
        pool,
        config=FlowConfig.fast(),
        sources=["copy of V", "U", "noisy U", "independent"],
        targets=["V"],
        device="cpu",
    )
    col = result.is_matrix["V"]
    assert col["U"] > col["noisy U"] > col["independent"]
    assert col.idxmax() == "copy of V"
    assert abs(col["independent"]) / 6 <= 0.05


@pytest.mark.slow
def test_whitening_recovers_the_is_of_rank_deficient_embeddings():
    # U and V live on 8-d subspaces of 32-d spaces (a random injective linear map each): information is
    # unchanged by such maps, the 32-d densities are singular, and whitening finds the 8 real axes
    u8, v8, true = gaussian_pair(n=4000, d=8, sigma=0.5, seed=3)
    rng = np.random.default_rng(4)
    u = u8 @ rng.standard_normal((8, 32)) + 3.0
    v = v8 @ rng.standard_normal((8, 32)) - 1.0
    result = sufficiency_matrix(
        {"U": u.astype(np.float32), "V": v.astype(np.float32)},
        config=FlowConfig.fast(), sources=["U"], targets=["V"], val_fraction=0.2, device="cpu", max_dims=16,
    )  # fmt: skip
    assert result.dims == {"U": 8, "V": 8} and result.raw_dims == {"U": 32, "V": 32}
    assert result.max_dims == 16
    record = result.records.iloc[0]
    assert (record["d_source"], record["d_target"]) == (8, 8)
    assert record["is_per_dim"] == pytest.approx(record["is_nats"] / 8)
    assert abs(_is(result, "U", "V") - true) / true < 0.10, (_is(result, "U", "V"), true)


@pytest.mark.slow
def test_gmm_on_whitened_targets_recovers_gaussian_is():
    # whitening makes any target's marginal isotropic, which a diagonal mixture can represent
    u, v, true = gaussian_pair(n=4000, d=16, sigma=0.7, seed=6)
    result = sufficiency_matrix(
        {"U": u, "V": v}, estimator="gmm", sources=["U"], targets=["V"], val_fraction=0.2, device="cpu",
        max_dims=16,
    )  # fmt: skip
    est = _is(result, "U", "V")
    assert 0 < est < true and abs(est - true) / true < 0.30, (est, true)
