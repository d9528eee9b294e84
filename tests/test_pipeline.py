"""The pipeline's supervised oracle on pair columns: STS (text_a, text_b, score) and retrieval (query, document)."""

from __future__ import annotations

import pandas as pd
import pytest

from flare_core import jobs
from flare_core.corpus import load_corpus
from flare_core.demo import bbc_news_frame
from flare_core.pipeline import RunParams, create_run
from flare_core.runs import RunStore

STATIC = ["glove-6b-50d", "tokenlearn-static-64d"]


def _params() -> RunParams:
    return RunParams(
        models=STATIC, estimators=[], collapse=False, concentration=False, maps=False, validation=[]
    )


@pytest.fixture(scope="module")
def articles() -> pd.DataFrame:
    return bbc_news_frame(n_per_topic=6, seed=1)


def test_retrieval_columns_give_ndcg(tmp_path, articles):
    # each query is the first sentence of an article; its document is the rest of that article
    sentences = articles["text"].str.split(". ", n=1, regex=False)
    frame = pd.DataFrame({"query": sentences.str[0], "document": sentences.str[1]})
    frame.to_csv(tmp_path / "qd.csv", index=False)
    corpus = load_corpus(tmp_path / "qd.csv", text_column="document")
    assert corpus.pairs is not None and corpus.pairs["score"].isna().all() and len(corpus.pairs) == 30
    run = create_run(RunStore(tmp_path / "runs"), corpus, _params())
    assert jobs.execute(run) == "done", run.manifest.get("traceback")
    downstream = run.load_frame("downstream.parquet").set_index("model")
    assert set(downstream.index) == set(STATIC)
    ndcg = downstream["ndcg_at_10"]
    # titles retrieve their own article far better than chance (1 relevant among 30: chance nDCG@10 ≈ 0.1)
    assert (ndcg > 0.3).all() and (ndcg <= 1).all()


def test_sts_columns_give_spearman(tmp_path, articles):
    texts = articles["text"].tolist()
    rows = [(texts[i], texts[i], 5.0) for i in range(10)] + [
        (texts[i], texts[-1 - i], 0.0) for i in range(10)
    ]
    frame = pd.DataFrame(rows, columns=["text_a", "text_b", "score"])
    frame["text"] = texts[:20]
    frame.to_csv(tmp_path / "sts.csv", index=False)
    corpus = load_corpus(tmp_path / "sts.csv", text_column="text", label_column=None)
    run = create_run(RunStore(tmp_path / "runs"), corpus, _params())
    assert jobs.execute(run) == "done", run.manifest.get("traceback")
    downstream = run.load_frame("downstream.parquet").set_index("model")
    # identical pairs (gold 5) have cosine ≈ 1, unrelated ones (gold 0) lower cosines. With two tied gold
    # groups of 10, a perfect separation gives Spearman ≥ sqrt(3)/2 (equal when the cosines of the
    # identical pairs tie exactly; float rounding can break those ties and raise it slightly)
    rho = downstream["cosine_spearman"].to_numpy()
    assert ((rho >= 3**0.5 / 2 - 1e-9) & (rho < 0.95)).all(), rho
