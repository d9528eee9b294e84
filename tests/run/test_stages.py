"""The pipeline's supervised oracle on pair columns: STS (text_a, text_b, score) and retrieval (query, document)."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from flare_core.answer.stored import load_verdict
from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store.runs import RunStore, safe_name
from tests.support import STATIC, embeddings_params


def test_retrieval_columns_give_ndcg(tmp_path, articles):
    # each query is the first sentence of an article; its document is the rest of that article
    sentences = articles["text"].str.split(". ", n=1, regex=False)
    frame = pd.DataFrame({"query": sentences.str[0], "document": sentences.str[1]})
    frame.to_csv(tmp_path / "qd.csv", index=False)
    corpus = load_corpus(tmp_path / "qd.csv", text_column="document")
    assert corpus.pairs is not None and corpus.pairs["score"].isna().all() and len(corpus.pairs) == 30
    run = create_run(RunStore(tmp_path / "runs"), corpus, embeddings_params())
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
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
    run = create_run(RunStore(tmp_path / "runs"), corpus, embeddings_params())
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    downstream = run.load_frame("downstream.parquet").set_index("model")
    # identical pairs (gold 5) have cosine ≈ 1, unrelated ones (gold 0) lower cosines. With two tied gold
    # groups of 10, a perfect separation gives Spearman ≥ sqrt(3)/2 (equal when the cosines of the
    # identical pairs tie exactly; float rounding can break those ties and raise it slightly)
    rho = downstream["cosine_spearman"].to_numpy()
    assert ((rho >= 3**0.5 / 2 - 1e-9) & (rho < 0.95)).all(), rho
    # the pair scores decide the answer: the model whose cosines follow them best, compared with paired intervals
    verdict = load_verdict(run)
    assert verdict["basis"] == "labels" and verdict["labels"]["metric"] == "spearman"
    assert verdict["recommended"] == downstream["cosine_spearman"].idxmax()
    assert verdict["headline"].startswith(
        f"Use {verdict['recommended']}: its similarities follow your pair scores"
    )


@pytest.fixture
def one_torch_thread():
    """Worker processes use one torch thread each; the serial reference must too for equal numbers."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_worker_pool_run_equals_serial_run(tmp_path, articles, monkeypatch, one_torch_thread):
    import numpy as np

    articles.to_csv(tmp_path / "articles.csv", index=False)
    corpus = load_corpus(tmp_path / "articles.csv", text_column="text", label_column="label")
    results = {}
    for workers in (1, 2):
        # a cache per run, so that the pool computes the embeddings itself
        monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path / f"cache-{workers}"))
        params = RunParams(
            models=[*STATIC, "tfidf-svd-256"],
            estimators=["gmm"],
            collapse=False,
            concentration=False,
            validation=[],
            downstream=False,
            workers=workers,
            controls=[],
        )
        run = create_run(RunStore(tmp_path / f"runs-{workers}"), corpus, params)
        assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
        results[workers] = run
    serial, pool = results[1], results[2]
    for model in [*STATIC, "tfidf-svd-256"]:
        np.testing.assert_array_equal(serial.load_embeddings(model), pool.load_embeddings(model))
    pd.testing.assert_frame_equal(
        serial.load_frame("sufficiency", "gmm", "scores.parquet"),
        pool.load_frame("sufficiency", "gmm", "scores.parquet"),
        check_exact=True,
    )
    for model in [*STATIC, "tfidf-svd-256"]:  # the maps drawn side by side on the pool are the same maps
        pd.testing.assert_frame_equal(
            serial.load_frame("maps", f"{safe_name(model)}.parquet"),
            pool.load_frame("maps", f"{safe_name(model)}.parquet"),
            check_exact=True,
        )  # fmt: skip
    # every unit is counted against the worker process that ran it: 3 embeddings, 3 marginals, 6 pairs,
    # 3 maps
    workers = pool.manifest["workers"]
    assert sum(w["units"] for w in workers.values()) == 15 and 1 <= len(workers) <= 2
    assert all(not name.endswith(f":{os.getpid()}") for name in workers)
    assert {w["stage"] for w in workers.values()} <= {"embeddings", "sufficiency_gmm", "maps"}
    serial_workers = serial.manifest["workers"]  # the serial executor runs everything in this process
    assert list(serial_workers) and all(name.endswith(f":{os.getpid()}") for name in serial_workers)


def test_workers_option_validated():
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        RunParams(models=STATIC, workers=0).validate()
    with pytest.raises(ValueError, match="process pool"):
        RunParams(models=STATIC, workers=2, executor="ray").validate()
    with pytest.raises(ValueError, match="batch_conditionals must be a positive integer"):
        RunParams(models=STATIC, batch_conditionals=0).validate()


def test_an_embedding_file_the_driver_cannot_see_fails_only_its_model(tmp_path, articles, monkeypatch):
    from flare_core.run import embedding_stage

    real = embedding_stage._embed_task

    def task(model_id, *args):
        info = real(model_id, *args)
        if model_id == "glove-6b-50d":  # as if a remote worker wrote to a cache this machine does not mount
            info["path"] = str(tmp_path / "elsewhere" / "missing.npy")
        return info

    monkeypatch.setattr(embedding_stage, "_embed_task", task)
    articles.to_csv(tmp_path / "articles.csv", index=False)
    corpus = load_corpus(tmp_path / "articles.csv", text_column="text", label_column="label")
    run = create_run(RunStore(tmp_path / "runs"), corpus, embeddings_params())
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    status = {m["id"]: m for m in run.manifest["models"]}
    assert status["glove-6b-50d"]["status"] == "failed"
    assert "FileNotFoundError" in status["glove-6b-50d"]["error"]
    assert status["tokenlearn-static-64d"]["status"] == "done"
    assert run.embedded_models() == ["tokenlearn-static-64d"]
