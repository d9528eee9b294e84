"""Quality against cost for a stored run: the costs its embedding stage recorded, the quality it reads, and
the chart (the Overview and the report draw it with the same function)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flare_core.view import answer_figures, figures
from flare_core.view.report import build_report
from flare_core.view.tradeoff import cheapest_sentence, run_costs, run_quality, tradeoff_view


def test_the_embedding_stage_records_each_models_cost(labelled_run):
    costs = run_costs(labelled_run).set_index("model")
    n_texts = labelled_run.manifest["corpus"]["n_texts"]
    assert set(costs.index) == {"all-MiniLM-L6-v2", "glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"}
    for model in labelled_run.manifest["models"]:
        if model["id"] not in costs.index:
            continue
        row, dim = costs.loc[model["id"]], model["dim"]
        assert row["bytes_per_vector_float32"] == 4 * dim and row["bytes_per_vector_int8"] == dim
        assert row["texts_per_s"] > 0 and row["load_s"] >= 0
        if not model.get("from_cache"):  # a model fitted on the corpus counts its fit as embedding time
            fit = model["load_s"] if model["encoder_kind"] == "corpus" else 0.0
            seconds = model["embed_s"] + fit  # each stored rounded to the millisecond
            assert (
                n_texts / (seconds + 0.002) * 0.98
                <= row["texts_per_s"]
                <= n_texts / max(seconds - 0.002, 1e-3) * 1.02
            )
    # MiniLM's size is its package's files on disk; TF-IDF's, its fitted parameters
    assert 80 < costs.loc["all-MiniLM-L6-v2", "model_size_mib"] < 200
    tfidf = next(m for m in labelled_run.manifest["models"] if m["id"] == "tfidf-svd-256")
    assert tfidf["size_from"] == "parameters" and tfidf["model_size_mib"] > 0


def test_the_quality_is_label_based_when_the_run_has_labels(labelled_run, unlabelled_run):
    quality = run_quality(labelled_run).set_index("model")  # the answer's own: the labels' comparison
    comparison = labelled_run.load_frame("labels", "comparison.parquet").set_index("model")
    np.testing.assert_allclose(quality["quality"], 100 * comparison.loc[quality.index, "accuracy"])
    assert quality["label"].str.startswith("accuracy on your labels").all()
    assert (quality["ci_high"] >= quality["quality"]).all() and (
        quality["ci_low"] <= quality["quality"]
    ).all()
    free = run_quality(unlabelled_run)
    scores = unlabelled_run.load_frame("sufficiency", "gmm", "scores.parquet").set_index("model")
    np.testing.assert_allclose(free["ci_low"], scores.loc[free["model"], "ci_low"])
    assert free["label"].str.startswith("label-free").all()


def test_the_quality_cost_chart_draws_every_model_and_its_front(labelled_run):
    view = tradeoff_view(labelled_run)
    fig = answer_figures.quality_cost(view["quality"], view["costs"], "texts_per_s")
    front, points = fig.data
    assert len(points.x) == len(view["costs"]) and fig.layout.xaxis.type == "log"
    table = view["quality"].merge(view["costs"], on="model")
    best = table.loc[table["quality"].idxmax()]
    assert best["model"] in [str(t) for t in points.text]
    assert best["texts_per_s"] in list(front.x)  # the best model is always on the front
    assert list(front.x) == sorted(front.x)
    sentence = cheapest_sentence(view)
    assert sentence.startswith("Cheapest within 2 points of the best")  # the product's tolerance
    assert fig.layout.title.text == "Quality against speed"
    marked = [c for c, m in zip(points.marker.color, points.text, strict=True) if c == figures.HIGHLIGHT]
    assert len(marked) == 1  # the cheapest good-enough model
    storage = answer_figures.quality_cost(view["quality"], view["costs"], "bytes_per_vector")
    assert storage.layout.title.text.startswith("Quality against storage")


def test_the_report_has_the_quality_cost_section(labelled_run):
    page = build_report(labelled_run)
    assert 'id="quality-cost"' in page and "quality-cost-speed" in page and "quality-cost-storage" in page
    quality = pd.DataFrame(
        {"model": ["x"], "quality": [1.0], "ci_low": [0.0], "ci_high": [2.0], "label": ["y"]}
    )
    assert tradeoff_view(labelled_run, quality)["quality"] is quality


def test_a_label_free_answer_names_no_cheapest_model_from_a_score_its_record_does_not_support(unlabelled_run):
    from flare_core.answer.costs import cheapest_good_enough, label_free_quality
    from flare_core.answer.label_free import rule_for
    from flare_core.answer.stored import load_verdict

    verdict = load_verdict(unlabelled_run)
    assert verdict["basis"] == "label-free"
    # the run has both what the sentence would be made of: label-free scores and measured costs
    assert (
        label_free_quality(unlabelled_run) is not None
        and run_costs(unlabelled_run)["texts_per_s"].notna().any()
    )
    use = unlabelled_run.manifest["params"].get("use") or "unsure"
    assert rule_for(use)["rule"] not in ("flow", "gmm")  # the shipped record backs another rule for this use
    assert cheapest_good_enough(unlabelled_run, verdict) is None


def test_a_label_free_score_the_answer_does_not_trust_names_no_cheaper_model(unlabelled_run):
    from flare_core.answer.costs import label_free_speaks
    from flare_core.answer.stored import load_verdict
    from flare_core.view.tradeoff import NOT_SUGGESTED

    view = tradeoff_view(unlabelled_run)
    # the chart still shows the label-free score and the costs, but names no cheaper model from it
    assert str(view["quality"]["label"].iloc[0]).startswith("label-free") and view["suggest"] is False
    assert cheapest_sentence(view) == NOT_SUGGESTED
    assert "faster" not in NOT_SUGGESTED and "Cheapest" not in NOT_SUGGESTED
    chart = answer_figures.quality_cost(
        view["quality"], view["costs"], best=view["best"], mark=view["suggest"]
    )
    assert figures.HIGHLIGHT not in list(chart.data[-1].marker.color)  # no model marked as the cheaper pick
    verdict = load_verdict(unlabelled_run)
    assert not label_free_speaks(unlabelled_run, {**verdict, "trust": {"level": "low", "checks": []}})
