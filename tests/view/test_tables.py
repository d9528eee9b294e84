"""Numbers, dates and column names as people read them (issue 52): 3 significant figures, dates as dates,
headings in words with the stored name or symbol in their help, the same on a page and in the report."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from flare_core.store.runs import RunStore
from flare_core.view import results
from flare_core.view.columns import column_words, known_column
from flare_core.view.html import table
from flare_core.view.tables import (
    NUMBER_FORMAT,
    date_words,
    number_words,
    rounded,
    shown_columns,
    shown_frame,
    value_words,
)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (4.531521469175459e-8, "4.53e-8"),  # the corpus map's spread of lengths
        (3.9551727771759033, "3.96"),  # the corpus map's average length
        (0.05385872006416321, "0.0539"),  # Validation
        (1234.5, "1230"),
        (4613551.1, "4610000"),
        (-0.00090001, "-0.0009"),
        (0.999999, "1"),
        (2.5e-7, "2.5e-7"),
        (1.5e22, "1.5e+22"),
        (0.0, "0"),
        (np.float32(0.30168), "0.302"),
    ],
)
def test_numbers_read_to_three_significant_figures_as_a_page_writes_them(value, words):
    assert number_words(value) == words
    # the page's "%.3g" is JavaScript's String(Number(x.toPrecision(3))): the shortest form of the rounded
    # number, which is what number_words writes (Python's repr of it, up to the exponent's form)
    assert float(number_words(value)) == rounded(value) == float(f"{value:.3g}")
    assert NUMBER_FORMAT == "%.3g"


def test_missing_and_whole_numbers_and_infinities_in_words():
    assert number_words(float("nan")) == "—" and number_words(float("inf")) == "∞"
    assert value_words(12) == "12" and value_words(12_345) == "12,345" and value_words(2.0) == "2"
    assert value_words(0.123456) == "0.123" and value_words([0.123456, None]) == "0.123, —"


def test_dates_read_as_dates_in_utc():
    assert date_words("2026-11-27T23:52:54+00:00") == "27 Nov 2026, 23:52 UTC"
    assert date_words("2026-11-28T01:52:54+02:00") == "27 Nov 2026, 23:52 UTC"
    assert date_words(None) == "—" and date_words("never") == "never"
    frame = shown_frame(pd.DataFrame({"created": ["2026-11-27T23:52:54+00:00"], "expires": [None]}))
    assert frame.iloc[0].tolist() == ["27 Nov 2026, 23:52 UTC", "—"]


def test_the_named_internal_columns_read_in_words_with_their_name_in_the_help():
    for name in ("nll_marg_train", "is_per_dim", "is_raw_nats"):
        heading, help_text = column_words(name)
        assert "_" not in heading and heading and heading != name.replace("_", " ")
        assert help_text
    assert column_words("nll_marg_train")[1].startswith("nll_marg_train:")
    assert "IS/d" in column_words("is_per_dim")[1] and "is_raw_nats" in column_words("is_raw_nats")[1]
    assert column_words("flow_ci_low") == (
        "FLARE score, likely from",
        column_words("flow_ci_low")[1],
    ) and column_words("flow_ci_low")[1].startswith("flow_ci_low:")
    assert column_words("d_sigma_q05")[0] == "distance between the spreads, 5th percentile"
    assert column_words("d_sigma_q05")[1].startswith("d_sigma_q05: d_Σ:")
    assert (
        column_words("cond_only_trim10_raw")[0] == "trimmed mean (10%) fit given the other model only (nats)"
    )
    assert column_words("texts per second") == ("texts per second", "")  # already words: as it is
    assert not known_column("some_new_column")  # an unknown stored name is caught by the test below


def test_shown_frame_rounds_fractions_and_keeps_them_numbers():
    frame = shown_frame(pd.DataFrame({"m": ["a", "b"], "x": [3.9551727771759033, 4.531521469175459e-8]}))
    assert frame["x"].tolist() == [3.96, 4.53e-8] and frame["x"].dtype == float
    kinds = {c.name: c.kind for c in shown_columns(pd.DataFrame({"a": [1], "b": [0.5], "c": ["x"]}))}
    assert kinds == {"a": "whole", "b": "number", "c": "text"}
    with pytest.raises(ValueError, match="DataFrame"):
        shown_columns([1, 2])


def test_the_report_writes_tables_as_the_pages_show_them():
    frame = pd.DataFrame(
        {"source": ["a"], "nll_marg_train": [48.292015584309894], "is_raw_nats": [-4.531521469175459e-8]}
    )
    html = table(frame)
    assert "<th" in html and "nll_marg_train</th>" not in html and "is_raw_nats</th>" not in html
    assert ">fit alone, training texts (nats)</th>" in html and 'title="nll_marg_train:' in html
    assert ">48.3</td>" in html and ">-4.53e-8</td>" in html
    assert "48.29" not in html and "4.5315" not in html


@pytest.mark.slow
def test_every_column_of_a_stored_runs_tables_has_words(labelled_run, tmp_path):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(labelled_run.path, store.root / labelled_run.id)
    run = store.get(labelled_run.id)
    frames = {
        name: results.sufficiency_frames(run, "flow")[name] for name in ("pairs", "scores", "all_scores")
    }
    frames |= {
        "summary": run.load_frame("summary.parquet"),
        "correlations": run.load_frame("correlations.parquet"),
        "aggregation": run.load_frame("validation", "flow_aggregation.parquet"),
        "collapse": run.load_frame("collapse", "summary.parquet"),
        "embeddings": results.embedding_table(run),
        "runs": pd.DataFrame(results.runs_table(store)).assign(started="", link=""),
    }
    for name, frame in frames.items():
        unknown = [c for c in frame.columns if not known_column(str(c))]
        assert not unknown, f"{name}: no words for {unknown}"
        shown = shown_frame(frame)
        for column in shown_columns(shown):
            assert "_" not in column.heading, (name, column.name)
            if column.kind == "number":  # each figure has at most 3 significant ones
                long = [v for v in shown[column.name] if np.isfinite(v) and float(f"{v:.3g}") != v]
                assert not long, (name, column.name, long)


@pytest.mark.slow
def test_the_report_says_which_model_gave_texts_empty_vectors(labelled_run, tmp_path):
    from flare_core.view.report import build_report

    store = RunStore(tmp_path / "runs")
    shutil.copytree(labelled_run.path, store.root / labelled_run.id)
    run = store.get(labelled_run.id)
    assert "no known words" not in build_report(run)
    path = run.embedding_path("tfidf-svd-256")
    vectors = np.load(path)
    vectors[[0, 1, 2]] = 0.0
    np.save(path, vectors)
    assert "<p>3 texts had no known words for tfidf-svd-256: it gave them empty vectors.</p>" in build_report(
        run
    )
