"""The corpus-reading scores of a kept benchmark corpus, on real packaged texts and real models: the cut
texts embedded by the model itself, the pseudo-queries' nDCG@10 recomputed by hand from those vectors and
the kept ones, and a second reading that embeds nothing."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench.studies.draws.probe_scores import PROBE_COLUMNS, probe_scores
from flare_core import encoders
from flare_core.benchmark.embedding_store import embed_corpus, load_kept
from flare_core.data.benchmark_corpora import load_benchmark_corpus
from flare_core.data.corpus_sources import BenchmarkCorpus

MODELS = ["glove-6b-50d", "tfidf-svd-256"]


@pytest.fixture(scope="module")
def small_spam() -> BenchmarkCorpus:
    bench = load_benchmark_corpus("sms-spam", seed=0)
    frame = bench.frame.groupby("label", group_keys=False).head(40).reset_index(drop=True)
    return BenchmarkCorpus("sms-spam", bench.task, bench.description, bench.source, bench.licence, frame)


def test_probe_scores_are_the_models_own_and_read_back_without_embedding(tmp_path, small_spam):
    embed_corpus(small_spam, MODELS, tmp_path / "kept")
    result = probe_scores(tmp_path / "kept", tmp_path / "probes", "sms-spam", MODELS, sample=20)
    assert result["n_queries"] == 20 and result["n_halves"] == 20
    assert set(result["scores"]) == set(MODELS) and all(
        set(s) == set(PROBE_COLUMNS) for s in result["scores"].values()
    )
    cut = json.loads((tmp_path / "probes" / "sms-spam" / "texts.json").read_text(encoding="utf-8"))
    texts = small_spam.frame["text"].tolist()
    for row, query, rest in zip(cut["rows"], cut["queries"], cut["rests"], strict=True):
        assert query in texts[row] and set(rest.split()) <= set(texts[row].split())

    # nDCG@10 by hand for the GloVe model: its own vectors of the queries and the rests, the kept vectors of
    # every other text, one relevant document per query
    glove = encoders.load_encoder("glove-6b-50d")
    q, r = glove.encode(cut["queries"]), glove.encode(cut["rests"])
    docs = load_kept(tmp_path / "kept", "sms-spam").embeddings["glove-6b-50d"]

    def cos(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    gains = []
    for i, row in enumerate(cut["rows"]):
        own = cos(q[i], r[i])
        rank = 1 + sum(cos(q[i], docs[j]) >= own - 1e-12 for j in range(len(docs)) if j != row)
        gains.append(1 / math.log2(rank + 1) if rank <= 10 else 0.0)
    assert result["scores"]["glove-6b-50d"]["pseudo_ndcg"] == pytest.approx(np.mean(gains), abs=1e-6)
    # the corpus-fitted model keeps its own fit's vectors of the corpus beside the cut texts
    with np.load(tmp_path / "probes" / "sms-spam" / "tfidf-svd-256.npz", allow_pickle=False) as data:
        assert data["corpus"].shape[0] == len(texts) and data["queries"].shape[0] == 20

    scores_path = tmp_path / "probes" / "sms-spam" / "scores.json"
    before = scores_path.stat().st_mtime_ns
    assert probe_scores(tmp_path / "kept", tmp_path / "probes", "sms-spam", MODELS, sample=20) == result
    assert scores_path.stat().st_mtime_ns == before  # read, not computed again
    scores_path.unlink()  # the vectors are kept: scoring again embeds nothing and gives the same scores
    again = probe_scores(tmp_path / "kept", tmp_path / "probes", "sms-spam", MODELS, sample=20)
    for model in MODELS:
        assert again["scores"][model] == pytest.approx(result["scores"][model], abs=1e-12)
    assert again["seconds"] == result["seconds"]


def test_a_corpus_not_kept_yet_gets_the_scores_its_texts_allow_and_the_rest_once_kept(tmp_path, small_spam):
    texts = small_spam.frame["text"].tolist()
    early = probe_scores(tmp_path / "kept", tmp_path / "probes", "sms-spam", MODELS, texts=texts, sample=20)
    assert early["kept"] is False
    for scores in early["scores"].values():
        assert math.isnan(scores["pseudo_ndcg"]) and math.isnan(scores["neighbours"])
        assert math.isnan(scores["pseudo_fused"])
        assert 0 < scores["pseudo_ndcg_sample"] <= 1 and 0 < scores["halves"] <= 1
    embed_corpus(small_spam, MODELS, tmp_path / "kept")
    (tmp_path / "kept" / "sms-spam" / "record.json").write_text("{}", encoding="utf-8")  # judged: kept
    late = probe_scores(tmp_path / "kept", tmp_path / "probes", "sms-spam", MODELS, texts=texts, sample=20)
    assert late["kept"] is True and late["seconds"] == early["seconds"]  # nothing embedded again
    for model in MODELS:
        assert all(0 < late["scores"][model][c] <= 1 for c in ("pseudo_ndcg", "pseudo_fused", "neighbours"))
        assert late["scores"][model]["halves"] == early["scores"][model]["halves"]
