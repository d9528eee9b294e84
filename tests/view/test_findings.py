"""The two-line finding each analysis page opens with, from hand-made result tables whose right sentence
is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core.view import findings as fd


def _collapse(**values) -> pd.DataFrame:
    rows = {"model": ["a", "b"], "socm_mean": [0.35, 0.03], "n_pairs": [66, 66], "n_texts": [12, 12]}
    rows.update(values)
    return pd.DataFrame(rows)


def test_collapse_names_the_worst_model_and_reads_its_figure_against_the_paper():
    finding = fd.collapse_finding(_collapse())
    assert finding.headline == (
        "Mean pooling hides much of the difference between texts for a: its average collapse score is 0.35, "
        "between all-MiniLM-L12-v2 (0.31) and BERT-base (0.40) in the SOCM paper."
    )
    assert finding.detail.startswith(
        "Measured on all 66 pairs of 12 sampled texts; b collapses least (0.03, little)"
    )


@pytest.mark.parametrize(
    ("value", "level", "where"),
    [
        (0.01, "little", "below gte-base's 0.02"),
        (0.10, "some", "between all-mpnet-base-v2 (0.10) and all-MiniLM-L12-v2 (0.31)"),
        (0.94, "much", "above BERT-base's 0.40"),
    ],
)
def test_collapse_level_words(value, level, where):
    finding = fd.collapse_finding(_collapse(model=["m"], socm_mean=[value], n_pairs=[3], n_texts=[3]))
    assert f"hides {level} of the difference" in finding.headline and where in finding.headline


def test_collapse_compares_labels_when_the_run_has_them():
    frame = _collapse(socm_same_label_mean=[0.30, 0.02], socm_different_label_mean=[0.40, 0.03])
    assert "texts with different labels collapse more than texts with the same label (0.40 against 0.30)" in (
        fd.collapse_finding(frame).detail
    )
    frame = _collapse(socm_same_label_mean=[0.30, 0.02], socm_different_label_mean=[0.31, 0.03])
    assert "collapse about as much as" in fd.collapse_finding(frame).detail


def test_collapse_refuses_a_table_without_its_columns():
    with pytest.raises(ValueError, match="socm_mean"):
        fd.collapse_finding(pd.DataFrame({"model": ["a"]}))


def _layers(models: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        {"model": m, "layer": layer, "mean_cos": c}
        for m, values in models.items()
        for layer, c in enumerate(values, start=1)
    ]
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # the layer order is the function's job


def test_layers_trend_and_largest_step_of_one_model():
    finding = fd.layers_finding(_layers({"m": [0.10, 0.12, 0.40, 0.45]}))
    assert finding.headline == (
        "In m, the layers make the tokens of a text more alike: their average cosine goes from 0.10 after "
        "layer 1 to 0.45 after layer 4."
    )
    assert finding.detail.startswith("The largest step is at layer 3 (+0.28)")


def test_layers_flat_and_falling_curves_and_several_models():
    assert (
        "keep the tokens of a text about as alike" in fd.layers_finding(_layers({"m": [0.3, 0.32]})).headline
    )
    finding = fd.layers_finding(_layers({"down": [0.5, 0.2], "up": [0.1, 0.3]}))
    assert finding.headline.startswith("In up, the layers make the tokens of a text more alike")
    assert finding.detail.startswith(
        "Of the 2 models, tokens end up most alike in up (0.30) and least in down (0.20)"
    )


def test_corpus_counts_lengths_labels_and_what_was_dropped():
    texts = pd.Series(["a" * 10, "b" * 20, "c" * 300])
    labels = pd.Series(["x", "x", "y"])
    stats = {"n_duplicates": 2, "duplicates_dropped": True, "n_empty_dropped": 1}
    models = [{"id": "m1", "status": "done"}, {"id": "m2", "status": "failed"}]
    finding = fd.corpus_finding(texts, labels, stats, models)
    assert finding.headline == (
        "3 texts, typically 20 characters long (from 10 to 300), in 2 labels: from 1 text (y) to 2 (x)."
    )
    assert (
        finding.detail
        == "Found 2 duplicate texts (dropped), 1 empty row dropped; 1 of 2 models embedded them (m2 failed)."
    )
    balanced = fd.corpus_finding(texts, pd.Series(["x", "y", "z"]), {}, [])
    assert balanced.headline.endswith("in 3 labels of 1 text each.")
    assert balanced.detail == "No duplicate or empty texts."
    assert fd.corpus_finding(texts).headline.endswith("without labels.")


def test_corpus_says_what_the_person_gave_and_counts_the_models_they_chose():
    texts = pd.Series(["a" * 10, "b" * 20, "c" * 300])
    models = [{"id": "m1", "status": "done", "role": "candidate"}, {"id": "m2", "status": "done"},
              {"id": "random", "status": "done", "role": "control"}]  # fmt: skip
    finding = fd.corpus_finding(texts, None, {}, models, labelled=48)
    assert finding.headline.endswith(", without a label column; you labelled 48 of them.")
    assert "without labels" not in finding.headline
    assert finding.detail.endswith("; 2 of 2 models embedded them.")  # the control is not one they chose
    judged = fd.corpus_finding(texts, None, {}, [], judged=1).headline
    assert judged.endswith(", without a label column; you judged 1 search query on them.")
    both = fd.corpus_finding(texts, pd.Series([None, None, None]), {}, [], labelled=2, judged=5).headline
    assert both.endswith("you labelled 2 of them and you judged 5 search queries on them.")


def test_the_run_line_counts_the_models_the_person_chose():
    from flare_core.view.verdict import models_chosen_words

    manifest = {"models": [{"id": m, "role": "candidate"} for m in "abcd"]
                + [{"id": "random", "role": "control"}, {"id": "shuffled", "role": "control"}]}  # fmt: skip
    assert models_chosen_words(manifest) == "4 models"
    assert models_chosen_words({"models": [{"id": "a"}]}) == "1 model"


def _scores(second_high: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["b", "a", "c"],
            "score": [0.20, 0.30, 0.05],
            "ci_low": [0.15, 0.25, 0.01],
            "ci_high": [second_high, 0.35, 0.08],
        }
    )


def test_sufficiency_leader_tie_strongest_link_and_hardest_target():
    per_dim = pd.DataFrame(
        [[np.nan, 0.4, 0.2], [0.1, np.nan, 0.3], [0.04, 0.02, np.nan], [0.9, 0.9, 0.9]],
        index=["a", "b", "c", "control"],
        columns=["a", "b", "c"],
    )
    finding = fd.sufficiency_finding(_scores(0.26), per_dim)
    assert finding.headline == (
        "a tells the most about the other models' embeddings: a score of 0.30, likely between 0.25 "
        "and 0.35 (nats per dimension); b is too close to tell apart."
    )
    # the control row is not a candidate: the strongest link is a → b, and a is the hardest target
    assert finding.detail == (
        "Strongest link: a predicts b best (a score of 0.40); a is the hardest to predict from the "
        "others (typically 0.07)."
    )
    assert fd.sufficiency_finding(_scores(0.24)).headline.endswith(", clearly ahead of b (0.20).")
    near_zero = per_dim.replace(0.04, 0.001).replace(0.1, 0.002)
    assert fd.sufficiency_finding(_scores(0.26), near_zero).detail.endswith("(typically about 0).")


def test_generalisation_gap_in_words_against_the_information_measured():
    pairs = pd.DataFrame(
        {"delta_emp_marg": [1.0, 2.0, 3.0], "delta_emp_cond": [1.0, 1.0, 1.0], "is_nats": [10.0] * 3}
    )
    sentence = fd.generalisation_sentence(pairs)
    assert sentence.startswith(
        "Held-out check: the estimators fit texts they were not trained on worse by 3.00 nats"
    )
    assert "(at most 4.00)" in sentence and "small next to the information measured" in sentence
    overfitted = fd.generalisation_sentence(pairs.assign(is_nats=2.0))
    assert "not small next to the information measured" in overfitted
    assert fd.generalisation_sentence(pd.DataFrame({"is_nats": [1.0]})) == ""


def test_floor_sentence_names_the_pairs_held_at_zero_and_their_raw_figures():
    pairs = pd.DataFrame({"is_nats": [0.0, 0.0, 2.5, 0.0], "is_raw_nats": [-0.31, -0.02, 2.5, 0.0]})
    sentence = fd.floor_sentence(pairs)
    assert sentence.startswith("2 of 4 pairs are shown as 0")
    assert "from -0.31 to -0.02 nats" in sentence and "is_raw_nats" not in sentence  # no internal name
    assert 'in the column "information before the floor at 0 (nats)"' in sentence
    one = fd.floor_sentence(pairs.iloc[:1])
    assert "1 of 1 pairs" in one and "-0.31 nats" in one
    assert fd.floor_sentence(pairs.iloc[2:]) == ""  # nothing held at 0
    assert fd.floor_sentence(pd.DataFrame({"is_nats": [0.0]})) == ""  # results from before the raw figure
    old = pairs.assign(is_raw_nats=float("nan"))
    assert fd.floor_sentence(old) == ""


def _subsampling(agreement_at_fifth: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "alpha": [0.1, 0.1, 0.2, 0.2, 1.0],
            "rank_agreement": [0.1, 0.1, agreement_at_fifth - 0.02, agreement_at_fifth + 0.02, 1.0],
        }
    )


def _correlations(n: int, rho: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "label_free": ["flow_is_median_norm", "flow_is_median_norm", "uniformity"],
            "downstream": ["v_measure", "accuracy", "accuracy"],
            "n_models": [n, n, n],
            "spearman_rho": [-1.0, rho, 0.1],
        }
    )


@pytest.mark.parametrize(
    ("agreement", "word"), [(0.95, "stable: "), (0.8, "fairly stable: "), (0.4, "unstable: ")]
)
def test_validation_reads_stability_at_a_fifth_of_the_texts(agreement, word):
    finding = fd.validation_finding(_subsampling(agreement), None)
    assert finding.headline.startswith(f"The ranking is {word}recomputed from 20% of the held-out texts")
    assert f"agreement {agreement:.2f} on average over 2 repeats" in finding.headline
    assert finding.detail.startswith("Without labels")
    # beside the answer's check of the two estimators (its own "agreement"), it says why they can differ
    assert "compares one estimator with itself" in finding.headline
    assert "whether the two estimators agree with each other is a separate check" in finding.headline


def test_validation_refuses_correlations_over_fewer_than_five_models():
    few = fd.validation_finding(None, _correlations(4, 0.8)).detail
    assert few.startswith("The labels cannot confirm the order yet") and "only 4 models" in few
    enough = fd.validation_finding(None, _correlations(7, 0.8)).detail
    assert enough == (
        "On this corpus's labels, the score agrees with classification accuracy: rank correlation 0.80 over "
        "7 models (1 = same order)."
    )
    assert "disagrees" in fd.validation_finding(None, _correlations(7, -0.3)).detail
