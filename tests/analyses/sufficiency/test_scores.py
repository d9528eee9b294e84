"""Scores on a fabricated result whose per-sample arrays are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core.analyses.sufficiency import SufficiencyResult, all_scores, indistinguishable, model_scores

A_VALUES = [0, 1, 1, 2, 3, 5, 8, 13, 21, 100]  # IS(a -> r_k) in nats, k = 0..9
N_VAL = 6
CENTRED = np.array([1.0, -1.0, 2.0, -2.0, 0.5, -0.5])  # mean zero: leaves every pair's mean unchanged


def _fabricated() -> SufficiencyResult:
    refs = [f"r{k}" for k in range(10)]
    names = ["a", "b", *refs]
    dims = {"a": 4, "b": 2, **{r: 2 for r in refs}}
    marg = {t: np.full(N_VAL, -3.0) for t in names}  # log p(v) = -3 everywhere
    cond = {}
    for k, r in enumerate(refs):
        cond[("a", r)] = -3.0 + A_VALUES[k] + CENTRED
        cond[("b", r)] = -3.0 + 1.0 + 0.1 * CENTRED
    cond[("a", "b")] = -3.0 + 4.0 + CENTRED
    cond[("b", "a")] = -3.0 + 2.0 + CENTRED
    matrix = pd.DataFrame(np.nan, index=["a", "b"], columns=names)
    for (s, t), lp in cond.items():
        matrix.loc[s, t] = float(np.mean(lp - marg[t]))
    return SufficiencyResult(
        names=names,
        sources=["a", "b"],
        dims=dims,
        is_matrix=matrix,
        records=pd.DataFrame(),
        val_logp_marg=marg,
        val_logp_cond=cond,
        config={},
        seed=0,
        train_idx=np.arange(10, 20),
        val_idx=np.arange(N_VAL),
    )


def _score(frame: pd.DataFrame, model: str) -> float:
    return float(frame.set_index("model").loc[model, "score"])


def test_hand_computed_aggregations():
    result = _fabricated()
    a_raw = np.array([*A_VALUES, 4.0])  # ten references + b
    # sorted: 0 1 1 2 3 4 5 8 13 21 100 -> median 4, mean 158/11, trim10 (drop 1 each end) = 58/9
    assert _score(
        model_scores(result, aggregation="median", normalize=False, n_boot=0), "a"
    ) == pytest.approx(4.0)
    assert _score(model_scores(result, aggregation="mean", normalize=False, n_boot=0), "a") == pytest.approx(
        158 / 11
    )
    assert _score(
        model_scores(result, aggregation="trim10", normalize=False, n_boot=0), "a"
    ) == pytest.approx(58 / 9)
    assert a_raw.sum() == 158
    # normalised: every target of a has d = 2
    assert _score(model_scores(result, aggregation="median", n_boot=0), "a") == pytest.approx(2.0)
    # b's targets: a (d=4, IS 2 -> 0.5) and ten references (IS 1, d=2 -> 0.5)
    assert _score(model_scores(result, aggregation="mean", n_boot=0), "b") == pytest.approx(0.5)


def test_cond_only_variant():
    result = _fabricated()
    frame = model_scores(result, variant="cond_only", aggregation="median", normalize=False, n_boot=0)
    assert _score(frame, "a") == pytest.approx(-3.0 + 4.0)
    assert _score(frame, "b") == pytest.approx(-3.0 + 1.0)


def test_references_not_ranked_and_ranks():
    frame = model_scores(_fabricated(), n_boot=0)
    assert list(frame["model"]) == ["a", "b"]
    assert list(frame["rank"]) == [1.0, 2.0]
    assert list(frame["n_targets"]) == [11, 11]
    assert frame[["ci_low", "ci_high"]].isna().all().all()


def test_bootstrap_interval_contains_point_estimate():
    frame = model_scores(_fabricated(), aggregation="mean", n_boot=500, seed=1)
    for row in frame.itertuples():
        assert row.ci_low <= row.score <= row.ci_high
        assert row.ci_high > row.ci_low
    again = model_scores(_fabricated(), aggregation="mean", n_boot=500, seed=1)
    pd.testing.assert_frame_equal(frame, again)


def test_val_subset_restricts_rows():
    result = _fabricated()
    # rows 0 and 2 of CENTRED are +1 and +2: pair a -> b becomes 4 + 1.5
    frame = model_scores(result, aggregation="median", normalize=False, n_boot=0, val_subset=np.array([0, 2]))
    shifted = sorted([v + 1.5 for v in A_VALUES] + [4.0 + 1.5])
    assert _score(frame, "a") == pytest.approx(float(np.median(shifted)))
    with pytest.raises(ValueError, match="positions must lie"):
        model_scores(result, val_subset=np.array([0, N_VAL]))
    with pytest.raises(ValueError, match="integer positions"):
        model_scores(result, val_subset=np.array([0.5]))


def test_indistinguishable_pairs():
    frame = pd.DataFrame(
        {
            "model": ["x", "y", "z"],
            "score": [3.0, 2.5, 1.0],
            "ci_low": [2.0, 2.2, 0.5],
            "ci_high": [4.0, 2.8, 1.5],
        }
    )
    assert indistinguishable(frame) == [("x", "y")]
    with pytest.raises(ValueError, match="lacks columns"):
        indistinguishable(frame.drop(columns="ci_low"))


def test_all_scores_columns():
    table = all_scores(_fabricated())
    assert list(table["model"]) == ["a", "b"]
    expected = {
        f"{v}_{a}_{n}"
        for v in ("is", "cond_only")
        for a in ("median", "mean", "trim10")
        for n in ("norm", "raw")
    }
    assert expected <= set(table.columns)
    assert table.set_index("model").loc["a", "is_median_raw"] == pytest.approx(4.0)


def test_option_validation():
    result = _fabricated()
    with pytest.raises(ValueError, match="aggregation"):
        model_scores(result, aggregation="max")
    with pytest.raises(ValueError, match="variant"):
        model_scores(result, variant="marg")
    with pytest.raises(ValueError, match="n_boot"):
        model_scores(result, n_boot=-1)
    with pytest.raises(ValueError, match="ci must"):
        model_scores(result, ci=1.0)
    with pytest.raises(ValueError, match="SufficiencyResult"):
        model_scores({"a": 1})
