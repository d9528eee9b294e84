"""Choosing a model from labels: against scikit-learn, hand-computed intervals and toy data whose best
model is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold, StratifiedShuffleSplit, cross_val_predict
from sklearn.preprocessing import normalize

from flare_core.analyses import probes, stopping
from flare_core.analyses.probes import compare_with_labels, few_label_estimates
from flare_core.analyses.stopping import stopping_advice


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
    # with all 300 labels, good and weak both reach 100% (5-fold logistic regression): 30 labels, carried
    # along weak's rising curve, say the same (30 of 30 right, with the prior's 2 texts half right: 31 / 32),
    # but not for sure that either is within a point; noise (31%) is neither best nor within a point of it
    good, weak, noise = (frame.set_index("model").loc[m] for m in ("good", "weak", "noise"))
    assert good["estimate"] == weak["estimate"] == pytest.approx(31 / 32)
    assert noise["p_within"] < min(good["p_within"], weak["p_within"])
    assert max(good["p_within"], weak["p_within"]) < probes.SURE
    assert good["ci_low"] <= good["estimate"] <= good["ci_high"] and noise["p_best"] < 0.1
    assert noise["p_within"] < 0.2 and noise["gap"] > 30 and noise["gap_high"] >= noise["gap"]
    assert (frame[["estimate", "ci_low", "ci_high", "p_best", "p_within"]].to_numpy() >= 0).all()
    assert (frame[["estimate", "ci_low", "ci_high", "p_best", "p_within"]].to_numpy() <= 1).all()
    assert frame.attrs["n_labels"] == 30 and frame.attrs["n_classes"] == 3


def test_every_few_label_figure_comes_from_one_posterior():
    # the chances, the interval and the gaps, recomputed by hand from the per-text correctness's draws
    pool, labels = _pool(n=200, k=2)
    rows = np.random.default_rng(1).choice(200, size=24, replace=False)
    frame = few_label_estimates(pool, rows, labels[rows], seed=3).set_index("model")
    codes = np.unique(labels[rows], return_inverse=True)[1]
    correct = probes.curve_scores(pool, rows, codes, "ridge", 3)[0]
    means, _ = probes._posterior(correct, 3)
    highest = means.max(axis=1, keepdims=True)
    top = (means >= highest - 1e-12) / (means >= highest - 1e-12).sum(axis=1, keepdims=True)
    for i, model in enumerate(pool):
        row = frame.loc[model]
        # the mean of the 24 texts (clipped to an accuracy) and of the prior's 2 texts, half of them right
        assert row["estimate"] == pytest.approx((24 * np.clip(correct[:, i].mean(), 0, 1) + 1) / 26)
        assert row["ci_low"] == pytest.approx(np.quantile(means[:, i], 0.025))
        assert row["p_best"] == pytest.approx(top[:, i].mean())
        assert row["p_within"] == pytest.approx(np.mean(100 * (highest[:, 0] - means[:, i]) <= 1 + 1e-9))
    # a model whose estimate and interval are at least another's never has a smaller chance of being best
    ordered = frame.sort_values("estimate", ascending=False)
    for a, b in zip(ordered.index[:-1], ordered.index[1:], strict=True):
        if (
            ordered.loc[a, ["estimate", "ci_low", "ci_high"]]
            >= ordered.loc[b, ["estimate", "ci_low", "ci_high"]]
        ).all():
            assert ordered.loc[a, "p_best"] >= ordered.loc[b, "p_best"]


def _agreeing_pool(n: int = 80) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Two models that separate two classes so clearly that each is right on every text."""
    rng = np.random.default_rng(5)
    y = np.arange(n) % 2
    pool = {name: np.hstack([5.0 * np.eye(2)[y], 0.05 * rng.normal(size=(n, 3))]) for name in ("a", "b")}
    return pool, np.array(["no", "yes"])[y]


