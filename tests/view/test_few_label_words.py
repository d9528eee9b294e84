"""What a person's few labels look like wherever they are shown: counted in the run line, chances in one
format ("95%"), the stopping advice's reason, the Validation check against the map, a viewer never asked
to label, tables and settings without 'None', 'nan', 'null' or JSON, and axes that count in whole numbers
with room for their titles. Direct calls, plus one planted run through the report and ``flare show``."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from flare_core.answer import labels as label_store
from flare_core.answer.write import write_verdict
from flare_core.view import answer_figures, figures
from flare_core.view.findings import few_labels_check, validation_finding
from flare_core.view.html import kv_table, table
from flare_core.view.report import build_report
from flare_core.view.tables import settings_frame, shown_frame
from flare_core.view.verdict import (
    chance_percents,
    chance_words,
    chances_in_words,
    interval_words,
    labels_given_words,
    labels_table,
    next_step_words,
    without_asking,
)
from tests.support import flare_here, planted_run

RAW = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|\bnull\b|NULL|\{\"|\[\{|\{'")
ADVICE = (
    "clear leads (98% probability of being best), but 32 labels over 3 classes are too few to be sure: with "
    "fewer than 24 per class the ranking is often wrong; label 16 more texts."
)


def _verdict(n_labels: int = 32) -> dict:
    estimates = [
        {
            "model": "clear",
            "estimate": 0.91,
            "ci_low": 0.8,
            "ci_high": 0.97,
            "p_best": 0.9545,
            "p_within": 0.97,
        },
        {
            "model": "blurred",
            "estimate": 0.7,
            "ci_low": 0.55,
            "ci_high": 0.8,
            "p_best": 0.0405,
            "p_within": 0.04,
        },
        {"model": "noise", "estimate": 0.4, "ci_low": 0.3, "ci_high": 0.5, "p_best": 0.005, "p_within": 0.0},
    ]
    advice = {"settled": False, "best": "clear", "either": ["clear"], "more_labels": 16, "text": ADVICE}
    return {
        "version": 3, "basis": "few labels", "settled": False, "recommended": "clear", "leading": "noise",
        "next_step": "Label 16 more texts (Check with a few labels) to settle it.",
        "ranking": [{"model": "noise", "score": 0.3}, {"model": "blurred", "score": 0.2},
                    {"model": "clear", "score": 0.1}],
        "few_labels": {"n_labels": n_labels, "estimates": estimates, "advice": advice},
    }  # fmt: skip


def test_chances_read_as_whole_percents_in_the_table_and_the_words():
    table_ = labels_table(_verdict())
    # the report; nothing is said to be certain either way
    assert chances_in_words(table_)["chance it is the best"].tolist() == ["95%", "4%", "under 1%"]
    assert chance_percents(table_)["chance it is the best"].tolist() == [95, 4, 1]  # a page's bar, "%d%%"
    assert chance_percents(table_)["chance it is within 1 point of the best"].tolist() == [97, 4, 1]
    assert chance_words(0.9545) == "95%"
    # rounded down, so that a chance shown as 90% has reached the 90% that settles an answer
    assert chance_words(0.8995) == "89%" and chance_words(0.9) == "90%"
    assert chance_words(0.9999) == chance_words(1.0) == "over 99%" and chance_words(0.0) == "under 1%"


def test_the_table_names_the_run_s_tolerance_and_says_when_an_interval_measures_nothing():
    verdict = _verdict()
    verdict["few_labels"]["tolerance_points"] = 2.0
    verdict["few_labels"]["estimates"][2].update(ci_low=0.0, ci_high=1.0)  # 0% to 100%: no measure at all
    table_ = labels_table(verdict)
    assert chance_percents(table_)["chance it is within 2 points of the best"].tolist() == [97, 4, 1]
    assert "chance it is within 1 point of the best" not in table_.columns
    assert table_["likely between"].tolist()[1:] == ["55.0% and 80.0%", "not measured yet"]
    assert interval_words(0.2, 0.71) == "not measured yet" and interval_words(0.2, 0.69) == "20.0% and 69.0%"


def test_the_run_line_counts_the_labels_a_person_gave():
    entries = [{"row": r, "label": "a", "batch": 1 + r // 16} for r in range(32)] + [
        {"row": 3, "label": "b", "batch": 2}  # relabelled: still one text
    ]
    assert labels_given_words({"has_labels": False}, entries) == "32 given, in 2 batches"
    assert labels_given_words({"has_labels": False}, entries[:1]) == "1 given, in 1 batch"
    assert labels_given_words({"has_labels": False, "label_column": None}, []) == "none"
    assert labels_given_words({"has_labels": True, "label_column": "topic"}, []) == "topic"


def test_a_viewer_is_never_asked_to_label():
    verdict = _verdict()
    for_viewer = without_asking(ADVICE)
    assert "label 16 more texts" not in for_viewer and for_viewer.endswith(
        "; 16 more labels would settle it."
    )
    assert (
        without_asking("X leads; label 8 more texts to settle it.")
        == "X leads; 8 more labels would settle it."
    )
    assert next_step_words(verdict, can_label=True) == verdict["next_step"]
    assert (
        next_step_words(verdict, can_label=False)
        == "16 more labels would settle it; the run's owner can add them."
    )
    free = {
        **verdict,
        "basis": "label-free",
        "next_step": "Check with a few labels: 16 to 64 labelled texts.",
    }
    assert "Check with a few labels" not in next_step_words(free, can_label=False)


def test_validation_judges_the_map_against_sixteen_labels_or_more():
    check = few_labels_check(_verdict())
    assert check.startswith("Checked from your 32 labels: the label-free order disagrees")
    assert "rank correlation -1.00 over 3 models" in check and "rough check" in check
    assert "The map's leader, noise, is not the one your labels favour: clear." in check
    assert validation_finding(None, None, verdict=_verdict()).detail == check
    assert "too few to check the order" in few_labels_check(_verdict(8))
    assert few_labels_check({"ranking": [{"model": "a", "score": 1.0}]}) is None
    assert validation_finding(None, None).detail.startswith("Without labels")


def test_tables_and_settings_have_no_none_nan_or_json():
    settings = {"device": None, "seed": 0, "models": ["a", "b"], "flow": {"preset": "fast", "epochs": None}}
    frame = settings_frame(settings)
    assert dict(zip(frame["setting"], frame["value"], strict=True)) == {
        "device": "—", "seed": "0", "models": "a, b", "flow › preset": "fast", "flow › epochs": "—"
    }  # fmt: skip
    models = pd.DataFrame({"model": ["glove", "x"], "layers": [None, 6], "score": [np.nan, 0.5]})
    shown = shown_frame(models)
    assert shown["layers"].tolist() == ["—", "6"] and shown["score"].tolist() == ["—", "0.5"]
    html = kv_table(settings) + table(pd.DataFrame({"a": [{"x": 1}, [1, 2], None, np.nan]}))
    assert not RAW.search(re.sub(r"<[^>]+>", " ", html)), html


def test_axes_have_room_for_their_titles_and_count_in_whole_numbers():
    history = pd.DataFrame(
        {"n_labels": [16, 32, 48] * 2, "model": ["a"] * 3 + ["b"] * 3, "p_best": [0.5] * 6}
    )
    chart = answer_figures.chance_history(history)
    assert chart.layout.xaxis.tickvals == (16, 32, 48) and chart.layout.xaxis.automargin is True
    assert chart.layout.yaxis.automargin is True and chart.layout.xaxis.title.text == "labels so far"
    searched = answer_figures.chance_history(history, "t", counted="judged queries")
    assert searched.layout.xaxis.title.text == "judged queries so far"
    assert "after %{x} judged queries" in searched.data[0].hovertemplate
    pool = pd.DataFrame({"pool_size": [3, 3, 4, 4, 5], "rank_agreement": [0.5, 0.6, 0.7, 0.8, 0.9]})
    curve = figures.study_curve(pool, "pool_size", "rank_agreement", "Pool size", "models in the pool", "r")
    assert curve.layout.xaxis.tickvals == (3, 4, 5)
    alpha = pd.DataFrame({"alpha": [0.2, 0.5, 1.0], "rank_agreement": [0.5, 0.6, 0.7]})
    assert figures.study_curve(alpha, "alpha", "rank_agreement", "t", "x", "y").layout.xaxis.tickvals is None
    bars = figures.label_counts_bar(pd.Series(["a", "a", "b"]))
    assert bars.layout.yaxis.dtick == 1 and bars.layout.yaxis.tickformat == ",d"


@pytest.fixture
def few_labelled_planted(tmp_path):
    run, truth = planted_run(tmp_path, with_labels=False)
    label_store.set_categories(run, sorted(set(truth)))
    for batch in (range(0, 16), range(16, 32)):
        label_store.add_labels(run, {r: truth[r] for r in batch})
    return run, write_verdict(run)


def test_the_report_and_flare_show_count_the_labels(few_labelled_planted):
    run, verdict = few_labelled_planted
    html = build_report(run)
    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", html, flags=re.S)
    text = " ".join(re.sub(r"<[^>]+>", " ", body).split())
    assert "labels 32 given, in 2 batches" in text
    assert verdict["few_labels"]["advice"]["text"].replace("'", "&#x27;") in text  # the advice's reason
    for row in verdict["few_labels"]["estimates"]:  # the chance columns, as whole percents
        shown = rf"{row['model']} [\d.]+% [\d.]+% and [\d.]+% {chance_words(row['p_best'])} {chance_words(row['p_within'])}"
        assert re.search(shown, text), row
    assert not RAW.search(text), RAW.search(text)
    shown = flare_here("show", run.id, runs_dir=run.path.parent).stdout
    assert "labels: 32 given, in 2 batches" in shown
    data = json.loads(flare_here("show", run.id, "--json", runs_dir=run.path.parent).stdout)
    assert data["labels"]["given"] == 32 and data["labels"]["batches"] == 2
    assert "32 texts in 2 batch(es), 0 marked skip / unsure" in text
    was = label_store.load_labels(run).latest()[3]
    label_store.correct_label(run, 3, next(c for c in sorted(verdict["few_labels"]["counts"]) if c != was))
    label_store.add_labels(run, {40: "sport"}, skipped=[41])
    label_store.add_labels(run, {41: "sport"})  # a text skipped, then labelled: no longer skipped
    text = " ".join(re.sub(r"<[^>]+>", " ", build_report(run)).split())
    assert "34 texts in 4 batch(es), 1 label(s) corrected since, 0 marked skip / unsure" in text
