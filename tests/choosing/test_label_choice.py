"""Which texts to label next: never a labelled or skipped row, seeded, and refusing bad rows."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.choosing.label_choice import information_gain, next_rows, telling_apart


def _pool(n: int = 200, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    return {"a": np.hstack([2.0 * y[:, None], rng.normal(size=(n, 4))]), "b": rng.normal(size=(n, 6))}, y


def test_first_batch_is_n_distinct_rows_and_seeded():
    pool, _ = _pool()
    rows = next_rows(pool, np.array([], dtype=np.int64), [], 16, seed=1)
    assert rows.shape == (16,) and np.unique(rows).size == 16 and rows.dtype == np.int64
    assert np.array_equal(rows, next_rows(pool, np.array([], dtype=np.int64), [], 16, seed=1))


def test_later_batches_skip_labelled_and_excluded_rows_until_the_corpus_runs_out():
    pool, y = _pool(n=40)
    labelled = np.arange(0, 20)
    rows = next_rows(pool, labelled, y[labelled], 30, exclude=[20, 21])
    assert set(rows) == set(range(22, 40))


def test_next_rows_refuses_rows_outside_the_corpus_and_mismatched_labels():
    pool, y = _pool()
    with pytest.raises(ValueError, match="outside the corpus"):
        next_rows(pool, np.array([0, 999]), ["a", "b"], 4)
    with pytest.raises(ValueError, match="one label per row"):
        next_rows(pool, np.array([0, 1]), ["a"], 4)
    with pytest.raises(ValueError, match="exclude"):
        next_rows(pool, np.array([0]), ["a"], 4, exclude=[-1])
    with pytest.raises(ValueError, match="n must be"):
        next_rows(pool, np.array([0]), ["a"], 0)


def _clusters(n_per: int = 50, seed: int = 0) -> dict[str, np.ndarray]:
    """Four tight, far-apart clusters seen alike by two models."""
    rng = np.random.default_rng(seed)
    centres = np.eye(4) * 10.0
    x = np.concatenate([c + 0.1 * rng.normal(size=(n_per, 4)) for c in centres])
    return {"a": x, "b": x @ rng.normal(size=(4, 6))}


@pytest.mark.parametrize("strategy", ["random", "diverse", "disagree", "contest", "inform"])
def test_every_strategy_returns_fresh_distinct_rows(strategy):
    pool, y = _pool(n=120)
    labelled = np.arange(0, 20)
    rows = next_rows(pool, labelled, y[labelled], 10, exclude=[20, 21], strategy=strategy, seed=3)
    assert rows.shape == (10,) and np.unique(rows).size == 10
    assert not set(rows) & set(range(22))


def test_diverse_first_batch_covers_every_cluster():
    pool = _clusters()
    hit = [
        np.unique(next_rows(pool, np.array([], dtype=np.int64), [], 4, strategy="diverse", seed=s) // 50).size
        for s in range(10)
    ]
    assert min(hit) == 4  # k-means++ seeding in far-apart clusters: one row per cluster every time


def test_disagreement_asks_where_the_models_probes_differ():
    rng = np.random.default_rng(0)
    n = 200
    y = np.arange(n) % 2
    side = np.where(np.arange(n) < 100, 1.0, -1.0)  # the second half: model b sees the classes swapped
    # noise on 8 axes: texts of one class differ (with 2 axes of 0.1 they were near-duplicates, cosine > 0.97)
    a = np.column_stack([2.0 * y - 1, rng.normal(size=(n, 8)) * 0.3]) + 0.05
    b = np.column_stack([(2.0 * y - 1) * side, rng.normal(size=(n, 8)) * 0.3]) + 0.05
    labelled = np.array([0, 1, 2, 3])  # from the first half, where both models agree
    rows = next_rows({"a": a, "b": b}, labelled, y[labelled], 10, strategy="disagree")
    assert (rows >= 100).all()


@pytest.mark.parametrize("strategy", ["random", "diverse", "disagree", "contest", "inform"])
def test_a_batch_never_holds_near_duplicates_nor_texts_already_labelled(strategy):
    pool, y = _pool(n=120)
    rng = np.random.default_rng(5)
    pool["b"][30:36] = pool["b"][25] + 0.01 * rng.normal(size=(6, 6))  # near-duplicates for model b only
    texts = [f"text {i} of its own" for i in range(120)]
    texts[40:45] = ["Where can I download my receipts?", "where can i download my receipts", "WHERE can I "
                    "download  my receipts!", "Where, can I download my receipts...", "where can I download my receipts"]  # fmt: skip
    texts[5], texts[60], texts[61] = (
        "My bill went up by €8.50.",
        "my bill went up by €8.50!!",
        " My bill went up by €8.50",
    )
    labelled = np.arange(0, 20)  # row 5 among them: rows 60 and 61 repeat a labelled text
    rows = next_rows(pool, labelled, y[labelled], 80, strategy=strategy, seed=2, texts=texts)
    assert not set(rows) & set(range(20))
    keys = [
        " ".join("".join(c for c in texts[r].lower() if c.isalnum() or c.isspace()).split()) for r in rows
    ]
    assert len(set(keys)) == len(keys) and not {60, 61} & set(rows)
    for x in pool.values():
        centred = x - x.mean(axis=0)
        unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
        cos = unit[rows] @ unit[np.concatenate([labelled, rows])].T
        cos[np.arange(rows.size), labelled.size + np.arange(rows.size)] = 0.0  # a row with itself
        assert cos.max() < 0.97
    assert len(set(rows) & set(range(40, 45))) == 1 and len(set(rows) & {25, *range(30, 36)}) == 1
    assert rows.size == 80  # the rest of the corpus is distinct: the batch is full


def test_texts_must_be_one_per_row():
    pool, y = _pool()
    with pytest.raises(ValueError, match="texts has 3 entries"):
        next_rows(pool, np.array([0]), ["a"], 4, texts=["a", "b", "c"])


def test_information_gain_asks_where_the_likely_best_models_disagree():
    # rows 0-1: every model predicts alike (as often right); row 2: the two leaders differ; row 3: only the unlikely one does
    predictions = np.array([[0, 0, 0], [1, 1, 1], [0, 1, 0], [0, 0, 1]])
    gain = information_gain(predictions, np.array([0.49, 0.49, 0.02]), np.full(3, 0.8), 2)
    assert gain[0] == pytest.approx(0.0, abs=1e-12) and gain[1] == pytest.approx(0.0, abs=1e-12)
    assert gain[2] > 10.0 * gain[3] > 0.0
    # once one model is sure to be the best, no label tells more
    sure = information_gain(predictions, np.array([1.0, 0.0, 0.0]), np.array([0.8, 0.7, 0.6]), 2)
    assert np.allclose(sure, 0.0, atol=1e-12)


def test_inform_asks_for_the_texts_the_two_leading_models_disagree_on():
    rng = np.random.default_rng(0)
    n = 200
    y = np.arange(n) % 2
    side = np.where(np.arange(n) < 100, 1.0, -1.0)  # the second half: model b sees the classes swapped
    a = np.column_stack([2.0 * y - 1, rng.normal(size=(n, 8)) * 0.3]) + 0.05
    b = np.column_stack([(2.0 * y - 1) * side, rng.normal(size=(n, 8)) * 0.3]) + 0.05
    c = np.column_stack([2.0 * y - 1, rng.normal(size=(n, 8)) * 0.3]) + 0.05  # agrees with a everywhere
    labelled = np.array([0, 1, 2, 3])  # from the first half, where every model agrees
    rows = next_rows({"a": a, "b": b, "c": c}, labelled, y[labelled], 10, strategy="inform", seed=1)
    assert rows.shape == (10,) and (rows >= 100).all()
    first = next_rows({"a": a, "b": b}, np.array([], dtype=np.int64), [], 10, strategy="inform", seed=1)
    assert (first < 100).any() and (first >= 100).any()  # no label yet: a random batch


@pytest.mark.parametrize("strategy", ["random", "diverse", "inform"])
def test_a_model_that_cannot_tell_texts_apart_does_not_empty_the_batch(strategy):
    pool, y = _pool(n=120)
    rng = np.random.default_rng(3)
    # most texts one vector, as a model of English words puts Chinese texts: all near-duplicates
    pool["blind"] = np.vstack([np.ones((100, 6)), rng.normal(size=(20, 6))])
    labelled = np.arange(0, 20)
    rows = next_rows(pool, labelled, y[labelled], 64, strategy=strategy, seed=1)
    assert rows.size == 64 and not set(rows) & set(range(20))
    assert len(telling_apart(pool)) == len(pool) - 1
    # a model that tells texts apart is still asked: its own near-duplicates stay out
    pool["b"][30:36] = pool["b"][25] + 0.01 * rng.normal(size=(6, 6))
    rows = next_rows(pool, labelled, y[labelled], 100, strategy=strategy, seed=1)
    assert len(set(rows) & {25, *range(30, 36)}) == 1 and rows.size >= 80