def test_sixteen_texts_that_every_model_gets_right_leave_the_gap_unsure(monkeypatch):
    # Jeffreys' prior on the paired table: with the 16 texts in the "both right" cell the table's shares are
    # Dirichlet(16.5, 0.5, 0.5, 0.5); b is within a point of a when a's lead p(a only) - p(b only) <= 0.01.
    # The discordant share d = p(a only) + p(b only) is Beta(1, 17), a's part of it Beta(0.5, 0.5) apart.
    monkeypatch.setattr(probes, "SPREAD_INFLATION", 1.0)  # the posterior itself, not widened
    monkeypatch.setattr(probes, "CARRY_ERROR_POINTS", 0.0, raising=False)
    pool, labels = _agreeing_pool()
    rows = np.arange(16)
    codes = np.unique(labels[rows], return_inverse=True)[1]
    assert (probes.curve_scores(pool, rows, codes, "ridge")[0] == 1).all()
    frame = few_label_estimates(pool, rows, labels[rows]).set_index("model")

    def within(d: float) -> float:
        return float(stats.beta.pdf(d, 1, 17) * stats.beta.cdf(min(1.0, (1 + 0.01 / d) / 2), 0.5, 0.5))

    exact = integrate.quad(within, 0, 1, points=[0.01])[0]
    assert exact == pytest.approx(0.658, abs=1e-3)
    assert frame["p_within"].to_numpy() == pytest.approx([exact, exact], abs=0.03)
    assert frame["p_best"].to_numpy() == pytest.approx([0.5, 0.5], abs=0.03)
    # each model's own share right is Beta(17, 1): mean 17 / 18, 95% interval from 0.025 ** (1 / 17)
    assert frame["estimate"].to_numpy() == pytest.approx([17 / 18, 17 / 18])
    assert frame["ci_low"].to_numpy() == pytest.approx([0.025 ** (1 / 17)] * 2, abs=0.01)
    # with the product's spread too, neither is surely within a point: no advice settles on it
    monkeypatch.undo()
    frame = few_label_estimates(pool, rows, labels[rows])
    assert (frame["p_within"] < probes.SURE).all()
    assert stopping_advice(frame.assign(past_ceiling=False), 16)["either"] == [frame["model"].iloc[0]]


@pytest.mark.parametrize("k", [16, 64, 400])
def test_the_advices_spread_is_the_spread_of_the_draws_and_shrinks_with_more_labels(k):
    # two models right on 80% and 70% of k texts, neither near a bound: the gap's spread over the draws
    # behind every chance must be the per-text spread the stopping advice reads, over the square root of k
    # (so "label n more" names the labels at which the same estimate would settle)
    rng = np.random.default_rng(k)
    values = np.c_[rng.random(k) < 0.8, rng.random(k) < 0.7].astype(np.float64)
    draws, _ = probes._posterior(values, seed=0, draws=20_000)
    per_text_sd = (values[:, 0] - values[:, 1]).std(ddof=1)
    stated = float(probes._estimate_spread(np.array([per_text_sd]))[0]) / np.sqrt(k + probes.PRIOR_TEXTS)
    assert (draws[:, 0] - draws[:, 1]).std() == pytest.approx(stated, rel=0.1)
    # the carry-forward error shrinks as 1 / sqrt(k): enough labels separate two models a few points apart
    assert probes._carry_error(4 * k) == pytest.approx(probes._carry_error(k) / 2)


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


def _estimates(p_best, estimate, p_within, diff_sd=(0.0, 0.3, 0.3), ci_low=(0.9, 0.8, 0.5), n_classes=2):
    frame = pd.DataFrame(
        {
            "model": ["m1", "m2", "m3"],
            "estimate": estimate,
            "p_best": p_best,
            "p_within": p_within,
            "gap": [100 * (estimate[0] - e) for e in estimate],
            "diff_sd": diff_sd,
            "ci_low": ci_low,
        }
    )
    frame.attrs.update(n_classes=n_classes, n_classes_repeated=n_classes)
    return frame


