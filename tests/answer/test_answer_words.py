"""The answer's words for a person: a search run speaks of queries and judgements, counts are said in the
singular where they are one, a provisional answer says how many of the chosen models it compares, and
the label-free rule is named the one way the benchmark chose it."""

from __future__ import annotations

import pandas as pd
import pytest

from flare_core.answer.decide import chosen_candidates, compose, from_label_free
from flare_core.answer.few_words import from_few_labels
from flare_core.answer.label_free import check_sentence, provisional_choice
from flare_core.choosing.tradeoff import cheapest_within


def _few_judgements(n: int, more: int | None, text: str, reason: str = "few queries") -> dict:
    return {
        "metric": "ndcg@10",
        "n_labels": n,
        "tolerance_points": 2.0,
        "estimates": [
            {
                "model": "a",
                "estimate": 0.6,
                "ci_low": 0.5,
                "ci_high": 0.7,
                "p_best": 0.7,
                "p_within": 0.8,
                "recall_at_10": 0.5,
            },
            {
                "model": "b",
                "estimate": 0.5,
                "ci_low": 0.4,
                "ci_high": 0.6,
                "p_best": 0.3,
                "p_within": 0.4,
                "recall_at_10": 0.4,
            },
        ],  # fmt: skip
        "advice": {
            "settled": False,
            "best": "a",
            "either": ["a"],
            "more_labels": more,
            "reason": reason,
            "text": text,
        },  # fmt: skip
    }


def test_one_judged_query_is_said_in_the_singular_and_without_jargon_first():
    text = "a leads (70% chance of being best), but 1 judged queries are too few to judge by; judge at least 19 more queries."
    out = from_few_labels(_few_judgements(1, 19, text), None)
    words = " ".join([out["headline"], out["summary"], out["next_step"], out["details"]])
    assert out["headline"] == "Provisionally a: 1 judged query is too few to judge by yet."
    assert out["next_step"] == "Judge at least 19 more queries (Check with a few labels) to judge by."
    assert (
        "1 judged query is too few" in out["details"] and "judge at least 19 more queries." in out["details"]
    )
    assert "1 judged queries" not in words and "1 more queries" not in words
    assert "TREC" not in words and "search quality (nDCG@10)" in out["summary"]
    one = from_few_labels(_few_judgements(1, 1, "a leads.", reason="not sure yet"), None)
    assert "about 1 more judged query would settle it" in one["headline"]
    assert one["next_step"] == "Judge about 1 more query (Check with a few labels) to settle it."
    many = from_few_labels(_few_judgements(24, 10, "a leads.", reason="not sure yet"), None)
    assert many["headline"] == (
        "Provisionally a: after 24 judged queries it has a chance of 80% of being within 2 points of search "
        "quality (nDCG@10) of the best; about 10 more judged queries would settle it."
    )
    close = from_few_labels(_few_judgements(24, None, "a leads.", reason="too close"), None)
    assert close["headline"].startswith(
        "Use a: after 24 judged queries the models near the top are too close"
    )
    assert "more" not in close["headline"].split("too close")[1].split(",")[0]


def _choice(use: str) -> dict:
    return {"use": use, "use_words": "search (finding similar texts)", "rule": "dim",
            "rule_words": "the embedding's width", "choice": "a", "short_list": ["a", "b"], "odds": {},
            "cannot_read": []}  # fmt: skip


def test_a_search_run_is_invited_to_judge_queries_not_to_label_texts():
    words = check_sentence(search=True)
    assert "judged queries" in words and "search queries" in words
    assert "label" not in words.replace("Check with a few labels", "")
    assert "labelled texts" not in from_label_free(_choice("search"))["next_step"]
    assert "judged queries" in from_label_free(_choice("search"))["next_step"]
    assert from_label_free(_choice("classifier"))["next_step"].startswith("Check with a few labels")


