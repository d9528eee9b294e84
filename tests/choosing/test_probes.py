"""Choosing a model from labels: against scikit-learn, hand-computed intervals and toy data whose best
model is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold, StratifiedShuffleSplit, cross_val_predict
from sklearn.preprocessing import normalize

from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing import label_forecast as lf
from flare_core.choosing import probes
from flare_core.choosing.probes import compare_with_labels, few_label_estimates
from flare_core.choosing.stopping import stopping_advice


def _pool(n: int = 120, k: int = 3, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``good`` separates the ``k`` classes, ``weak`` barely, ``noise`` not at all."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    onehot = np.eye(k)[y]
    good = np.hstack([3.0 * onehot, rng.normal(size=(n, 5))])
    weak = np.hstack([0.6 * onehot, rng.normal(size=(n, 5))])
    return {"good": good, "weak": weak, "noise": rng.normal(size=(n, 8))}, np.array(list("abcdefgh"))[y]


# ------------------------------------------------------------------------------------------ full labels


def test_full_label_accuracy_is_sklearns_nested_cross_validation():
    pool, labels = _pool(n=45)
    pool = {name: pool[name] for name in ("weak", "noise")}
    frame = compare_with_labels(pool, labels, seed=3).set_index("model")
    codes = np.unique(labels, return_inverse=True)[1]
    for name, x in pool.items():
        accs = []
        for r in range(probes.REPEATS):
            inner = StratifiedShuffleSplit(1, test_size=1 / 3, random_state=3)
            search = GridSearchCV(LogisticRegression(max_iter=1000), {"C": list(probes.C_GRID)}, cv=inner)
            outer = StratifiedKFold(probes.FOLDS, shuffle=True, random_state=3 + r)
            accs.append(np.mean(cross_val_predict(search, normalize(x), codes, cv=outer) == codes))
        assert frame.loc[name, "accuracy"] == pytest.approx(np.mean(accs))


#: ``compare_with_labels`` on :func:`_four_models` as computed before its probes ran on one BLAS thread:
#: model, accuracy, macro-F1, gap, gap_low, gap_high, tied, n_labels, n_classes (best first).
FOUR_MODELS_BEFORE = [
    ("wide", 0.97, 0.9699498746867168, 0.0, 0.0, 0.0, False, 50, 5),
    ("static", 0.89, 0.8907994624241764, 7.9999999999999964, -2.5567334263916237, 18.55673342639162, True, 50, 5),
    ("glove", 0.88, 0.8782749693733676, 8.999999999999996, -7.022504297544371, 25.022504297544366, True, 50, 5),
    ("svd", 0.6799999999999999, 0.6755466322164398, 29.000000000000004, 9.606042316068052, 48.393957683931944,
     False, 50, 5),
]  # fmt: skip


def _four_models() -> tuple[dict[str, np.ndarray], np.ndarray]:
    """4 models of a labelled run's widths (384, 50, 64, 49) on 50 texts of 5 classes, of unequal signal."""
    rng = np.random.default_rng(7)
    y = np.arange(50) % 5
    xs = {}
    for name, d, signal in (
        ("wide", 384, 0.045),
        ("glove", 50, 0.2),
        ("static", 64, 0.17),
        ("svd", 49, 0.15),
    ):
        centres = rng.normal(size=(5, d))
        xs[name] = signal * centres[y] + rng.normal(size=(50, d)) / np.sqrt(d) * 3
    return xs, np.array(["business", "entertainment", "politics", "sport", "tech"])[y]


def test_full_labels_give_the_same_numbers_on_one_blas_thread_and_leave_the_threads_as_they_were():
    from threadpoolctl import threadpool_info

    before = [(lib["internal_api"], lib["num_threads"]) for lib in threadpool_info()]
    xs, labels = _four_models()
    frame = compare_with_labels(xs, labels, seed=0)
    assert [tuple(row) for row in frame.itertuples(index=False)] == FOUR_MODELS_BEFORE
    assert frame.attrs["best"] == "wide" and (frame.attrs["folds"], frame.attrs["repeats"]) == (5, 2)
    assert [(lib["internal_api"], lib["num_threads"]) for lib in threadpool_info()] == before


