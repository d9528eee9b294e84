"""Shared fixtures: a small real corpus (BBC News articles) and stored runs built by the real pipeline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory) -> Path:
    """Embedding cache and extracted models live in one folder per test session."""
    cache = Path(os.environ.get("FLARE_TEST_CACHE_DIR") or tmp_path_factory.mktemp("flare-cache"))
    os.environ["FLARE_CACHE_DIR"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def small_corpus_path(tmp_path_factory) -> Path:
    """50 BBC News articles, 10 per topic, as a CSV with ``text`` and ``label`` columns."""
    from flare_core.data.demo import bbc_news_frame

    path = tmp_path_factory.mktemp("corpus") / "bbc50.csv"
    bbc_news_frame(n_per_topic=10, seed=0)[["text", "label"]].to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def fixture_store(tmp_path_factory):
    from flare_core.store.runs import RunStore

    return RunStore(tmp_path_factory.mktemp("runs"))


def _build_run(store, corpus, params, name, run_id):
    from flare_core.run import jobs
    from flare_core.run.create import create_run

    run = create_run(store, corpus, params, name=name, run_id=run_id)
    jobs.run_in_process(run)
    return run


@pytest.fixture(scope="session")
def labelled_run(fixture_store, small_corpus_path):
    """A finished run with labels, a transformer, static models and the default controls; both estimators."""
    from flare_core.data.corpus import load_corpus
    from flare_core.run.params import RunParams

    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    params = RunParams(
        models=["all-MiniLM-L6-v2", "glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"],
        estimators=["gmm", "flow"],
        flow_preset="fast",
        collapse_texts=12,
        concentration_texts=4,
        map_points=200,
    )
    run = _build_run(fixture_store, corpus, params, "labelled fixture", "fixture-labelled")
    assert run.status == "done", run.manifest.get("traceback")
    return run


@pytest.fixture(scope="session")
def unlabelled_run(fixture_store, small_corpus_path):
    """A finished run without labels and with static models only (no collapse data)."""
    from flare_core.data.corpus import load_corpus
    from flare_core.run.params import RunParams

    corpus = load_corpus(small_corpus_path, text_column="text", label_column=None)
    params = RunParams(
        models=["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"], estimators=["gmm"], controls=[]
    )
    run = _build_run(fixture_store, corpus, params, "static fixture", "fixture-static")
    assert run.status == "done", run.manifest.get("traceback")
    return run


@pytest.fixture(scope="session")
def failed_run(fixture_store, small_corpus_path):
    """A run that failed: its only model cannot be loaded."""
    from flare_core.data.corpus import load_corpus
    from flare_core.run.params import RunParams

    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    params = RunParams(models=["no-such-org/no-such-model"], estimators=["gmm"], controls=[])
    run = _build_run(fixture_store, corpus, params, "failed fixture", "fixture-failed")
    assert run.status == "failed"
    return run
