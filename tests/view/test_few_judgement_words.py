"""The few search judgements in words: the run line counts the judged queries, a viewer is told what more
judged queries would do (never asked), and Validation checks the map against the judgements, not "labels"."""

from __future__ import annotations

from flare_core.view.findings import few_labels_check
from flare_core.view.verdict import (
    grounds_heading,
    labels_given_words,
    labels_table,
    next_step_words,
    without_asking,
)


def _verdict(n: int = 12) -> dict:
    estimates = [
        {"model": m, "estimate": e, "ci_low": e - 0.1, "ci_high": e + 0.05, "p_best": p, "p_within": p,
         "recall_at_10": e, "mrr_at_10": e}
        for m, e, p in [("clear", 0.9, 0.8), ("blurred", 0.7, 0.2), ("noise", 0.1, 0.0)]
    ]  # fmt: skip
    return {
        "basis": "few labels",
        "settled": False,
        "next_step": "Judge 5 more queries (Check with a few labels) to settle it.",
        "ranking": [{"model": "noise", "score": 3.0}, {"model": "blurred", "score": 2.0}, {"model": "clear", "score": 1.0}],
        "leading": "noise",
        "few_labels": {"metric": "ndcg@10", "n_labels": n, "estimates": estimates, "advice": {"best": "clear", "more_labels": 5}},
    }  # fmt: skip


def test_judged_queries_in_the_run_line_the_table_and_a_viewers_words():
    counts = {"queries": 13, "judged": 12, "counted": 11, "judgements": 180, "relevant": 40, "batches": 12}
    assert labels_given_words({"n_texts": 60}, [], counts) == (
        "12 search queries judged (11 with a relevant document), 180 documents judged, 40 relevant"
    )
    assert labels_given_words({"n_texts": 60}, [], None) == "none"
    table = labels_table(_verdict())
    quality = "search quality (nDCG@10)"  # a plain phrase first, the measure's name after it
    assert list(table.columns)[:3] == ["model", quality, "likely between"] and table[quality][0] == "90.0"
    assert "relevant found in the top 10 (recall@10)" in table.columns
    assert next_step_words(_verdict(), can_label=False) == (
        "5 more judged queries would settle it; the run's owner can add them."
    )
    assert without_asking("clear leads; judge 5 more queries to settle it.") == (
        "clear leads; 5 more judged queries would settle it."
    )


def test_validation_checks_the_map_against_the_judged_queries():
    check = few_labels_check(_verdict())
    assert check.startswith(
        "Checked from your 12 judged queries: the label-free order disagrees with the nDCG@10"
    )
    assert "The map's leader, noise, is not the one your judgements favour: clear." in check
    assert few_labels_check(_verdict(4)).startswith("Your 4 judged queries are too few to check the order")


def test_an_answer_from_judged_searches_is_not_said_to_come_from_labels():
    from flare_core.view.verdict import verdict_view

    searched = {**_verdict(), "version": 3, "headline": "h", "trust": {"level": "low", "checks": []}}
    assert verdict_view(searched).basis_words == "From your judgements so far"
    labelled = {**searched, "few_labels": {**searched["few_labels"], "metric": "accuracy"}}
    assert verdict_view(labelled).basis_words == "From your labels so far"
    decided = {**searched, "basis": "labels", "labels": {"metric": "ndcg@10"}}
    assert verdict_view(decided).basis_words == "Decided by your search judgements"


def test_one_more_judged_query_and_a_search_run_without_judgements_speak_of_queries():
    one = {**_verdict(), "next_step": "Judge 1 more query (Check with a few labels) to settle it."}
    one["few_labels"] = {**one["few_labels"], "advice": {"best": "clear", "more_labels": 1}}
    assert (
        next_step_words(one, can_label=False)
        == "1 more judged query would settle it; the run's owner can add them."
    )
    assert without_asking("clear leads; judge 1 more query to settle it.") == (
        "clear leads; 1 more judged query would settle it."
    )
    label_free = {"basis": "label-free", "settled": False, "next_step": "x", "label_free": {"use": "search"}}
    assert next_step_words(label_free, can_label=False) == (
        "A few judged queries would settle it; the run's owner can add them."
    )
    assert grounds_heading(_verdict()) == grounds_heading(label_free) == "What your judgements say"
    classifier = {**label_free, "label_free": {"use": "classifier"}}
    assert next_step_words(classifier, can_label=False).startswith("A few labels would settle it")
    assert grounds_heading(classifier) == "What the labels say"