def test_full_labels_rank_the_separating_model_first_with_paired_gaps():
    pool, labels = _pool()
    pool["good twin"] = pool["good"].copy()
    frame = compare_with_labels(pool, labels)
    assert frame["model"].iloc[0] in ("good", "good twin") and frame.attrs["best"] == frame["model"].iloc[0]
    table = frame.set_index("model")
    assert table.loc["good", "accuracy"] == 1.0 and table.loc["noise", "accuracy"] < 0.6
    # an identical model is tied (gap 0 on every fold), pure noise is not
    twin = "good twin" if frame.attrs["best"] == "good" else "good"
    assert table.loc[twin, "gap"] == 0 and bool(table.loc[twin, "tied"])
    assert not table.loc["noise", "tied"] and table.loc["noise", "gap_low"] > 0
    assert not table.loc[frame.attrs["best"], "tied"]
    assert (table["n_labels"] == 120).all() and (table["n_classes"] == 3).all()
    assert frame.attrs["balanced"] and frame.attrs["folds"] == 5 and frame.attrs["repeats"] == probes.REPEATS


def test_corrected_interval_matches_the_nadeau_bengio_formula():
    diffs = np.array([2.0, 1.0, 3.0, 0.0, 2.5, 1.5])
    low, high = probes._corrected_interval(diffs, 0.2)
    half = stats.t.ppf(0.975, 5) * np.sqrt(diffs.var(ddof=1) * (1 / 6 + 0.2 / 0.8))
    assert (low, high) == pytest.approx((diffs.mean() - half, diffs.mean() + half))


def test_full_labels_on_ten_texts_of_three_classes_use_the_default_c_where_no_third_can_be_held_out():
    pool, labels = _pool(n=10)  # training folds of 6-8 texts: a held-out third of 2 cannot hold 3 classes
    frame = compare_with_labels(pool, labels, seed=0).set_index("model")
    codes = np.unique(labels, return_inverse=True)[1]
    x = normalize(pool["good"])
    accs = []
    for r in range(probes.REPEATS):
        outer = StratifiedKFold(3, shuffle=True, random_state=r)  # 3 folds: the smallest class has 3 texts
        accs.append(
            np.mean(cross_val_predict(LogisticRegression(C=1.0, max_iter=1000), x, codes, cv=outer) == codes)
        )
    assert frame.loc["good", "accuracy"] == pytest.approx(np.mean(accs))


def test_full_labels_refuse_one_class_and_singleton_classes():
    pool, labels = _pool()
    with pytest.raises(ValueError, match="only one class"):
        compare_with_labels(pool, ["a"] * len(labels))
    odd = labels.astype(object)
    odd[0] = "lonely"
    with pytest.raises(ValueError, match="'lonely' has 1"):
        compare_with_labels(pool, odd)
    with pytest.raises(ValueError, match="same texts"):
        compare_with_labels({"a": np.ones((5, 2)), "b": np.ones((6, 2))}, labels[:5])


# ------------------------------------------------------------------------------------------ few labels


def test_few_label_estimates_put_the_separating_model_first_and_chances_sum_to_one():
    pool, labels = _pool(n=300)
    rows = np.random.default_rng(0).choice(300, size=30, replace=False)
    frame = few_label_estimates(pool, rows, labels[rows])
    assert frame["model"].iloc[0] == "good" and frame["p_best"].sum() == pytest.approx(1.0)
    good, weak, noise = (frame.set_index("model").loc[m] for m in ("good", "weak", "noise"))
    # 30 labels cannot say for sure that either of the two near 100% is within the tolerance of the other;
    # noise (about a third right) is neither best nor within it
    assert noise["p_within"] < min(good["p_within"], weak["p_within"])
    assert good["ci_low"] <= good["estimate"] <= good["ci_high"] and noise["p_best"] < 0.1
    assert noise["p_within"] < 0.2 and noise["gap"] > 20 and noise["gap_high"] >= noise["gap"]
    assert (frame[["estimate", "ci_low", "ci_high", "p_best", "p_within"]].to_numpy() >= 0).all()
    assert (frame[["estimate", "ci_low", "ci_high", "p_best", "p_within"]].to_numpy() <= 1).all()
    assert frame.attrs["n_labels"] == 30 and frame.attrs["n_classes"] == 3