def test_the_cheapest_model_sentence_of_a_search_run_asks_for_judged_queries():
    label = "nDCG@10 on your 5 judged queries (points)"
    quality = pd.DataFrame(
        {"model": ["a", "b"], "quality": [60.0, 59.0], "ci_low": [50.0, 49.0], "ci_high": [70.0, 69.0],
         "label": label, "good_enough": [True, False], "undecided": [False, True], "gap_high": [0.0, 4.0],
         "more_labels": [float("nan"), 18.0]}
    )  # fmt: skip
    costs = pd.DataFrame({"model": ["a", "b"], "texts_per_s": [10.0, 50.0]})
    sentence = cheapest_within(quality, costs, points=2.0, best="a")["sentence"]
    assert "The judgements cannot tell yet whether b" in sentence
    assert sentence.endswith("about 18 more judged queries would tell.") and "labels" not in sentence
    one = cheapest_within(quality.assign(more_labels=[float("nan"), 1.0]), costs, points=2.0, best="a")
    assert one["sentence"].endswith("about 1 more judged query would tell.")
    labels = cheapest_within(quality.assign(label="estimated accuracy from your 9 labels (points)"), costs,
                             points=2.0, best="a")  # fmt: skip
    assert labels["sentence"].endswith("about 18 more labels would tell.")


def test_a_provisional_answer_says_how_many_of_the_chosen_models_it_compares():
    manifest = {"models": [{"id": m, "role": "candidate", "status": s} for m, s in
                           [("a", "done"), ("b", "done"), ("c", "running"), ("d", "queued")]]
                + [{"id": "random", "role": "control", "status": "done"}]}  # fmt: skip
    assert chosen_candidates(manifest) == ["a", "b", "c", "d"]  # the control is not a chosen model
    ranking = {"headline": "map", "summary": "m", "leading": "a", "ranking": [{"model": "a"}], "failed": []}
    out = compose(ranking, choice=_choice("search"), provisional=True, pending=["c", "d"], n_candidates=4)
    assert out["headline"].startswith("So far, from 2 of 4 models: provisionally a, without labels")
    done = compose(ranking, choice=_choice("search"), provisional=True, pending=[], n_candidates=4)
    assert done["headline"].startswith("While the run finishes: provisionally a")


def test_the_label_free_rule_is_named_one_way_while_its_scores_come_in():
    scores = pd.DataFrame({"dim": [384.0, 50.0, 768.0]}, index=["mini", "glove", "wide"])
    early = provisional_choice(scores, "search")
    assert (
        early["rule"] == "dim" and early["choice"] == "wide"
    )  # the width ranks until the rule's scores are in
    later = provisional_choice(scores.assign(effective_rank=[300.0, 40.0, 100.0]), "search")
    assert later["rule"] == "effective_rank" and later["choice"] == "mini"
    chosen = "how many dimensions the texts spread over"
    assert early["chosen_words"] == later["chosen_words"] == chosen
    first, then = from_label_free(early)["summary"], from_label_free(later)["summary"]
    assert f"The label-free rule measured best for search (finding similar texts) is {chosen}" in first
    assert "until it is measured on your texts, the embedding's width chooses in its place" in first
    assert then.startswith(f"Chosen by {chosen}, the label-free rule measured best for search")
    assert "the embedding's width" not in then
    # "measured best" names the one rule the benchmark chose, never the one standing in for it
    for summary in (first, then):
        assert summary.count("measured best") == 1
        assert "measured best for search (finding similar texts) is the embedding's width" not in summary


@pytest.mark.parametrize("pending", [["c"], []])
def test_a_finished_answer_never_says_so_far(pending):
    ranking = {"headline": "map", "summary": "m", "leading": "a", "ranking": [{"model": "a"}], "failed": []}
    out = compose(ranking, choice=_choice("search"), provisional=False, pending=pending, n_candidates=3)
    assert not out["headline"].startswith(("So far", "While the run"))
