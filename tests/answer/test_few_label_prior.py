"""What the product knows before the first label: the prior names the provisional choice, learns from the
shipped benchmark's record, and the sentences that promise an outcome quote what that benchmark measured."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from flare_core.answer import label_free, shipped
from flare_core.answer.decide import from_label_free
from flare_core.choosing.accuracy_posterior import estimate_frame
from flare_core.choosing.stopping import chance_words

USES = ("classifier", "grouping", "search", "unsure")


def _scores(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    models = [f"model-{i}" for i in range(6)]
    return pd.DataFrame(
        {
            "dim": rng.choice([64.0, 256.0, 384.0, 768.0], size=6),
            "effective_rank": rng.uniform(10, 500, size=6),
            "uniformity": rng.uniform(-4, -1, size=6),
            "isoscore": rng.uniform(0, 1, size=6),
            "flow": rng.normal(0, 1, size=6),
            "gmm": rng.normal(0, 1, size=6),
        },
        index=models,
    )


@pytest.mark.parametrize("use", USES)
@pytest.mark.parametrize("seed", range(4))
def test_with_no_label_the_posterior_names_the_provisional_choice(use, seed):
    scores = _scores(seed)
    prior = label_free.few_label_prior(scores, use)
    frame = estimate_frame(prior, None, tolerance_points=2.0, chance_level=0.0, seed=seed)
    assert frame["model"].iloc[0] == label_free.provisional_choice(scores, use)["choice"]
    assert sorted(prior.models) == sorted(scores.index) and prior.source.startswith("the record of")


def test_the_prior_learns_from_the_shipped_answer_benchmark_first(tmp_path, monkeypatch):
    models = ["wide", "mid", "narrow"]
    corpora = []
    for name, accuracy in (("a", [0.9, 0.8, 0.7]), ("b", [0.8, 0.75, 0.7]), ("c", [0.85, 0.8, 0.6])):
        rows = [{"model": m, "dim": d, "effective_rank": d, "oracle": acc, "role": "candidate"}
                for m, d, acc in zip(models, (768.0, 384.0, 64.0), accuracy, strict=True)]  # fmt: skip
        corpora.append({"corpus": name, "oracle": "accuracy", "candidates": models, "table": rows})
    path = tmp_path / "answer_benchmark.json"
    path.write_text(json.dumps({"corpora": corpora}))
    monkeypatch.setattr(shipped, "SHIPPED_ANSWER_RESULTS", path)
    assert [c["case"] for c in label_free.prior_cases()[0]] == [
        "a (classifier)",
        "b (classifier)",
        "c (classifier)",
    ]
    scores = pd.DataFrame({"dim": [768.0, 384.0, 64.0], "effective_rank": [700.0, 300.0, 50.0]}, index=models)
    prior = label_free.few_label_prior(scores, "classifier")
    # the top place stood 0.1, 0.05 and 0.1 above the mean of its corpus (the places' means sum to 0)
    assert prior.models[0] == "wide" and prior.mean[0] == pytest.approx(np.mean([0.1, 0.05, 0.1]))
    assert prior.level_mean == pytest.approx(np.mean([0.8, 0.75, 0.75]))


def test_the_invitation_to_label_quotes_the_benchmark_or_promises_nothing(tmp_path, monkeypatch):
    path = tmp_path / "answer_benchmark.json"
    monkeypatch.setattr(shipped, "SHIPPED_ANSWER_RESULTS", path)
    choice = {"choice": "m", "short_list": ["m"], "rule_words": "the width", "use_words": "a classifier"}
    assert "usually" not in from_label_free(choice)["next_step"]
    assert from_label_free(choice)["next_step"].endswith("say how far to trust it.")
    record = {
        "corpora": [],
        "few_labels": {
            "tolerance": 2.0,
            "label_free": {"mean_lost": 3.0, "within": 0.61},
            "by_k": [{"method": "posterior", "k": 32, "mean_lost": 2.5, "within": 0.72, "draws": 90}],
            "per_corpus": [{"corpus": f"c{i}"} for i in range(9)],
            "forecast": {"told": 40, "came_true": 0.65},
        },
    }
    path.write_text(json.dumps(record))
    words = from_label_free(choice)["next_step"]
    assert words == (
        "Check with a few labels: on 9 public corpora, 32 labelled texts put the answer within 2 points of "
        "the best model in 72% of trials (61% without labels)."
    )
    assert label_free.forecast_sentence(2.0) == (
        "On public corpora, that many more labels settled it in 65% of the 40 trials told so."
    )
    # checked at 2 points, it says nothing of a forecast at another tolerance
    assert label_free.forecast_sentence(1.0) == ""


def _estimates(leader: str, p_within: float, tolerance: float = 2.0) -> pd.DataFrame:
    frame = pd.DataFrame({"model": [leader, "other"], "p_within": [p_within, 0.1]})
    frame.attrs["tolerance_points"] = tolerance
    return frame


def test_a_batch_that_moves_the_answer_says_so_and_one_that_keeps_it_says_that():
    from flare_core.answer.from_labels import movement_sentence

    assert movement_sentence(("mpnet", "batch"), _estimates("mpnet", 0.71), 32) == (
        "mpnet still leads, as before your last batch: 71% chance of being within 2 points of the best."
    )
    assert movement_sentence(("mpnet", "provisional"), _estimates("tfidf", 0.4, 1.0), 16) == (
        "tfidf now leads instead of mpnet, which led before your labels: your 16 labels favour it (40% chance "
        "of being within 1 point of the best)."
    )
    assert movement_sentence(None, _estimates("mpnet", 0.71), 16) == ""


def test_a_model_kept_against_a_close_leader_says_why_with_the_estimates_own_figures():
    from flare_core.answer.from_labels import movement_sentence
    from flare_core.choosing import accuracy_posterior as ap

    prior = ap.AccuracyPrior(
        ("a", "b", "c"), np.array([0.01, 0.005, -0.015]), np.full(3, 0.03), 0.7, 0.2, "t"
    )
    correct = (np.random.default_rng(4).random((24, 3)) < [0.70, 0.72, 0.60]).astype(float)
    plain = ap.estimate_frame(prior, correct, tolerance_points=2.0, chance_level=0.5, seed=1)
    runner, leader = str(plain["model"].iloc[1]), str(plain["model"].iloc[0])
    frame = ap.estimate_frame(
        prior, correct, tolerance_points=2.0, chance_level=0.5, seed=1, named_before=runner
    )
    frame.attrs["tolerance_points"] = 2.0
    kept, rows = frame.attrs["kept"], frame.set_index("model")
    higher = 100 * (rows.loc[leader, "estimate"] - rows.loc[runner, "estimate"])
    assert kept["model"] == runner and kept["leader"] == leader and higher > 0
    assert movement_sentence((runner, "batch"), frame, 24) == (
        f"{runner} stays the answer, as before your last batch: {leader}'s estimate is {higher:.1f} points "
        f"higher, but your labels favour it over {runner} with only {chance_words(kept['chance'])} chance (the answer "
        f"changes at 60%); {runner} has a {chance_words(rows.loc[runner, 'p_within'])} chance of being within 2 points "
        "of the best."
    )


def test_a_dead_heat_the_forecast_cannot_settle_is_said_as_such():
    from flare_core.choosing.stopping import stopping_advice

    frame = pd.DataFrame(
        {"model": ["a", "b"], "estimate": [0.8, 0.8], "p_best": [0.5, 0.5], "p_within": [0.6, 0.6],
         "gap": [0.0, 0.0], "diff_sd": [0.1, 0.1], "ci_low": [0.75, 0.75]}
    )  # fmt: skip
    frame.attrs.update(
        n_classes=2, n_texts=2000, n_classes_repeated=2, tolerance_points=2.0, more_labels=None
    )
    advice = stopping_advice(frame, 64)
    assert advice["reason"] == "too close" and not advice["settled"]
    assert "too close for 256 more labels" in advice["text"] and "2 points" in advice["text"]
    assert advice["more_labels"] is None  # no cap shown as a count
    frame.attrs["more_labels"] = 32
    assert stopping_advice(frame, 64)["more_labels"] == 32
    # before the least evidence, it asks for what that needs, said as a minimum
    early = stopping_advice(frame, 8)
    assert early["reason"] == "few labels" and early["more_labels"] == 8
    assert "label at least 8 more texts" in early["text"]
