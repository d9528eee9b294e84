"""The cheapest good-enough model and the Pareto front, against hand computations and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from flare_core.choosing.tradeoff import cheapest_within, pareto_front, tradeoff_table

MODELS = ["mpnet", "minilm", "para", "glove"]
COSTS = pd.DataFrame(
    {
        "model": MODELS,
        "texts_per_s": [20.0, 120.0, 300.0, 5000.0],
        "bytes_per_vector_float32": [3072, 1536, 1536, 200],
    }
)


def _quality(values, low=np.nan, high=np.nan, label="accuracy (points)") -> pd.DataFrame:
    return pd.DataFrame({"model": MODELS, "quality": values, "ci_low": low, "ci_high": high, "label": label})


def test_cheapest_within_one_point_by_hand():
    # best: mpnet 80.0; within 1 point: mpnet and minilm (79.4), not para (78.5) nor glove (70)
    pick = cheapest_within(_quality([80.0, 79.4, 78.5, 70.0]), COSTS, points=1.0)
    assert pick["model"] == "minilm" and pick["best"] == "mpnet" and not pick["label_free"]
    assert pick["speedup"] == pytest.approx(120 / 20) and pick["storage_ratio"] == pytest.approx(0.5)
    assert sorted(pick["candidates"]) == ["minilm", "mpnet"]
    assert (
        pick["sentence"]
        == "Cheapest within 1 point of the best (mpnet): minilm, 6× faster, half the storage."
    )
    # two points let paraphrase in: 300 / 20 = 15 times faster
    wider = cheapest_within(_quality([80.0, 79.4, 78.5, 70.0]), COSTS, points=2)
    assert wider["model"] == "para" and wider["sentence"].endswith("para, 15× faster, half the storage.")


def test_an_interval_that_cannot_tell_is_never_called_within_one_point():
    # mpnet 80 (78-82) and para 78.5: the labels cannot tell them apart, which is not "within 1 point"
    quality = _quality([80.0, 79.4, 78.5, 70.0], low=[78.0, 77, 76, 60], high=[82.0, 81, 80, 75])
    assert cheapest_within(quality, COSTS, points=1.0)["model"] == "minilm"


def test_the_answers_own_good_enough_decides_and_an_undecided_cheaper_model_is_named():
    # the answer says: minilm is within 1 point with 90% chance; glove (250x faster than mpnet) may be
    quality = _quality([80.0, 79.4, 78.5, 71.0]).assign(
        good_enough=[True, True, False, False], undecided=[False, False, False, True],
        gap_high=[0.0, 0.9, 3.0, 14.0], more_labels=[np.nan, np.nan, np.nan, 48],
    )  # fmt: skip
    pick = cheapest_within(quality, COSTS, points=1.0)
    assert pick["model"] == "minilm" and pick["candidates"] == ["minilm", "mpnet"]
    assert pick["undecided"] == {"model": "glove", "behind": 9.0, "more_labels": 48, "speedup": 250.0}
    assert pick["sentence"] == (
        "Cheapest within 1 point of the best (mpnet): minilm, 6× faster, half the storage. The labels cannot "
        "tell yet whether glove (250× faster) is within 1 point of mpnet: its estimate is 9.0 points behind, "
        "and may be up to 14.0 behind; about 48 more labels would tell."
    )
    # measured against the answer's choice, not the highest quality
    assert (
        cheapest_within(quality.assign(good_enough=True), COSTS, best="minilm", points=1.0)["best"]
        == "minilm"
    )


def test_label_free_quality_counts_the_models_its_intervals_cannot_separate():
    quality = _quality(
        [0.6, 0.52, 0.40, 0.1], low=[0.5, 0.45, 0.35, 0.0], high=[0.7, 0.55, 0.45, 0.2],
        label="label-free: information sufficiency",
    )  # fmt: skip
    pick = cheapest_within(quality, COSTS, points=1.0)
    assert pick["label_free"] and pick["model"] == "minilm"  # 0.55 reaches 0.5; para's 0.45 does not
    assert "label-free" in pick["sentence"] and pick["sentence"].endswith(
        "minilm, 6× faster, half the storage."
    )


def test_cheapest_by_storage_and_the_best_model_itself():
    quality = _quality([80.0, 79.4, 78.5, 70.0])
    by_bytes = cheapest_within(quality, COSTS, cost="bytes_per_vector", points=10.0)
    assert by_bytes["model"] == "glove" and by_bytes["storage_ratio"] == pytest.approx(200 / 3072)
    assert by_bytes["sentence"].endswith("glove, 250× faster, 0.065× the storage.")
    alone = cheapest_within(_quality([80.0, 60.0, 50.0, 40.0]), COSTS, points=0.5)
    assert (
        alone["model"] == "mpnet"
        and alone["sentence"] == "Cheapest within 0.5 points of the best (mpnet): mpnet itself."
    )
    assert cheapest_within(_quality([80.0, 1, 2, 3]).assign(model=list("abcd")), COSTS) is None
    with pytest.raises(ValueError, match="cost"):
        cheapest_within(quality, COSTS, cost="watts")
    with pytest.raises(ValueError, match="points"):
        cheapest_within(quality, COSTS, points=-1)


def test_pareto_front_matches_brute_force():
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {"model": [f"m{i}" for i in range(30)], "quality": rng.integers(0, 8, 30).astype(float),
         "texts_per_s": rng.integers(1, 8, 30).astype(float), "bytes_per_vector": rng.integers(1, 8, 30) * 64.0}
    )  # fmt: skip
    for cost, sign in (("texts_per_s", 1.0), ("bytes_per_vector", -1.0)):
        front = pareto_front(table, cost)
        for i, j in itertools.product(range(30), repeat=2):
            q_i, q_j = table["quality"][i], table["quality"][j]
            c_i, c_j = sign * table[cost][i], sign * table[cost][j]
            if (q_j >= q_i and c_j >= c_i) and (q_j > q_i or c_j > c_i):
                assert not front[i], (cost, i, j)
        assert front.sum() >= 1
        for i in np.flatnonzero(front):
            dominated = any(
                (table["quality"][j] >= table["quality"][i])
                and (sign * table[cost][j] >= sign * table[cost][i])
                and (
                    table["quality"][j] > table["quality"][i] or sign * table[cost][j] > sign * table[cost][i]
                )
                for j in range(30)
            )
            assert not dominated


def test_tradeoff_table_keeps_models_with_both_quality_and_costs():
    quality = _quality([80.0, np.nan, 78.5, 70.0]).iloc[:3]
    table = tradeoff_table(quality, COSTS)
    assert table["model"].tolist() == ["mpnet", "para"]
    assert table["bytes_per_vector"].tolist() == [3072, 1536]
    with pytest.raises(ValueError, match="quality must be a DataFrame"):
        tradeoff_table(pd.DataFrame({"model": ["a"]}), COSTS)
