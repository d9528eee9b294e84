"""Pseudo-queries cut from a corpus's own texts, and the scores that read them, on tiny hand-made corpora
with the nDCG@10 and MRR@10 worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.studies.draws.pseudo_scores import (
    fused_ndcg,
    halves,
    halves_score,
    ndcg_and_mrr,
    neighbour_agreement,
    pseudo_queries,
    query_similarities,
    rank_of_own,
    sentences,
    split_halves,
)
from flare_core.choosing.label_free_rules import rule_scores

TEXTS = [
    "The train was late. Passengers waited on the platform. Nobody knew why.",
    "Rain fell all night and the river rose over the old stone bridge near town",
    "Too short.",
    "今天天气很好。我们去公园散步。",
    "我喜欢在周末的早上去市场买新鲜的水果和蔬菜",
]


def test_sentences_split_after_stops_and_chinese_full_stops():
    assert sentences(TEXTS[0]) == [
        "The train was late.",
        "Passengers waited on the platform.",
        "Nobody knew why.",
    ]
    assert sentences(TEXTS[3]) == ["今天天气很好。", "我们去公园散步。"]
    assert sentences("3.5 kg of flour") == ["3.5 kg of flour"]  # no space after the point: one sentence


def test_halves_by_words_or_by_characters_and_none_when_too_short():
    assert split_halves(TEXTS[1]) == (
        "Rain fell all night and the river",
        "rose over the old stone bridge near town",
    )
    assert split_halves(TEXTS[4]) == (
        "我喜欢在周末的早上去",
        "市场买新鲜的水果和蔬菜",
    )  # 21 characters: 10 and 11
    assert split_halves(TEXTS[2]) is None and split_halves("今天天气很好") is None


def test_pseudo_queries_are_a_sentence_and_the_rest_or_two_halves_and_seeded():
    cut = pseudo_queries(TEXTS, seed=3)
    assert sorted(cut.rows) == [0, 1, 3, 4]  # the text too short for either is skipped
    for row, query, rest, kind in zip(cut.rows, cut.queries, cut.rests, cut.kinds, strict=True):
        if row in (0, 3):
            assert kind == "sentence" and query in sentences(TEXTS[row])
            assert sorted(sentences(rest) + [query]) == sorted(sentences(TEXTS[row]))
        else:
            assert kind == "half" and (query, rest) == split_halves(TEXTS[row])
    again = pseudo_queries(TEXTS, seed=3)
    assert again == cut and len(pseudo_queries(TEXTS, sample=2, seed=3).rows) == 2
    rows, firsts, seconds = halves(TEXTS, seed=0)
    assert sorted(rows) == [0, 1, 4] and [split_halves(TEXTS[r]) for r in rows] == list(
        zip(firsts, seconds, strict=True)
    )


def test_the_rest_is_ranked_among_every_other_text_and_never_the_query_s_own():
    # two queries, two rests, a corpus of four texts; query 0 comes from text 2, query 1 from text 0
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    rests = np.array([[0.6, 0.8], [0.0, 1.0]])  # cos 0.6 with query 0, cos 1 with query 1
    corpus = np.array([[1.0, 0.1], [0.8, 0.6], [1.0, 0.0], [-1.0, 0.0]])
    ranks = rank_of_own(queries, rests, corpus, rows=[2, 0])
    # query 0: texts 0 (0.995) and 1 (0.8) come before its rest (0.6); its own text 2 (1.0) is not counted
    # query 1: its rest (1.0) is first; its own text 0 is left out
    assert ranks.tolist() == [3, 1]
    ndcg, mrr = ndcg_and_mrr(ranks)
    assert ndcg == pytest.approx((1 / math.log2(4) + 1) / 2) and mrr == pytest.approx((1 / 3 + 1) / 2)
    # among the other rests only: query 0 meets rest 1 (0.0) below its own (0.6); query 1 meets rest 0 (0.8)
    assert rank_of_own(queries, rests).tolist() == [1, 1]


def test_beyond_ten_counts_nothing_and_a_tie_counts_against_the_rest():
    assert ndcg_and_mrr(np.array([11, 1])) == (pytest.approx(0.5), pytest.approx(0.5))
    same = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert rank_of_own(same, same).tolist() == [2, 2]
    assert math.isnan(ndcg_and_mrr(np.array([]))[0])


def test_halves_score_is_the_mean_mrr_of_both_directions():
    firsts = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    seconds = np.array([[1.0, 0.0], [0.6, 0.8], [0.8, -0.6]])
    # first 0 finds second 0 (1.0) first; first 1 its second (0.8) first; first 2 its second (-0.8) after
    # second 1 (-0.6): ranks 1, 1, 2. Back: second 2 finds first 0 (0.8) and first 1 (-0.6) before its own
    assert rank_of_own(firsts, seconds).tolist() == [1, 1, 2]
    assert rank_of_own(seconds, firsts).tolist() == [1, 1, 3]
    assert halves_score(firsts, seconds) == pytest.approx(((1 + 1 + 1 / 2) / 3 + (1 + 1 + 1 / 3) / 3) / 2)


def test_neighbour_agreement_is_the_shared_share_of_neighbours():
    line = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    swapped = line[[0, 2, 1, 3]]  # texts 1 and 2 trade places: half the neighbours change
    agree = neighbour_agreement({"a": line, "b": line, "c": swapped}, k=1)
    # a and b share every nearest neighbour; with c: text 0 (1 vs 2), 1 (0 vs 3), 2 (3 vs 0), 3 (2 vs 1): none
    assert agree == {"a": pytest.approx(0.5), "b": pytest.approx(0.5), "c": pytest.approx(0.0)}
    with pytest.raises(ValueError, match="at least two"):
        neighbour_agreement({"a": line})


def test_the_new_rules_read_their_columns_and_the_combined_rule_averages_ranks():
    table = pd.DataFrame(
        {"effective_rank": [10.0, 20.0, 30.0], "pseudo_ndcg": [0.9, 0.1, 0.5], "dim": [1.0, 2.0, 3.0]},
        index=["a", "b", "c"],
    )
    assert rule_scores(table, "pseudo_ndcg").idxmax() == "a"
    assert rule_scores(table, "rank_and_pseudo").tolist() == [2.0, 1.5, 2.5]
    assert rule_scores(table, "halves").isna().all()  # no column: the rule scores none


def test_fused_ndcg_scores_each_model_against_the_fused_ranking():
    # one query, four texts; a, b and d rank them 0, 1, 2, 3; c ranks them 3, 2, 1, 0
    a = np.array([[0.9, 0.8, 0.7, 0.6]])
    c = np.array([[0.1, 0.2, 0.3, 0.4]])
    models = {"a": a, "b": a, "d": a, "c": c}
    # fused (constant 0): text 0: 3 + 1/4, text 1: 3/2 + 1/3, text 2: 1 + 1/2, text 3: 3/4 + 1
    scores = fused_ndcg(models, k=2, constant=0.0)  # relevant: texts 0 and 1
    assert scores["a"] == pytest.approx(1.0) and scores["d"] == pytest.approx(1.0)
    assert scores["c"] == 0.0  # c's first two are texts 3 and 2, neither relevant
    # k = 3: relevant 0, 1, 3; a finds 0 and 1 first and second; c finds 3 first and 1 third
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    scores = fused_ndcg(models, k=3, constant=0.0)
    assert scores["a"] == pytest.approx((1 + 1 / math.log2(3)) / ideal)
    assert scores["c"] == pytest.approx((1 + 1 / math.log2(4)) / ideal)


def test_query_similarities_put_the_rest_in_place_of_the_query_s_own_text():
    queries, rests = np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])
    corpus = np.array([[1.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(query_similarities(queries, rests, corpus, [0]), [[0.0, 1 / math.sqrt(2)]])
