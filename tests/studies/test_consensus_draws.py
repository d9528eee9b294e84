"""The consensus study's pieces on tiny synthetic cases whose answer is known: models that predict the
true class more often agree more with the consensus; the link of a corpus never reads that corpus; the
consensus observation moves the posterior towards its standing; the ridge predictions are the product
probe's; the frame reads the posterior as the shipped one does."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.studies.draws import consensus_draws as cd
from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing.label_scores import ridge_loo_scores, unit_rows


def _predictions(
    rng: np.random.Generator, truth: np.ndarray, accuracies: list[float], classes: int
) -> np.ndarray:
    """Each model (N, M) predicts the true class with its accuracy, else a random other class."""
    out = np.empty((truth.shape[0], len(accuracies)), dtype=np.int64)
    for j, accuracy in enumerate(accuracies):
        right = rng.random(truth.shape[0]) < accuracy
        wrong = (truth + rng.integers(1, classes, truth.shape[0])) % classes
        out[:, j] = np.where(right, truth, wrong)
    return out


def test_models_right_more_often_stand_higher_in_the_consensus():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, 3000)
    accuracies = [0.5, 0.9, 0.7, 0.3, 0.8]
    predictions = _predictions(rng, truth, accuracies, 4)
    labelled = np.arange(50)
    plain = cd.consensus_standing(predictions, labelled)
    assert abs(plain.sum()) < 1e-12
    assert list(np.argsort(plain)) == list(np.argsort(accuracies))
    weighted = cd.consensus_standing(predictions, labelled, np.array([0.0, 1.0, 0.0, 0.0, 0.0]))
    # the consensus is model 1's vote: its agreement is 1, the others' their agreement with it
    agree = (predictions[50:] == predictions[50:, [1]]).mean(axis=0)
    assert np.allclose(weighted, agree - agree.mean())


def test_ties_go_to_the_lowest_model_and_labelled_texts_are_left_out():
    predictions = np.array([[0, 1], [1, 0], [2, 2]])
    # text 0: a tie of 0 and 1 goes to model 0's class; text 1 is labelled; text 2 all agree
    assert np.allclose(cd.consensus_standing(predictions, np.array([1])), [0.25, -0.25])


def test_the_link_of_a_corpus_never_reads_it():
    rng = np.random.default_rng(1)
    rows = []
    for corpus in ("a", "b", "c"):
        for _ in range(5):
            z = rng.normal(size=6)
            z -= z.mean()
            y = 0.5 * z + 0.01 * rng.normal(size=6)
            rows.append({"corpus": corpus, "k": 16, "plain": z, "oracle_standing": y - y.mean()})
    # the judged corpus's cases are poison: reading them would give NaN
    rows.append(
        {"corpus": "judged", "k": 16, "plain": np.full(6, np.nan), "oracle_standing": np.full(6, np.nan)}
    )
    cases = pd.DataFrame(rows)
    beta, variance, n = cd.fit_link(cases, "judged", 16, "plain")
    assert n == 15 and np.isfinite(beta) and np.isfinite(variance)
    assert abs(beta - 0.5) < 0.02 and variance < 1e-3
    other = cd.fit_link(cases, "a", 16, "plain")
    assert not np.isfinite(other[0])  # the poison is read when another corpus is judged
    assert cd.fit_link(cases, "judged", 32, "plain")[2] == 0


def test_a_sure_consensus_moves_the_centred_posterior_to_its_standing():
    mean, cov = np.array([0.7, 0.7, 0.7]), 0.01 * np.eye(3) + 0.04
    standing = np.array([0.02, 0.0, -0.02])
    new_mean, new_cov = cd.observe(mean, cov, standing, 2.0, 1e-10)
    assert np.allclose(new_mean - new_mean.mean(), 2.0 * standing, atol=1e-6)
    assert abs(new_mean.mean() - 0.7) < 1e-6  # the level is not measured
    assert np.all(np.linalg.eigvalsh(new_cov) > -1e-9)
    vague_mean, _ = cd.observe(mean, cov, standing, 2.0, 1e3)
    assert np.allclose(vague_mean, mean, atol=1e-4)


def test_ridge_predictions_are_the_product_probe():
    rng = np.random.default_rng(2)
    x = unit_rows(rng.normal(size=(40, 5)))
    rows = np.arange(12)
    codes = np.array([0, 1, 2] * 4)
    # on its own rows, the fit is the leave-one-out ridge's fitted values: onehot - residual
    k = rows.shape[0]
    onehot = np.eye(3)[codes]
    loo = ridge_loo_scores(x[rows], codes, 1.0)
    xc = x[rows] - x[rows].mean(axis=0)
    lam, q = np.linalg.eigh(xc @ xc.T)
    hat = np.minimum((q**2) @ (lam / (lam + 1.0)) + 1.0 / k, 1 - 1e-9)
    fitted = onehot - (onehot - loo) * (1.0 - hat)[:, None]
    assert np.array_equal(cd.ridge_predictions(x, rows, codes, 1.0)[rows], fitted.argmax(axis=1))
    separated = np.repeat(np.eye(3), 10, axis=0) + 0.01 * rng.normal(size=(30, 3))
    got = cd.ridge_predictions(
        unit_rows(separated), np.array([0, 10, 20, 1, 11, 21]), np.array([0, 1, 2] * 2), 1.0
    )
    assert np.array_equal(got, np.repeat(np.arange(3), 10))


def test_the_frame_reads_the_posterior_as_the_shipped_one():
    prior = ap.AccuracyPrior.flat(["a", "b", "c"])
    correct = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    shipped = ap.estimate_frame(prior, correct, tolerance_points=2.0, chance_level=0.5, seed=3)
    mean, cov = ap.posterior(prior, correct)
    mine = cd.frame_of(prior.models, mean, cov, 0.5, 3)
    assert list(mine["model"]) == list(shipped["model"])
    assert np.allclose(mine["p_within"], shipped["p_within"]) and np.allclose(
        mine["p_best"], shipped["p_best"]
    )
