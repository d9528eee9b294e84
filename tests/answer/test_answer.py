"""The answer of a run, end to end on planted embeddings whose best model is known (``clear`` separates the
3 classes, ``blurred`` half does, ``noise`` does not, and ``noise`` is the widest): the run's own labels
decide; without labels the answer is provisional and a simulated person's few labels settle it."""

from __future__ import annotations

import pandas as pd
import pytest

from flare_core.answer import labels as store
from flare_core.answer.decide import compose
from flare_core.answer.from_labels import few_label_history, next_texts
from flare_core.answer.stored import VERDICT_FILE, load_verdict
from flare_core.answer.write import build_verdict, label_free_scores, write_verdict
from tests.data.language_texts import SHORT_ENGLISH, WRITTEN


def test_the_runs_own_labels_decide_with_intervals_and_ties(labelled):
    run, _ = labelled
    verdict = load_verdict(run)
    assert verdict["version"] == 3 and verdict["basis"] == "labels" and verdict["settled"] is True
    assert verdict["recommended"] == "clear" and verdict["labels"]["best"] == "clear"
    rows = {r["model"]: r for r in verdict["labels"]["rows"]}
    assert rows["clear"]["accuracy"] > 0.9 and rows["noise"]["accuracy"] < 0.6
    assert rows["noise"]["gap_low"] > 0 and not rows["noise"]["tied"]  # clearly behind, not tied
    assert verdict["headline"].startswith("Use clear: ") and "accuracy on your labels" in verdict["headline"]
    assert verdict["label_free"]["choice"] == "noise"  # the widest: the label-free rule alone would miss
    assert "Nothing more is needed" in verdict["next_step"]


def test_without_labels_the_answer_is_provisional_and_offers_labels(unlabelled):
    run, _ = unlabelled
    verdict = load_verdict(run)
    assert verdict["basis"] == "label-free" and verdict["settled"] is False
    assert verdict["recommended"] == "noise" and verdict["short_list"][0] == "noise"
    assert verdict["headline"].startswith("Provisionally noise, without labels")
    assert "public corpora" in verdict["summary"] and "Check with a few labels" in verdict["next_step"]
    table = label_free_scores(run)
    assert table.loc["noise", "dim"] == 24 and table.loc["clear", "dim"] == 16


def test_a_simulated_person_settles_it_with_a_few_labels(unlabelled):
    run, truth = unlabelled
    store.set_categories(run, ["sport", "politics", "tech"])
    seen: set[int] = set()
    for _ in range(3):
        batch = next_texts(run, store.load_labels(run), 16)
        rows = batch["row"].tolist()
        assert len(rows) == 16 and not seen & set(rows)  # never a text asked before
        seen |= set(rows)
        store.add_labels(run, {r: truth[r] for r in rows})
        verdict = write_verdict(run)
        if verdict["settled"]:
            break
    assert verdict["basis"] == "few labels" and verdict["recommended"] == "clear" and verdict["settled"]
    rows = {r["model"]: r for r in verdict["few_labels"]["estimates"]}
    chances = {model: row["p_best"] for model, row in rows.items()}
    # settled: within the run's tolerance of the best with at least 90% chance, and the most likely best
    assert rows["clear"]["p_within"] >= 0.9 and chances["clear"] == max(chances.values())
    assert abs(sum(chances.values()) - 1) < 1e-9 and verdict["few_labels"]["tolerance_points"] == 2.0
    assert verdict["label_free"]["choice"] == "noise"  # still shown, beside the answer
    # the headline is one sentence; how the answer was reached is under its details
    few = verdict["few_labels"]
    assert few["prior"] and "updating" in few["method"]
    assert verdict["headline"].count(". ") == 0 and "probe trained on your other labels" in verdict["details"]
    history = few_label_history(run, store.load_labels(run))
    assert sorted(history["n_labels"].unique()) == [16 * b for b in range(1, history["batch"].max() + 1)]
    assert run.load_json(VERDICT_FILE) == verdict  # stored as returned


