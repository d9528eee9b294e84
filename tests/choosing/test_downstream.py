"""Supervised oracle tasks against separable, random and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from flare_core.choosing.downstream import classification, clustering, downstream_report, retrieval, sts
from tests.properties import assert_finite


def _blobs(n_per: int = 20, d: int = 6, k: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = np.eye(d)[:k] * 10.0
    x = np.concatenate([c + 0.1 * rng.standard_normal((n_per, d)) for c in centres])
    return x, np.repeat(np.array(["a", "b", "c"][:k]), n_per)


# ------------------------------------------------------------------------------------------ classification


def test_classification_separable_blobs_is_perfect():
    x, y = _blobs()
    res = classification(x, y, seed=0)
    assert res["accuracy"] == pytest.approx(1.0)
    assert res["f1"] == pytest.approx(1.0)
    assert res["n_folds"] == 5 and not res["folds_reduced"] and res["dropped_classes"] == []


def test_classification_random_labels_near_chance():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 5))
    y = rng.integers(0, 2, 200)
    res = classification(x, y, seed=0)
    assert abs(res["accuracy"] - 0.5) < 0.12
    assert_finite([res["accuracy"], res["f1"]])


def test_classification_small_classes_reduce_folds_and_drop_singletons():
    x, y = _blobs(n_per=6)
    y = y.copy()
    y[:3] = "rare"  # 3 members -> 3 folds
    x = np.vstack([x, np.full((1, x.shape[1]), 5.0)])
    y = np.append(y, "lonely")  # 1 member -> dropped
    res = classification(x, y, folds=5)
    assert res["n_folds"] == 3 and res["folds_reduced"] and res["n_folds_requested"] == 5
    assert res["dropped_classes"] == ["lonely"] and res["n_samples"] == len(y) - 1 and res["n_classes"] == 4


def test_classification_validates():
    x, y = _blobs()
    with pytest.raises(ValueError, match="at least 2 classes"):
        classification(x, np.zeros(len(x)))
    with pytest.raises(ValueError, match="folds must be"):
        classification(x, y, folds=1)
    with pytest.raises(ValueError, match="entries but x has"):
        classification(x, y[:-1])


# ---------------------------------------------------------------------------------------------- clustering


def test_clustering_separable_blobs_v_measure_one():
    x, y = _blobs()
    res = clustering(x, y, seed=0)
    assert res["v_measure"] == pytest.approx(1.0) and res["n_clusters"] == 3


def test_clustering_random_labels_low_and_validates():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((150, 4))
    assert clustering(x, rng.integers(0, 3, 150))["v_measure"] < 0.1
    with pytest.raises(ValueError, match="distinct labels"):
        clustering(x, np.zeros(150))


# ---------------------------------------------------------------------------------------------------- STS


def test_sts_monotonic_gold_is_perfect_spearman():
    angles = np.linspace(0.0, np.pi / 2, 8)
    a = np.tile([1.0, 0.0], (8, 1))
    b = np.stack([np.cos(angles), np.sin(angles)], axis=1) * 3.0
    gold = 5.0 - np.arange(8) ** 2  # monotonic in the cosine, not linear
    res = sts(a, b, gold)
    assert res["cosine_spearman"] == pytest.approx(1.0)
    assert 0.9 < res["cosine_pearson"] < 1.0
    assert sts(a, b, -gold)["cosine_spearman"] == pytest.approx(-1.0)


def test_sts_constant_gold_nan_and_validation():
    a = np.eye(3)
    assert np.isnan(sts(a, a[::-1], [1.0, 1.0, 1.0])["cosine_spearman"])
    with pytest.raises(ValueError, match="same shape"):
        sts(a, a[:2], [1, 2, 3])
    with pytest.raises(ValueError, match="all-zero rows"):
        sts(a, np.zeros((3, 3)), [1, 2, 3])


# ---------------------------------------------------------------------------------------------- retrieval


def _retrieval_case():
    """2 queries, 5 documents on the unit circle, rankings fixed by angle."""
    doc_angles = np.array([0.0, 0.3, 0.6, 0.9, 1.2])
    docs = np.stack([np.cos(doc_angles), np.sin(doc_angles)], axis=1)
    queries = np.array([[1.0, 0.0], [np.cos(1.25), np.sin(1.25)]])
    # query 0 ranks docs 0,1,2,3,4; query 1 ranks docs 4,3,2,1,0
    qrels = {0: {1: 2, 3: 1}, 1: {4: 1, 0: 3}}
    return queries, docs, qrels


def test_retrieval_ndcg_by_hand():
    q, d, qrels = _retrieval_case()
    res = retrieval(q, d, qrels, k=10)
    # query 0: grades in rank order 0,2,0,1,0; ideal 2,1
    dcg0 = 2 / np.log2(3) + 1 / np.log2(5)
    idcg0 = 2 / np.log2(2) + 1 / np.log2(3)
    # query 1: grades in rank order 1,0,0,0,3; ideal 3,1
    dcg1 = 1 / np.log2(2) + 3 / np.log2(6)
    idcg1 = 3 / np.log2(2) + 1 / np.log2(3)
    assert res["ndcg_at_10"] == pytest.approx((dcg0 / idcg0 + dcg1 / idcg1) / 2, rel=1e-12)
    # AP: q0 hits at ranks 2, 4 -> (1/2 + 2/4)/2 ; q1 hits at ranks 1, 5 -> (1 + 2/5)/2
    assert res["map_at_10"] == pytest.approx(((0.5 + 0.5) / 2 + (1 + 0.4) / 2) / 2)
    assert res["recall_at_10"] == pytest.approx(1.0) and res["n_queries"] == 2
    # k = 2: q0 finds doc 1 only, q1 finds doc 4 only
    res2 = retrieval(q, d, qrels, k=2)
    assert res2["recall_at_2"] == pytest.approx(0.5)
    assert res2["ndcg_at_2"] == pytest.approx(((2 / np.log2(3)) / idcg0 + 1 / idcg1) / 2)


def test_retrieval_ndcg_matches_sklearn():
    rng = np.random.default_rng(3)
    q, d = rng.standard_normal((6, 8)), rng.standard_normal((30, 8))
    true = np.zeros((6, 30))
    qrels: dict[int, dict[int, int]] = {}
    for qi in range(6):
        for di in rng.choice(30, size=4, replace=False):
            grade = int(rng.integers(1, 4))
            true[qi, di] = grade
            qrels.setdefault(qi, {})[int(di)] = grade
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    dn = d / np.linalg.norm(d, axis=1, keepdims=True)
    for k in (3, 10):
        expected = ndcg_score(true, qn @ dn.T, k=k)
        assert retrieval(q, d, qrels, k=k)[f"ndcg_at_{k}"] == pytest.approx(expected, rel=1e-10)


def test_retrieval_pairs_input_and_validation():
    q, d, _ = _retrieval_case()
    by_pairs = retrieval(q, d, [(0, 1), (1, 4, 2)])
    by_dict = retrieval(q, d, {0: {1: 1}, 1: {4: 2}})
    assert by_pairs == by_dict
    with pytest.raises(ValueError, match="out of range"):
        retrieval(q, d, {0: {9: 1}})
    with pytest.raises(ValueError, match=">= 0"):
        retrieval(q, d, {0: {1: -1}})
    with pytest.raises(ValueError, match="no query with a relevant"):
        retrieval(q, d, {0: {1: 0}})


# --------------------------------------------------------------------------------------------------- report


def test_downstream_report_tasks():
    x, y = _blobs()
    rep = downstream_report(x, y)
    assert rep["tasks"] == ["classification", "clustering"]
    assert set(rep["scores"]) == {"accuracy", "f1", "v_measure"}
    q, d, _ = _retrieval_case()
    rep = downstream_report(pairs=(q, d[[0, 4]]))  # aligned: query i <-> doc i
    assert rep["tasks"] == ["retrieval"] and rep["scores"]["ndcg_at_10"] == pytest.approx(1.0)
    rep = downstream_report(pairs=(q, d[[0, 4]]), gold=[1.0, 2.0])
    assert rep["tasks"] == ["sts"]
    with pytest.raises(ValueError, match="nothing to evaluate"):
        downstream_report()
    with pytest.raises(ValueError, match="without pairs"):
        downstream_report(x, y, gold=[1.0])


def test_knn_accuracy_matches_a_plain_scikit_learn_cross_validation():
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    from flare_core.choosing.downstream import knn_accuracy

    rng = np.random.default_rng(3)
    labels = np.repeat(["a", "b", "c"], 40)
    x = rng.normal(size=(120, 8))
    x[:, 0] += np.select([labels == "a", labels == "b"], [3.0, -3.0], 0.0)
    result = knn_accuracy(x, labels, k=5, folds=4, seed=2)
    codes = np.unique(labels, return_inverse=True)[1]
    reference = cross_val_score(
        KNeighborsClassifier(5, metric="cosine"),
        x,
        codes,
        cv=StratifiedKFold(4, shuffle=True, random_state=2),
    ).mean()
    assert result["knn_accuracy"] == pytest.approx(reference, abs=1e-12)
    assert result["k"] == 5 and result["n_folds"] == 4 and 0.5 < result["knn_accuracy"] <= 1.0
    # k larger than a training fold is capped; single-member classes are dropped as for the probe
    small = knn_accuracy(x[:9], ["a", "b", "a", "b", "a", "b", "a", "b", "z"], k=50, folds=2)
    assert small["k"] == 4 and small["dropped_classes"] == ["z"]