def test_every_few_label_figure_comes_from_one_posterior():
    # the estimate, the interval, the chances and the gaps, recomputed by hand from the one posterior the
    # labels' leave-one-out scores give with every model alike before them
    pool, labels = _pool(n=200, k=2)
    rows = np.random.default_rng(1).choice(200, size=24, replace=False)
    frame = few_label_estimates(pool, rows, labels[rows], seed=3).set_index("model")
    codes = np.unique(labels[rows], return_inverse=True)[1]
    correct = probes.probe_scores(pool, rows, codes, "ridge", 3)[0]
    prior = ap.AccuracyPrior.flat(list(pool))
    mean, cov = ap.posterior(prior, correct, classes=2)
    draws = ap.draws_of(mean, cov, 3)
    highest = draws.max(axis=1, keepdims=True)
    top = (draws >= highest - 1e-12) / (draws >= highest - 1e-12).sum(axis=1, keepdims=True)
    for i, model in enumerate(pool):
        row = frame.loc[model]
        assert row["estimate"] == pytest.approx(np.clip(mean[i], 0.5, 1.0))
        assert row["ci_low"] == pytest.approx(np.quantile(np.clip(draws[:, i], 0.5, 1.0), 0.025))
        assert row["p_best"] == pytest.approx(top[:, i].mean())
        assert row["p_within"] == pytest.approx(np.mean(100 * (highest[:, 0] - draws[:, i]) <= 2 + 1e-9))
    # the stopping advice's forecast is the posterior's own
    forecast = lf.forecast(prior, correct, tolerance_points=2.0, sure=probes.SURE, step=lf.FORECAST_STEP,
                           most=lf.MAX_FORECAST, seed=3, classes=2)  # fmt: skip
    assert frame.attrs["more_labels"] == forecast