def test_advice_settles_on_a_clear_winner_and_asks_for_more_otherwise():
    advice = stopping_advice(_estimates([0.95, 0.05, 0.0], [0.9, 0.8, 0.5], [0.99, 0.1, 0.0]), 48)
    assert advice["settled"] and advice["best"] == "m1" and advice["more_labels"] is None
    assert advice["either"] == ["m1"] and advice["reason"] == "sure"
    assert "m1 is within 1 point of the best with 99% probability (best with 95%)" in advice["text"]
    advice = stopping_advice(_estimates([0.6, 0.4, 0.0], [0.9, 0.85, 0.5], [0.7, 0.5, 0.0]), 48)
    assert not advice["settled"] and advice["reason"] == "not sure yet" and "70% chance" in advice["text"]
    # within 1 point of the runner-up 5 points behind with 90% chance: z(0.9) * 0.3 / 0.06 = 6.41, squared
    # 41.1 labels, already given: the least step, 8, is asked
    assert advice["more_labels"] == 8 and "label 8 more texts" in advice["text"]
    close = stopping_advice(_estimates([0.6, 0.4, 0.0], [0.9, 0.895, 0.5], [0.7, 0.5, 0.0]), 48)
    # 0.5 points apart: (1.2816 * 0.3 / 0.015)^2 = 657 labels, more than the 256 asked at once
    assert close["more_labels"] == stopping.MAX_MORE


def test_advice_names_near_ties_as_either():
    advice = stopping_advice(_estimates([0.5, 0.45, 0.05], [0.9, 0.895, 0.5], [0.98, 0.96, 0.0]), 64)
    assert advice["settled"] and advice["either"] == ["m1", "m2"] and "either will do" in advice["text"]


def test_advice_refuses_a_frame_that_is_not_estimates():
    with pytest.raises(ValueError, match="few_label_estimates"):
        stopping_advice(pd.DataFrame({"model": ["a"]}), 4)


def test_curve_extrapolation_leaves_a_flat_curve_alone_and_credits_a_rising_one():
    pool, labels = _pool(n=600)
    codes = np.unique(labels, return_inverse=True)[1]
    rows = np.arange(60)
    # the separating model is right on every text at k and at k / 2: nothing to extrapolate
    correct, margin = probes.probe_scores({"good": pool["good"]}, rows, codes[rows], "ridge")
    curved_c, curved_m = probes.curve_scores({"good": pool["good"]}, rows, codes[rows], "ridge")
    assert np.array_equal(correct, curved_c) and correct.all()
    # a model whose margins grow with the labels is credited above its value at k
    _, weak_m = probes.probe_scores({"weak": pool["weak"]}, rows, codes[rows], "ridge")
    _, weak_curved = probes.curve_scores({"weak": pool["weak"]}, rows, codes[rows], "ridge")
    assert weak_curved.mean() > weak_m.mean()
    # with every text labelled already there is nothing left to extrapolate to
    small = {"weak": pool["weak"][:60]}
    assert np.array_equal(
        probes.curve_scores(small, rows, codes[rows], "ridge")[1],
        probes.probe_scores(small, rows, codes[rows], "ridge")[1],
    )


def test_advice_never_settles_on_labels_that_carry_no_evidence():
    pool, labels = _pool(n=60)
    frame = few_label_estimates(pool, np.array([0, 1]), ["a", "b"])  # one label per class
    advice = stopping_advice(frame, 2)
    assert not advice["settled"] and advice["more_labels"] >= 14 and advice["reason"] == "few labels"
    sure = _estimates([0.99, 0.01, 0.0], [0.9, 0.5, 0.4], [1.0, 0.0, 0.0])
    assert not stopping_advice(sure, 16)["settled"] and stopping_advice(sure, 48)["settled"]