def test_the_next_texts_skip_what_was_labelled_or_skipped_and_repeat_for_the_same_labels(unlabelled):
    run, truth = unlabelled
    first = next_texts(run, store.load_labels(run), 8)
    assert first.equals(next_texts(run, store.load_labels(run), 8))  # the same rows for the same labels
    store.add_labels(run, {int(first["row"][0]): truth[int(first["row"][0])]}, skipped=[int(first["row"][1])])
    after = next_texts(run, store.load_labels(run), 58)  # the rest, less its near-duplicates (in "clear")
    assert (
        40 <= len(after) <= 58
        and after["row"].is_unique
        and not {int(first["row"][0]), int(first["row"][1])} & set(after["row"])
    )
    texts = run.corpus_frame()["text"]
    assert all(texts[r] == t for r, t in zip(after["row"], after["text"], strict=True))


def test_labels_of_one_category_only_ask_for_another_and_keep_the_provisional_answer(unlabelled):
    run, _ = unlabelled
    store.add_labels(run, {0: "sport", 3: "sport"})
    verdict = build_verdict(run, provisional=False)
    assert verdict["basis"] == "label-free" and verdict["recommended"] == "noise"
    assert "label texts of another category too" in verdict["next_step"]


def test_one_label_per_category_gives_estimates_not_an_error(unlabelled):
    run, truth = unlabelled
    store.add_labels(run, {0: truth[0], 1: truth[1], 2: truth[2]})
    verdict = build_verdict(run, provisional=False)
    assert verdict["basis"] == "few labels" and not verdict["settled"]  # three labels never settle it
    assert {r["model"] for r in verdict["few_labels"]["estimates"]} == {"clear", "blurred", "noise"}


@pytest.mark.parametrize(
    ("full", "few", "choice", "basis"),
    [
        (True, True, True, "labels"),
        (False, True, True, "few labels"),
        (False, False, True, "label-free"),
        (False, False, False, "unranked"),
    ],
)
def test_the_strongest_ground_decides(full, few, choice, basis):
    ranking = {"headline": "map", "summary": "m", "leading": "b", "ranking": [], "failed": []}
    full_block = {
        "best": "a", "tied": [], "runner_up": "b", "n_labels": 100, "n_classes": 2, "balanced": True, "method": "lr",
        "rows": [{"model": "a", "accuracy": 0.9, "f1_macro": 0.9, "gap": 0.0, "gap_low": 0.0, "gap_high": 0.0, "tied": False},
                 {"model": "b", "accuracy": 0.8, "f1_macro": 0.8, "gap": 10.0, "gap_low": 6.0, "gap_high": 14.0, "tied": False}],
    }  # fmt: skip
    few_block = {
        "n_labels": 16,
        "estimates": [{"model": "a", "estimate": 0.8, "ci_low": 0.6, "ci_high": 0.9, "p_best": 0.95, "p_within": 0.97},
                      {"model": "b", "estimate": 0.6, "ci_low": 0.4, "ci_high": 0.8, "p_best": 0.05, "p_within": 0.05}],
        "advice": {"settled": True, "best": "a", "either": ["a"], "more_labels": None, "reason": "sure",
                   "text": "a is within 1 point of the best with 97% probability (best with 95%)."},
    }  # fmt: skip
    choice_block = {"choice": "b", "short_list": ["b", "a"], "rule": "dim", "rule_words": "the width",
                    "use_words": "search", "odds": {}}  # fmt: skip
    out = compose(
        ranking, full=full_block if full else None, few=few_block if few else None,
        choice=choice_block if choice else None, agreement=-0.5 if full else None,
    )  # fmt: skip
    assert out["basis"] == basis and out["version"] == 3
    expected = {"labels": "a", "few labels": "a", "label-free": "b", "unranked": None}[basis]
    assert out["recommended"] == expected
    if basis == "labels":
        assert out["headline"] == "Use a: 90.0% accuracy on your labels, 10.0 points (± 4.0) ahead of b."
        assert "agreed with your labels at ρ = -0.50; its leader, b, is 10.0 points behind" in out["summary"]
    if basis == "few labels":
        assert (
            out["headline"]
            == "Use a: after 16 labels it has a chance of 97% of being within 2 points of the best."
        )
        assert out["details"].startswith(few_block["advice"]["text"])  # the advice's reason, under details
        assert out["summary"].count(". ") <= 2  # why, in at most three short sentences
    # the text says, in this order, the headline, the summary and the next step of the same ground
    assert out["text"] == " ".join([out["headline"], out["summary"], out["next_step"]])
    assert out["next_step"] and out["headline"] != out["summary"]


