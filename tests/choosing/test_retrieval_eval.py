"""Search metrics per query (trec_eval's code through pytrec_eval) on cases small enough to work out by hand,
and the comparison of models over queries."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from flare_core.choosing.downstream import retrieval
from flare_core.choosing.retrieval_eval import check_judgements, compare_on_queries, per_query_scores


def _at(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_hand_computed_case():
    # documents on the unit circle at 10°, 20°, 30° and 80°; query "a" at 0°, query "b" at 90°. By cosine,
    # "a" ranks the documents 0, 1, 2, 3 and "b" ranks them 3, 2, 1, 0.
    docs = np.array([_at(10), _at(20), _at(30), _at(80)])
    queries = np.array([_at(0), _at(90)])
    judgements = {"a": {1: 2, 2: 1, 3: 0}, "b": {0: 1}}
    scores = per_query_scores(queries, docs, judgements, {"a": 0, "b": 1}).set_index("query")
    # "a": gains 0, 2, 1, 0 at ranks 1-4; ideal order 2, 1. DCG = 2/log2(3) + 1/log2(4)
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert scores.loc["a", "ndcg_at_10"] == pytest.approx(dcg / ideal, abs=1e-12)
    assert scores.loc["a", "ndcg_at_10"] == pytest.approx(0.669672, abs=1e-6)
    assert scores.loc["a", "mrr_at_10"] == pytest.approx(1 / 2)  # first relevant at rank 2
    assert scores.loc["a", "recall_at_10"] == pytest.approx(1.0)  # both relevant documents in the top 10
    # "b": its one relevant document is ranked 4th: nDCG = 1/log2(5), MRR = 1/4
    assert scores.loc["b", "ndcg_at_10"] == pytest.approx(1 / math.log2(5), abs=1e-12)
    assert scores.loc["b", "mrr_at_10"] == pytest.approx(1 / 4)
    assert scores.loc["b", "recall_at_10"] == pytest.approx(1.0)


def test_only_the_top_ten_count():
    # 12 documents at 1°, 2°, … 12°: the query at 0° ranks them in order; the relevant ones are 5th and 12th
    docs = np.array([_at(d) for d in range(1, 13)])
    scores = per_query_scores(np.array([_at(0)]), docs, {"q": {4: 1, 11: 1}}, {"q": 0}).iloc[0]
    assert scores["recall_at_10"] == pytest.approx(1 / 2)
    assert scores["mrr_at_10"] == pytest.approx(1 / 5)
    assert scores["ndcg_at_10"] == pytest.approx((1 / math.log2(6)) / (1 + 1 / math.log2(3)), abs=1e-12)
    # beyond the cut nothing is found: all zero
    far = per_query_scores(np.array([_at(0)]), docs, {"q": {11: 3}}, {"q": 0}).iloc[0]
    assert (far[["ndcg_at_10", "recall_at_10", "mrr_at_10"]] == 0).all()


def test_the_oracle_reads_the_same_trec_eval_figures_as_the_search_answer():
    # the hand-computed case above through the supervised oracle (downstream.retrieval), which scores its
    # rankings with the same trec_eval call: the means of the hand-computed figures
    docs = np.array([_at(10), _at(20), _at(30), _at(80)])
    queries = np.array([_at(0), _at(90)])
    oracle = retrieval(queries, docs, {0: {1: 2, 2: 1, 3: 0}, 1: {0: 1}}, k=10)
    ndcg_a = (2 / math.log2(3) + 1 / math.log2(4)) / (2 + 1 / math.log2(3))
    assert oracle["ndcg_at_10"] == pytest.approx((ndcg_a + 1 / math.log2(5)) / 2, abs=1e-12)
    # AP@10: "a" finds its two relevant documents at ranks 2 and 3, "b" its one at rank 4
    assert oracle["map_at_10"] == pytest.approx(((1 / 2 + 2 / 3) / 2 + 1 / 4) / 2, abs=1e-12)
    assert oracle["recall_at_10"] == 1.0 and oracle["n_queries"] == 2
    # k = 2: "a" finds document 1 (grade 2) at rank 2 only, "b" nothing
    two = retrieval(queries, docs, {0: {1: 2, 2: 1}, 1: {0: 1}}, k=2)
    assert two["ndcg_at_2"] == pytest.approx(((2 / math.log2(3)) / (2 + 1 / math.log2(3))) / 2, abs=1e-12)
    # recall: "a" 1 of 2, "b" 0 of 1; AP@2: "a" precision 1/2 at rank 2 over its 2 relevant, "b" 0
    assert two["recall_at_2"] == pytest.approx(1 / 4) and two["map_at_2"] == pytest.approx(1 / 8)


def test_tied_documents_rank_by_row_as_the_cosine_ranking_says():
    # documents 0 and 1 are the same vector: the lower row ranks first (trec_eval alone would order a tie
    # by document name), so the relevant document 1 is second
    docs = np.array([_at(10), _at(10), _at(80)])
    oracle = retrieval(np.array([_at(0)]), docs, {0: {1: 1}}, k=10)
    assert oracle["ndcg_at_10"] == pytest.approx(1 / math.log2(3), abs=1e-12)
    assert retrieval(np.array([_at(0)]), docs, {0: {1: 1}}, k=1)["ndcg_at_1"] == 0.0
    table = per_query_scores(np.array([_at(0)]), docs, {"q": {1: 1}}, {"q": 0})
    assert table["mrr_at_10"].iloc[0] == pytest.approx(1 / 2)


def test_the_oracle_refuses_fractional_grades():
    with pytest.raises(ValueError, match="whole number"):
        retrieval(np.array([_at(0)]), np.array([_at(10)]), {0: {0: 0.5}})


@pytest.mark.parametrize(
    ("judgements", "words"),
    [
        ({"q": {7: 1}}, "not one of the 4 documents"),
        ({"q": {0: 0, 1: 0}}, "no relevant document"),
        ({"q": {0: 1.5}}, "whole numbers"),
        ({"q": {0: -1}}, "whole numbers"),
        ({}, "no judgements"),
    ],
)
def test_bad_judgements_are_named(judgements, words):
    with pytest.raises(ValueError, match=words):
        check_judgements(judgements, 4)


def _scores(values: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"query": [f"q{i}" for i in range(len(values))], "ndcg_at_10": values,
                         "recall_at_10": values, "mrr_at_10": values})  # fmt: skip


def test_comparison_over_queries():
    rng = np.random.default_rng(0)
    good = rng.uniform(0.5, 1.0, 40)
    frame = compare_on_queries(
        {"worse": _scores(list(good - 0.3)), "good": _scores(list(good)), "same": _scores(list(good))}
    )
    assert frame["model"].tolist() == ["good", "same", "worse"]  # equal means: by name
    assert frame.attrs["best"] == "good"
    rows = frame.set_index("model")
    # a model 0.3 below on every query is 30 points behind, with no resampling to hide it
    assert rows.loc["worse", "gap"] == pytest.approx(30.0)
    assert rows.loc["worse", "gap_low"] == pytest.approx(30.0) and not rows.loc["worse", "tied"]
    # the same scores on every query cannot be told apart
    assert rows.loc["same", "gap"] == 0 and rows.loc["same", "tied"]
    assert (frame["n_queries"] == 40).all()


def test_comparison_interval_covers_noise():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, 30)
    b = np.clip(a + rng.normal(0, 0.2, 30), 0, 1)
    rows = compare_on_queries({"a": _scores(list(a)), "b": _scores(list(b))}).set_index("model")
    loser = rows.index[rows["gap"] > 0][0]
    assert rows.loc[loser, "gap_low"] <= rows.loc[loser, "gap"] <= rows.loc[loser, "gap_high"]
    with pytest.raises(ValueError, match="other queries"):
        compare_on_queries({"a": _scores([0.1, 0.2]), "b": _scores([0.1, 0.2, 0.3])})
