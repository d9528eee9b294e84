"""The probe reading: learned from draws made with known offsets and spreads, it finds them again; the
posterior that reads labels with it subtracts the offset and widens the error by hand-computed amounts;
it survives a round trip through JSON and refuses a malformed one."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing.probe_reading import ProbeReading, ReadingRow, fit, per_class_x

MODELS = ("fast", "slow", "plain", "other")


def _rows(own_sd: float, shared_sd: float, corpora: int = 40, seed: int = 0) -> list[ReadingRow]:
    """Draws whose gaps follow a known line: every model 10 points under at one label a class, 2 points
    less per doubling of the labels per class; "fast" 4 points above that, "slow" 4 under; each corpus its
    own deviations (own_sd, shared_sd) and each draw its sampling error."""
    rng = np.random.default_rng(seed)
    own = np.array([0.04, -0.04, 0.0, 0.0])
    rows = []
    for c in range(corpora):
        classes = int(rng.choice([2, 4, 16]))
        oracle = rng.uniform(0.6, 0.9, size=4)
        persistent = rng.normal(0, own_sd, 4) + rng.normal(0, shared_sd)
        for k in (16, 32, 64, 128):
            x = per_class_x(k, classes)
            sampling = 0.2 / k * (0.5 * np.eye(4) + 0.5)
            noise = rng.multivariate_normal(np.zeros(4), sampling)
            ybar = oracle - 0.10 + 0.02 / np.log(2) * x + own + persistent + noise
            rows.append(ReadingRow(f"c{c}", MODELS, k, classes, ybar, oracle, sampling))
    return rows


def test_fit_finds_the_offsets_and_the_spread_it_was_drawn_with():
    reading = fit(_rows(own_sd=0.03, shared_sd=0.02, corpora=80), own_lines=True)
    offset = reading.offset(MODELS, 64, 4)  # 16 labels a class, inside the draws' range
    assert offset.mean() == pytest.approx(-0.10 + 0.02 * 4, abs=0.015)
    assert offset[0] - offset[2] == pytest.approx(0.04, abs=0.02)
    assert offset[1] - offset[2] == pytest.approx(-0.04, abs=0.02)
    assert reading.slope == pytest.approx(0.02 / np.log(2), abs=0.01)
    own, shared = reading.variances(32, 4)
    assert np.sqrt(own) == pytest.approx(0.03, rel=0.35)
    assert np.sqrt(shared) == pytest.approx(0.02, rel=0.6)
    assert reading.scale == pytest.approx(1.0, abs=0.35)


def test_without_own_lines_each_model_s_gap_is_left_to_its_own_spread():
    rows = _rows(own_sd=0.03, shared_sd=0.02, corpora=80)
    plain, lines = fit(rows), fit(rows, own_lines=True)
    assert plain.own == {} and set(lines.own) == set(MODELS)
    offset = plain.offset(MODELS, 64, 4)
    assert np.ptp(offset) == 0 and offset.mean() == pytest.approx(-0.10 + 0.02 * 4, abs=0.015)
    # the models' persistent gaps (4, -4, 0 and 0 points: a spread of √0.0008) join the drawn 0.03
    tau = np.sqrt(plain.variances(32, 4)[0])
    assert tau == pytest.approx(np.sqrt(0.03**2 + 0.0008), rel=0.3) and tau > np.sqrt(
        lines.variances(32, 4)[0]
    )


def test_fit_sees_no_own_spread_where_there_is_none():
    wide, narrow = fit(_rows(0.05, 0.0), own_lines=True), fit(_rows(0.0, 0.0), own_lines=True)
    assert np.sqrt(narrow.variances(32, 4)[0]) < 0.01 < np.sqrt(wide.variances(32, 4)[0])


def test_the_posterior_reads_labels_less_the_offset_with_the_whole_error():
    reading = ProbeReading(
        -0.08, 0.01, {"m0": (0.03, 0.0)}, 1.2, (np.log(0.02**2), 0.0), (np.log(0.01**2), 0.0), 5
    )
    prior = ap.AccuracyPrior(
        ("m0", "m1"), np.array([0.01, -0.01]), np.array([0.03, 0.03]), 0.7, 0.2, "t", reading
    )
    rng = np.random.default_rng(1)
    correct = (rng.random((24, 2)) < [0.7, 0.6]).astype(float)
    mean, cov = ap.posterior(prior, correct, classes=3)
    x = np.log(24 / 3)
    y = correct.mean(axis=0) - (-0.08 + 0.01 * x + np.array([0.03, 0.0]))
    r = 1.2**2 * ap.sampling_error(correct) + 0.02**2 * np.eye(2) + 0.01**2
    p = prior.covariance()
    sigma = np.linalg.inv(np.linalg.inv(p) + np.linalg.inv(r))
    mu = sigma @ (np.linalg.inv(p) @ (0.7 + prior.mean) + np.linalg.inv(r) @ y)
    np.testing.assert_allclose(mean, mu, atol=1e-10)
    np.testing.assert_allclose(cov, sigma, atol=1e-12)


def test_few_labels_a_class_move_the_answer_less_than_many():
    reading = ProbeReading(-0.1, 0.02, {}, 1.0, (np.log(0.06**2), -0.6), (np.log(0.01**2), 0.0), 5)
    assert reading.variances(16, 16)[0] > 4 * reading.variances(128, 2)[0]
    prior = ap.AccuracyPrior(
        ("a", "b"), np.array([0.02, -0.02]), np.array([0.03, 0.03]), 0.7, 0.2, "t", reading
    )
    correct = np.tile([[0.0, 1.0], [1.0, 1.0]], (8, 1))  # b ahead by half the texts
    few, _ = ap.posterior(prior, correct, classes=16)
    many, _ = ap.posterior(prior, correct, classes=2)
    assert (few[1] - few[0]) < (many[1] - many[0])


def test_json_round_trip_and_refusals():
    reading = fit(_rows(0.02, 0.01, corpora=6))
    again = ProbeReading.from_json(reading.to_json())
    np.testing.assert_allclose(again.offset(MODELS, 40, 4), reading.offset(MODELS, 40, 4))
    assert again.variances(40, 4) == pytest.approx(reading.variances(40, 4))
    for bad in ({}, {**reading.to_json(), "scale": -1}, {**reading.to_json(), "own_log_var": [1.0]},
                {**reading.to_json(), "intercept": float("nan")}):  # fmt: skip
        with pytest.raises(ValueError, match="probe reading"):
            ProbeReading.from_json(bad)
    with pytest.raises(ValueError, match="two corpora"):
        fit([r for r in _rows(0.0, 0.0, corpora=3) if r.corpus == "c0"])