@pytest.mark.parametrize("running", [True, False])
def test_an_answer_with_candidates_not_embedded_yet_names_them_and_is_not_settled(running):
    ranking = {"headline": "map", "summary": "m", "leading": "a", "ranking": [], "failed": []}
    few_block = {
        "n_labels": 64,
        "estimates": [{"model": "a", "estimate": 0.9, "ci_low": 0.85, "ci_high": 0.95, "p_best": 0.99, "p_within": 0.99},
                      {"model": "b", "estimate": 0.5, "ci_low": 0.4, "ci_high": 0.6, "p_best": 0.01, "p_within": 0.01}],
        "advice": {"settled": True, "best": "a", "either": ["a"], "more_labels": None, "reason": "sure",
                   "text": "a is within 1 point of the best with 99% probability."},
    }  # fmt: skip
    out = compose(ranking, few=few_block, provisional=running, pending=["c", "d"])
    assert out["recommended"] == "a" and out["pending"] == ["c", "d"]
    assert out["provisional"] and not out["settled"], "never final while candidates are pending"
    if running:
        assert (
            "2 models are still being embedded: c and d; the answer will be checked again" in out["summary"]
        )
        assert out["headline"].startswith("While the run finishes")
    else:
        assert "2 candidates were not embedded: c and d" in out["summary"]
    assert "Nothing more is needed:" not in out["text"]
    assert compose(ranking, few=few_block)["settled"], "with every candidate in, the same labels settle it"


def test_the_cheapest_model_good_enough_by_the_answer_by_hand():
    from flare_core.answer.costs import answer_quality
    from flare_core.choosing.tradeoff import cheapest_within

    rows = [
        {"model": "a", "accuracy": 0.900, "f1_macro": 0.9, "gap": 0.0, "gap_low": 0.0, "gap_high": 0.0, "tied": False},
        {"model": "b", "accuracy": 0.895, "f1_macro": 0.9, "gap": 0.5, "gap_low": -1.0, "gap_high": 2.0, "tied": True},
        {"model": "c", "accuracy": 0.800, "f1_macro": 0.8, "gap": 10.0, "gap_low": 8.0, "gap_high": 12.0, "tied": False},
    ]  # fmt: skip
    quality = answer_quality({"labels": {"rows": rows, "metric": "accuracy"}}, tolerance_points=1.0)
    assert quality["quality"].tolist() == pytest.approx([90.0, 89.5, 80.0])
    # each gap's half-width is the uncertainty of its model; the best takes the widest of them (2.0)
    assert quality["ci_low"].tolist() == pytest.approx([88.0, 88.0, 78.0])
    costs = pd.DataFrame(
        {
            "model": ["a", "b", "c"],
            "texts_per_s": [10.0, 60.0, 100.0],
            "bytes_per_vector_float32": [3072, 1536, 256],
        }
    )
    pick = cheapest_within(quality, costs, points=1.0)
    # good enough: a paired gap interval within 1 point. b's reaches 2.0: the labels cannot tell whether b
    # is within 1 point, and the sentence says so instead of calling it good enough; c is 8 to 12 behind
    assert quality["good_enough"].tolist() == [True, False, False]
    assert quality["undecided"].tolist() == [False, True, False]
    assert pick["model"] == "a" and pick["candidates"] == ["a"]
    assert pick["sentence"] == (
        "Cheapest within 1 point of the best (a): a itself. The labels cannot tell yet whether b (6× faster) "
        "is within 1 point of a: its estimate is 0.5 points behind, and may be up to 2.0 behind; more labels "
        "would tell."
    )
    narrow = [dict(rows[1], gap_low=0.1, gap_high=0.9)]
    quality = answer_quality({"labels": {"rows": [rows[0], *narrow, rows[2]], "metric": "accuracy"}}, 1.0)
    assert cheapest_within(quality, costs, points=1.0)["sentence"] == (
        "Cheapest within 1 point of the best (a): b, 6× faster, half the storage."
    )
    # at a run's tolerance of 2 points b's interval (up to 2.0 behind) is good enough; c's 12 is not
    quality = answer_quality({"labels": {"rows": rows, "metric": "accuracy"}}, 2.0)
    assert quality["good_enough"].tolist() == [True, True, False]
    assert quality["undecided"].tolist() == [False, False, False]
    assert cheapest_within(quality, costs, points=2.0)["sentence"] == (
        "Cheapest within 2 points of the best (a): b, 6× faster, half the storage."
    )