def _agreeing_pool(n: int = 80) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Two models that separate two classes so clearly that each is right on every text."""
    rng = np.random.default_rng(5)
    y = np.arange(n) % 2
    pool = {name: np.hstack([5.0 * np.eye(2)[y], 0.05 * rng.normal(size=(n, 3))]) for name in ("a", "b")}
    return pool, np.array(["no", "yes"])[y]


def test_sixteen_texts_that_every_model_gets_right_leave_the_gap_unsure():
    # every text right for both: the per-text covariance is Jeffreys' alone, (2 x 0.25) / 18 per text,
    # widened 1.5 times over 16 texts, so each model's error is 1.5 x sqrt(0.5 / 18 / 16) = 6.2 points
    # and their gap's sd 8.8 points: being within 2 points of the other is far from sure
    pool, labels = _agreeing_pool()
    rows = np.arange(16)
    codes = np.unique(labels[rows], return_inverse=True)[1]
    assert (probes.probe_scores(pool, rows, codes, "ridge")[0] == 1).all()
    frame = few_label_estimates(pool, rows, labels[rows])
    sd = ap.SPREAD_INFLATION * np.sqrt(0.5 / 18 / 16)
    assert np.sqrt(ap.label_error(np.ones((16, 2)))[0, 0]) == pytest.approx(sd)
    assert frame["p_best"].to_numpy() == pytest.approx([0.5, 0.5], abs=0.03)
    assert (frame["p_within"] < probes.SURE).all()
    advice = stopping_advice(frame, 16)
    assert not advice["settled"] and advice["either"] == [frame["model"].iloc[0]]


def test_few_labels_work_with_one_label_in_a_class_and_many_classes_at_three_each():
    pool, labels = _pool(n=400, k=8)
    rows = np.arange(12)  # classes a..d twice, e..h once
    frame = few_label_estimates(pool, rows, labels[rows])
    assert frame["p_best"].sum() == pytest.approx(1.0) and frame.attrs["n_classes"] == 8
    rows = np.arange(24)  # eight classes, three labels each
    frame = few_label_estimates(pool, rows, labels[rows])
    assert frame.attrs["n_labels"] == 24 and np.isfinite(frame["estimate"]).all()


def test_few_labels_refuse_bad_rows_and_one_class():
    pool, labels = _pool()
    with pytest.raises(ValueError, match="outside the corpus"):
        few_label_estimates(pool, np.array([0, 500]), ["a", "b"])
    with pytest.raises(ValueError, match="more than once"):
        few_label_estimates(pool, np.array([0, 0]), ["a", "b"])
    with pytest.raises(ValueError, match="one label per row"):
        few_label_estimates(pool, np.array([0, 1]), ["a"])
    with pytest.raises(ValueError, match="only one class"):
        few_label_estimates(pool, np.array([0, 3]), ["a", "a"])


# ------------------------------------------------------------------------------------------ advice


def _estimates(p_best, estimate, p_within, more=None, ci_low=(0.9, 0.8, 0.5), n_classes=2):
    frame = pd.DataFrame(
        {
            "model": ["m1", "m2", "m3"],
            "estimate": estimate,
            "p_best": p_best,
            "p_within": p_within,
            "gap": [100 * (estimate[0] - e) for e in estimate],
            "ci_low": ci_low,
        }
    )
    frame.attrs.update(
        n_classes=n_classes, n_classes_repeated=n_classes, more_labels=more, tolerance_points=2.0
    )
    return frame


def test_advice_settles_on_a_clear_winner_and_reads_the_one_forecast_otherwise():
    advice = stopping_advice(_estimates([0.95, 0.05, 0.0], [0.9, 0.8, 0.5], [0.99, 0.1, 0.0]), 48)
    assert advice["settled"] and advice["best"] == "m1" and advice["more_labels"] is None
    assert advice["either"] == ["m1"] and advice["reason"] == "sure"
    assert "m1 is within 2 points of the best with 99% probability (best with 95%)" in advice["text"]
    advice = stopping_advice(_estimates([0.6, 0.4, 0.0], [0.9, 0.85, 0.5], [0.7, 0.5, 0.0], more=32), 48)
    assert not advice["settled"] and advice["reason"] == "not sure yet" and "70% chance" in advice["text"]
    assert advice["more_labels"] == 32 and "about 32 more labels would settle it" in advice["text"]
    # no forecast within reach: no count is shown, the choice is called sound as it stands
    close = stopping_advice(_estimates([0.6, 0.4, 0.0], [0.9, 0.895, 0.5], [0.7, 0.5, 0.0], more=None), 48)
    assert close["reason"] == "too close" and close["more_labels"] is None
    assert "sound choice" in close["text"] and "would settle" not in close["text"]


def test_advice_names_near_ties_as_either():
    advice = stopping_advice(_estimates([0.5, 0.45, 0.05], [0.9, 0.895, 0.5], [0.98, 0.96, 0.0]), 64)
    assert advice["settled"] and advice["either"] == ["m1", "m2"] and "either will do" in advice["text"]


def test_advice_refuses_a_frame_that_is_not_estimates():
    with pytest.raises(ValueError, match="few_label_estimates"):
        stopping_advice(pd.DataFrame({"model": ["a"]}), 4)


def test_advice_never_settles_on_labels_that_carry_no_evidence():
    pool, labels = _pool(n=60)
    frame = few_label_estimates(pool, np.array([0, 1]), ["a", "b"])  # one label per class
    advice = stopping_advice(frame, 2)
    assert not advice["settled"] and advice["more_labels"] == 14 and advice["reason"] == "few labels"
    assert "label at least 14 more texts" in advice["text"]
    sure = _estimates([0.99, 0.01, 0.0], [0.9, 0.5, 0.4], [1.0, 0.0, 0.0])
    assert not stopping_advice(sure, 15)["settled"] and stopping_advice(sure, 16)["settled"]
    lone = sure.copy()
    lone.attrs.update(sure.attrs, n_classes_repeated=1)  # no two classes of two labels: nothing to judge by
    assert not stopping_advice(lone, 48)["settled"]


def test_the_classes_the_labels_are_of_widen_what_few_labels_a_class_can_show():
    # a reading whose own-gap spread shrinks with the labels per class: the same 32 labels said to be of
    # 16 categories (2 a class) leave a wider interval than the same labels of their 2 categories
    from flare_core.choosing.probe_reading import ProbeReading

    pool, labels = _pool(n=300, k=2)
    rows = np.arange(32)
    reading = ProbeReading(-0.05, 0.0, {}, 1.0, (np.log(0.08**2), -0.7), (np.log(0.01**2), 0.0), 5)
    prior = ap.AccuracyPrior.flat(list(pool)).read_with(reading)
    two = few_label_estimates(pool, rows, labels[rows], prior=prior).set_index("model")
    many = few_label_estimates(pool, rows, labels[rows], prior=prior, classes=16).set_index("model")
    assert (many["ci_high"] - many["ci_low"]).loc["weak"] > (two["ci_high"] - two["ci_low"]).loc["weak"]
    assert many.attrs["n_classes"] == 2 and "updating" in many.attrs["method"]
