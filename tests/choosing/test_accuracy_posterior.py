"""The accuracy posterior: its update against the textbook Gaussian formulas, its prior's record read by
hand, and the behaviour the product promises (no label: the label-free pick; noisy labels do not
overturn a prior that is right; plenty of labels do overturn one that is wrong)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from scipy.stats import t as t_dist

from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing import label_forecast as lf


def _prior(mean_points, sd_points, level=0.7):
    names = [f"m{i}" for i in range(len(mean_points))]
    return ap.AccuracyPrior(
        tuple(names), np.asarray(mean_points) / 100.0, np.asarray(sd_points) / 100.0, level, 0.2, "test"
    )


def test_update_equals_the_precision_form_of_the_gaussian_posterior():
    rng = np.random.default_rng(0)
    prior = _prior([3.0, 0.0, -3.0], [2.0, 4.0, 6.0])
    hard = rng.random(40)[:, None] + rng.normal(0, 0.2, (40, 3))  # texts hard for every model alike
    correct = (hard < [0.6, 0.75, 0.7]).astype(float)
    mean, cov = ap.posterior(prior, correct)
    # independent reference: Σ = (P⁻¹ + R⁻¹)⁻¹, μ = Σ (P⁻¹ m₀ + R⁻¹ ȳ), R built by hand
    p = np.diag(prior.sd**2) + 0.2**2 * np.ones((3, 3))
    k = correct.shape[0]
    sample = np.cov(correct, rowvar=False)
    sd = np.sqrt(np.diag(sample))
    rho = (sample / np.outer(sd, sd))[~np.eye(3, dtype=bool)].mean()  # one correlation for every pair
    pooled = np.diag(sample).mean() * ((1 - rho) * np.eye(3) + rho * np.ones((3, 3)))
    per_text = (k * pooled + 2.0 * 0.25 * np.eye(3)) / (k + 2.0)  # shrunk to Jeffreys' 2 texts
    r = ap.SPREAD_INFLATION**2 * per_text / k
    sigma = np.linalg.inv(np.linalg.inv(p) + np.linalg.inv(r))
    mu = sigma @ (np.linalg.inv(p) @ (0.7 + prior.mean) + np.linalg.inv(r) @ correct.mean(axis=0))
    np.testing.assert_allclose(mean, mu, atol=1e-10)
    np.testing.assert_allclose(cov, sigma, atol=1e-10)


def test_without_labels_the_posterior_is_the_prior_and_names_its_top():
    prior = _prior([1.0, 4.0, -5.0], [3.0, 3.0, 3.0])
    mean, cov = ap.posterior(prior, None)
    np.testing.assert_allclose(mean, 0.7 + prior.mean)
    np.testing.assert_allclose(cov, np.diag(prior.sd**2) + 0.04)
    frame = ap.estimate_frame(prior, None, tolerance_points=2.0, chance_level=0.5, seed=0)
    assert frame["model"].iloc[0] == "m1"
    # the chance of being best of two equal-spread models 3 points apart, sd 3 each: Φ(3 / √18) = 0.76
    two = _prior([3.0, 0.0], [3.0, 3.0])
    p_best = ap.estimate_frame(two, None, tolerance_points=2.0, chance_level=0.0, seed=1).set_index("model")
    assert p_best.loc["m0", "p_best"] == pytest.approx(0.760, abs=0.02)


def test_figures_of_one_frame_agree_with_each_other():
    rng = np.random.default_rng(3)
    prior = _prior([2.0, 0.0, -1.0, -4.0], [3.0, 3.0, 3.0, 3.0])
    correct = (rng.random((32, 4)) < 0.7).astype(float)
    frame = ap.estimate_frame(prior, correct, tolerance_points=2.0, chance_level=1 / 3, seed=0)
    assert frame["p_best"].sum() == pytest.approx(1.0)
    assert (frame["p_within"] >= frame["p_best"] - 1e-12).all()
    assert (frame["ci_low"] <= frame["estimate"] + 1e-12).all() and (
        frame["estimate"] <= frame["ci_high"] + 1e-12
    ).all()
    assert (frame[["estimate", "ci_low", "ci_high"]] >= 1 / 3 - 1e-12).all().all()
    assert frame["gap"].iloc[0] == 0.0 and (frame["gap"] >= 0).all()
    wider = ap.estimate_frame(prior, correct, tolerance_points=5.0, chance_level=1 / 3, seed=0)
    assert (wider.set_index("model")["p_within"] >= frame.set_index("model")["p_within"] - 1e-12).all()


def _synthetic(true_acc, n_texts, rng):
    """Per-text right/wrong of models sharing the hard texts: (n, M)."""
    hard = rng.random(n_texts)
    return (hard[:, None] < np.asarray(true_acc)[None, :]).astype(float)


def test_a_right_prior_is_kept_against_sixteen_noisy_labels():
    true_acc = [0.80, 0.77, 0.74, 0.70]
    prior = _prior([4.5, 1.5, -1.5, -4.5], [2.5, 2.5, 2.5, 2.5], level=0.75)
    rng = np.random.default_rng(11)
    kept, flat_kept = 0, 0
    for draw in range(50):
        hard = rng.random(16)  # 16 labels of a corpus where the models differ by 3 to 10 points
        noisy = (hard[:, None] < np.asarray(true_acc)[None, :] + rng.normal(0, 0.2, (16, 4))).astype(float)
        frame = ap.estimate_frame(prior, noisy, tolerance_points=2.0, chance_level=0.5, seed=draw)
        kept += frame["model"].iloc[0] == "m0"
        flat = ap.estimate_frame(
            ap.AccuracyPrior.flat(prior.models), noisy, tolerance_points=2.0, chance_level=0.5
        )
        flat_kept += flat["model"].iloc[0] == "m0"
    assert kept >= 45
    assert flat_kept <= 35  # starting from nothing, the same labels move the pick in a third of the draws


def test_plenty_of_labels_overturn_a_wrong_prior():
    rng = np.random.default_rng(5)
    prior = _prior([3.0, 0.0, -3.0], [2.0, 2.0, 2.0])  # m0 favoured, but m2 is best by 15 points
    correct = _synthetic([0.60, 0.65, 0.75], 1000, rng)
    frame = ap.estimate_frame(prior, correct, tolerance_points=2.0, chance_level=0.5, seed=0)
    assert frame["model"].iloc[0] == "m2" and frame["p_best"].iloc[0] > 0.99


def test_the_switch_chance_is_the_normal_chance_of_the_difference_by_hand():
    mean = np.array([0.80, 0.78, 0.70])
    cov = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]]) * 1e-4
    # the difference m1 − m0 is normal with mean −0.02 and variance (3 + 4 − 2·1)·1e-4 = 5e-4
    assert ap.switch_chance(mean, cov, 1, 0) == pytest.approx(norm.cdf(-0.02 / np.sqrt(5e-4)))
    assert ap.switch_chance(mean, cov, 0, 1) == pytest.approx(1 - ap.switch_chance(mean, cov, 1, 0))
    assert ap.named_model(mean, cov, None) == 0 and ap.named_model(mean, cov, 0) == 0
    # m0 leads m1 with chance Φ(0.02 / √5e-4) = 0.81 ≥ 0.6: m1 named before is displaced
    assert ap.named_model(mean, cov, 1) == 0
    # a lead the labels favour with under 60% chance keeps the model named before
    close = np.array([0.80, 0.799, 0.70])
    assert ap.switch_chance(close, cov, 0, 1) < ap.SWITCH_CHANCE and ap.named_model(close, cov, 1) == 1


def test_a_kept_model_comes_first_and_every_other_figure_is_unchanged():
    rng = np.random.default_rng(4)
    prior = _prior([1.0, 0.5, -1.5], [3.0, 3.0, 3.0])
    correct = (rng.random((24, 3)) < [0.70, 0.72, 0.60]).astype(float)
    plain = ap.estimate_frame(prior, correct, tolerance_points=2.0, chance_level=0.5, seed=1)
    mean, cov = ap.posterior(prior, correct)
    runner = str(plain["model"].iloc[1])
    chance = ap.switch_chance(
        mean, cov, prior.models.index(plain["model"].iloc[0]), prior.models.index(runner)
    )
    kept = ap.estimate_frame(
        prior, correct, tolerance_points=2.0, chance_level=0.5, seed=1, named_before=runner
    )
    assert chance < ap.SWITCH_CHANCE  # a close call: the model named before is kept
    assert kept["model"].iloc[0] == runner and kept.attrs["kept"] == {
        "model": runner,
        "leader": plain["model"].iloc[0],
        "chance": pytest.approx(chance),
    }
    assert kept["gap"].iloc[0] == 0 and kept["gap"].iloc[1] < 0  # the higher estimate, not named
    columns = ["estimate", "ci_low", "ci_high", "p_best", "p_within", "gap_high"]
    pd.testing.assert_frame_equal(kept.set_index("model")[columns].sort_index(),
                                  plain.set_index("model")[columns].sort_index())  # fmt: skip


def test_rank_record_is_the_mean_standing_by_place():
    models = ["a", "b", "c"]
    cases = []
    for oracle in ([0.9, 0.8, 0.7], [0.8, 0.8, 0.5]):
        table = pd.DataFrame({"dim": [3.0, 2.0, 1.0]}, index=models)
        cases.append(
            {"case": "x", "table": table, "oracle": pd.Series(oracle, index=models), "models": models}
        )
    grid, mean, spread, level = ap.rank_record(cases, "dim")
    # standings by place: [0.1, 0, -0.1] and [0.1, 0.1, -0.2]; means 0.1, 0.05, -0.15 at places 0, 0.5, 1
    assert (
        mean[0] == pytest.approx(0.1) and mean[5] == pytest.approx(0.05) and mean[-1] == pytest.approx(-0.15)
    )
    widen = np.sqrt(1 + 1 / 2) * t_dist.ppf(norm.cdf(1.0), 1) / 1.0  # two corpora: predictive, Student's t
    assert spread[0] == pytest.approx(0.0)
    assert spread[-1] == pytest.approx(widen * np.std([-0.1, -0.2], ddof=1))
    assert level == pytest.approx(np.mean([0.8, 0.7]))
    prior = ap.prior_by_rank(cases, "dim", ["c", "a", "b"])
    assert prior.models == ("c", "a", "b") and prior.mean[0] > prior.mean[1] > prior.mean[2]
    assert prior.mean.sum() == pytest.approx(0.0) and (prior.sd >= ap.MIN_SD_POINTS / 100 - 1e-12).all()


def test_a_record_that_rises_at_a_lower_place_is_pooled_so_the_prior_keeps_the_rules_order():
    models = ["a", "b", "c"]
    table = pd.DataFrame({"dim": [3.0, 2.0, 1.0]}, index=models)
    cases = [{"case": "x", "table": table, "oracle": pd.Series(oracle, index=models), "models": models}
             for oracle in ([0.80, 0.84, 0.60], [0.90, 0.88, 0.62])]  # fmt: skip
    grid, mean, _, _ = ap.rank_record(cases, "dim")
    # standings by place: [0.053, 0.093, -0.147] and [0.100, 0.080, -0.180]; the means at places 0 and 0.5
    # (0.0767 and 0.0867) rise, so pool adjacent violators sets both to their mean, 0.0817
    assert mean[0] == pytest.approx(mean[5]) == pytest.approx((0.0767 + 0.0867) / 2, abs=1e-4)
    assert mean[-1] == pytest.approx(np.mean([-0.1467, -0.18]), abs=1e-4) and (np.diff(mean) <= 1e-12).all()
    prior = ap.prior_by_rank(cases, "dim", models)
    frame = ap.estimate_frame(prior, None, tolerance_points=2.0, chance_level=0.0, seed=0)
    assert list(frame["model"]) == models  # with no label, the rule's own order, its top first


def test_forecast_shrinks_as_labels_arrive_and_is_none_for_a_dead_heat():
    rng = np.random.default_rng(2)
    prior = _prior([0.0, 0.0], [5.0, 5.0])
    truth = _synthetic([0.80, 0.70], 400, rng)
    told = [lf.forecast(prior, truth[:k], tolerance_points=1.0, sure=0.9, step=8, most=256, chance=0.6)
            for k in (16, 48)]  # fmt: skip
    assert told[0] is not None and told[1] is not None and told[1] < told[0]
    # the product's forecast names n only when nearly every future settles: later, and a smaller n
    strict = [
        lf.forecast(prior, truth[:k], tolerance_points=1.0, sure=0.9, step=8, most=256) for k in (16, 128)
    ]
    assert strict[0] is None and strict[1] is not None and strict[1] <= told[1]
    tie = (rng.random((64, 2)) < 0.7).astype(float)
    tie[:, 1] = tie[:, 0]
    assert lf.forecast(prior, tie, tolerance_points=0.5, sure=0.99, step=8, most=16) is None


def test_bad_priors_are_refused():
    with pytest.raises(ValueError, match="one per model"):
        ap.AccuracyPrior(("a", "b"), np.zeros(3), np.ones(2), 0.5, 0.1, "")
    with pytest.raises(ValueError, match="positive"):
        ap.AccuracyPrior(("a", "b"), np.zeros(2), np.zeros(2), 0.5, 0.1, "")
    with pytest.raises(ValueError, match="no benchmark case"):
        ap.rank_record([], "dim")