def _write_texts(run, texts: list[str]) -> None:
    """The run's corpus with ``texts`` (cycled) in place of its texts."""
    path = run.artefact("corpus.parquet")
    frame = pd.read_parquet(path)
    frame["text"] = [f"{texts[i % len(texts)]} ({i})" for i in range(len(frame))]
    frame.to_parquet(path)


def test_a_model_that_cannot_read_the_texts_is_not_the_provisional_choice(unlabelled):
    from flare_core.store.manifest import set_model

    run, _ = unlabelled
    assert label_free_scores(run).columns.tolist().count("reads_corpus") == 0  # the models do not say
    set_model(run, "noise", reads="english")
    set_model(run, "clear", reads="many")
    # the planted texts ("text number 3 about sport") read as English: every model reads them
    table = label_free_scores(run)
    assert table.attrs["writing"].kind == "english"
    assert table.loc[["noise", "clear"], "reads_corpus"].tolist() == [1.0, 1.0]
    _write_texts(run, list(WRITTEN["de"]))
    table = label_free_scores(run)
    assert table.attrs["writing"].languages == {"de": 1.0}
    assert table.loc["noise", "reads_corpus"] == 0.0 and table.loc["clear", "reads_corpus"] == 1.0
    verdict = write_verdict(run)
    # the widest model reads English only, so the narrower one that reads the texts is the choice
    assert verdict["basis"] == "label-free" and verdict["recommended"] == "clear"
    assert verdict["label_free"]["cannot_read"] == ["noise"]
    assert "among the models that can read your texts" in verdict["label_free"]["rule_words"]
    assert verdict["label_free"]["languages"] == "German 100%"
    assert verdict["summary"].startswith("Your texts read as German 100%. ")
    # the planted run has no effective rank: the width ranks in place of the rule chosen for the use
    assert "the embedding's width, among the models that can read your texts" in verdict["summary"]


def test_a_half_english_corpus_is_not_read_by_an_english_only_model(unlabelled):
    from flare_core.store.manifest import set_model

    run, _ = unlabelled
    set_model(run, "noise", reads="english")
    set_model(run, "clear", reads="many")
    _write_texts(run, [t for pair in zip(SHORT_ENGLISH, WRITTEN["de"] * 9, strict=False) for t in pair])
    table = label_free_scores(run)
    assert 0.4 <= table.loc["noise", "reads_corpus"] <= 0.6 and table.loc["clear", "reads_corpus"] == 1.0
    verdict = write_verdict(run)
    assert verdict["label_free"]["cannot_read"] == ["noise"] and verdict["recommended"] == "clear"
    assert "English" in verdict["label_free"]["languages"] and "German" in verdict["label_free"]["languages"]