def test_advice_waits_for_enough_labels_per_class():
    # the same sure leader over 4 classes: 24 labels per class are 96, and 64 say so and ask for the rest
    sure = _estimates([0.99, 0.01, 0.0], [0.9, 0.5, 0.4], [1.0, 0.0, 0.0], n_classes=4)
    advice = stopping_advice(sure, 64)
    assert not advice["settled"] and advice["more_labels"] == 32
    assert "too few to be sure" in advice["text"] and "label 32 more texts" in advice["text"]
    assert not stopping_advice(sure, 95)["settled"] and stopping_advice(sure, 96)["settled"]
    # 16 classes of 8 labels each (health-tweets at k = 128) would need 256 more; at most MAX_MORE are asked
    many = _estimates([0.99, 0.01, 0.0], [0.9, 0.5, 0.4], [1.0, 0.0, 0.0], n_classes=16)
    assert stopping_advice(many, 128)["more_labels"] == min(16 * 24 - 128, stopping.MAX_MORE)
    # a corpus of 60 texts has no 96 to label: 80% of it (48 texts) is all there is to extrapolate to
    sure.attrs["n_texts"] = 60
    assert not stopping_advice(sure, 47)["settled"] and stopping_advice(sure, 48)["settled"]


def test_advice_does_not_trust_a_leader_no_better_than_guessing():
    # two classes: the leader's accuracy interval must start at 0.5 + 0.2 or above
    near_chance = _estimates([0.99, 0.01, 0.0], [0.9, 0.5, 0.4], [1.0, 0.0, 0.0], ci_low=(0.69, 0.5, 0.4))
    advice = stopping_advice(near_chance, 128)
    assert not advice["settled"] and "better than guessing" in advice["text"] and advice["more_labels"] >= 8
    clear = _estimates([0.99, 0.01, 0.0], [0.9, 0.5, 0.4], [1.0, 0.0, 0.0], ci_low=(0.7, 0.5, 0.4))
    assert stopping_advice(clear, 128)["settled"]
    # with five classes guessing is 20%: 0.4 is enough there
    five = _estimates(
        [0.99, 0.01, 0.0], [0.9, 0.5, 0.4], [1.0, 0.0, 0.0], ci_low=(0.4, 0.3, 0.2), n_classes=5
    )
    assert stopping_advice(five, 128)["settled"]
    assert not stopping_advice(five.assign(ci_low=[0.39, 0.3, 0.2]), 128)["settled"]


def test_advice_on_a_real_frame_needs_its_interval():
    pool, labels = _pool(n=300, k=2)
    rows = np.arange(64)
    frame = few_label_estimates({m: pool[m] for m in ("good", "noise")}, rows, labels[rows].tolist())
    advice = stopping_advice(frame, 64)
    assert advice["best"] == "good" and advice["settled"]  # a separating model, 32 labels a class
    # weak, carried past 100% on these labels, cannot be told from good by a point: its own error carried
    # forward leaves neither surely within a point of the other
    frame3 = few_label_estimates(pool, rows, labels[rows].tolist())
    both = stopping_advice(frame3, 64)
    assert frame3.set_index("model").loc["weak", "past_ceiling"]
    assert not both["settled"] and both["reason"] == "not sure yet" and "cannot yet tell" in both["text"]
    with pytest.raises(ValueError, match="ci_low"):
        stopping_advice(frame.drop(columns="ci_low"), 64)


def test_advice_does_not_settle_between_models_carried_past_perfect():
    # m1 and m2 would do, but m2's estimate ran past 100% and was clipped: their gap is not measured
    frame = _estimates([0.5, 0.45, 0.05], [1.0, 1.0, 0.5], [0.99, 0.99, 0.0]).assign(
        past_ceiling=[False, True, False]
    )
    advice = stopping_advice(frame, 64)
    assert (
        not advice["settled"]
        and advice["reason"] == "near perfect"
        and "m2 would pass 100%" in advice["text"]
    )
    assert stopping_advice(frame.assign(past_ceiling=False), 64)["settled"]
    # a model that is right on every labelled text at k and at k / 2 is at 100% without being carried there
    pool, labels = _pool(n=300)
    rows = np.arange(60)
    frame = few_label_estimates({"good": pool["good"], "noise": pool["noise"]}, rows, labels[rows])
    assert frame.set_index("model").loc["good", "estimate"] == pytest.approx(61 / 62)
    assert not frame.set_index("model").loc["good", "past_ceiling"]
