"""The answer benchmark: every candidate's kept embeddings of a benchmark corpus judged by its labels,
with no run and no estimator (the information-sufficiency map is the benchmark's second, slower stage).

For a corpus kept by :mod:`flare_core.benchmark.embedding_store`, :func:`judge_kept` computes, from the
kept vectors alone:

- the oracle: 5-fold logistic-regression accuracy, 10-nearest-neighbour accuracy and the V-measure of
  k-means (classification corpora), the Spearman correlation of pair cosines with the human scores
  (similarity corpora), or nDCG@10, recall@10 and MRR@10 (retrieval corpora; each model ranks its own
  vectors of the documents for its own vectors of the queries);
- the label-free geometric scores (:func:`flare_core.choosing.validity.baseline_scores`);

and writes them to ``<corpus>/record.json`` beside the vectors, so a change in how the answer is judged
reads them again instead of embedding (``flare benchmark --stage answer --rejudge``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.benchmark.embedding_store import KeptCorpus, load_kept
from flare_core.choosing.validity import baseline_scores, oracle_scores, retrieval_oracle
from flare_core.encoders.registry import reads_corpus
from flare_core.store import atomic

#: Each corpus kind's oracle columns, the first the one the answer is judged by.
ORACLE_COLUMNS = {
    "classification": ("accuracy", "knn_accuracy", "v_measure"),
    "similarity": ("sts_spearman",),
    "retrieval": ("ndcg_at_10", "recall_at_10", "mrr_at_10"),
}


def roles_of(models: Sequence[str]) -> dict[str, str]:
    """Each model's role in the pool (``candidate``, ``control``, ``partial``; ``candidate`` for a model
    the pool does not know)."""
    from flare_core.encoders import list_models

    known = {spec.id: spec.role for spec in list_models()}
    return {m: known.get(m, "candidate") for m in models}


def judge_kept(kept: KeptCorpus, *, seed: int = 0) -> dict[str, Any]:
    """The answer record of one kept corpus: ``corpus``, ``task``, ``oracle`` (its main column),
    ``n_texts``, ``candidates``, ``controls``, ``best`` (the oracle's best candidate), ``table`` (one row
    per model: every oracle column, every label-free score, ``role``, ``embed_seconds``), ``cleaning``
    (what reading the corpus dropped), ``judge_seconds`` and, for a classification corpus,
    ``n_classes``."""
    start = time.perf_counter()
    bench, embeddings = kept.bench, kept.embeddings
    kind = bench.oracle
    if kind == "classification":
        oracle = oracle_scores(embeddings, labels=bench.frame["label"].astype(str).tolist(), seed=seed)
    elif kind == "similarity":
        oracle = oracle_scores(embeddings, pairs=bench.pairs, seed=seed)
    else:
        missing = sorted(set(embeddings) - set(kept.queries))
        if missing:
            raise ValueError(f"{bench.name}: no kept query vectors for {missing}")
        oracle = retrieval_oracle(kept.queries, embeddings, bench.judgements)
    table = baseline_scores(embeddings, seed=seed).join(oracle)
    # the names the shipped benchmark's tables give them, which the answer's rules read (answer.label_free)
    table["oracle"] = table[ORACLE_COLUMNS[kind][0]]
    if kind == "classification":
        table["oracle_knn"], table["oracle_vmeasure"] = table["knn_accuracy"], table["v_measure"]
    writing, reading = reads_corpus(list(table.index), bench.frame["text"].astype(str).tolist())
    table["reads_corpus"] = [reading[m] for m in table.index]
    role = roles_of(list(embeddings))
    table["role"] = [role[m] for m in table.index]
    table["embed_seconds"] = [kept.seconds.get(m, float("nan")) for m in table.index]
    candidates = [m for m in table.index if role[m] == "candidate"]
    main = ORACLE_COLUMNS[kind][0]
    record: dict[str, Any] = {
        "corpus": bench.name,
        "task": bench.task,
        "source": bench.source,
        "licence": bench.licence,
        "oracle": main,
        "n_texts": len(bench.frame),
        "candidates": candidates,
        "controls": [m for m in table.index if role[m] == "control"],
        "best": str(table.loc[candidates, main].idxmax()),
        "table": json.loads(table.rename_axis("model").reset_index().to_json(orient="records")),
    }
    if kind == "classification":
        record["n_classes"] = int(bench.frame["label"].astype(str).nunique())
    if kind == "retrieval":
        record["n_queries"] = int(bench.judgements["query_id"].nunique())
    record["writing"], record["languages"] = writing.kind, writing.record()
    record["cleaning"] = bench.cleaning
    record["judge_seconds"] = round(time.perf_counter() - start, 1)
    return record


def judged_record(root: str | Path, corpus: str, *, seed: int = 0, again: bool = False) -> dict[str, Any]:
    """The answer record of ``corpus`` kept under ``root``: read from ``<corpus>/record.json`` when it is
    there and was judged from the same vectors (unless ``again``), judged and written otherwise."""
    path = Path(root) / corpus / "record.json"
    kept = load_kept(root, corpus)
    if path.is_file() and not again:
        record = json.loads(path.read_text(encoding="utf-8"))
        if sorted(r["model"] for r in record["table"]) == sorted(kept.embeddings):
            if "languages" not in record:  # judged before the records said which texts the models read
                record = _with_reading(record, kept)
                atomic.write_json(path, record)
            return record
    record = judge_kept(kept, seed=seed)
    atomic.write_json(path, record)
    return record


def _with_reading(record: dict[str, Any], kept: KeptCorpus) -> dict[str, Any]:
    """``record`` with its corpus's ``writing`` (one word), its ``languages`` (the shares of languages and
    scripts) and each model's ``reads_corpus`` (the share of the texts it reads; from the texts and the
    models' specs: nothing is judged again)."""
    models = [row["model"] for row in record["table"]]
    writing, reading = reads_corpus(models, kept.bench.frame["text"].astype(str).tolist())
    rows = [
        {**row, "reads_corpus": None if np.isnan(reading[row["model"]]) else reading[row["model"]]}
        for row in record["table"]
    ]
    return {**record, "table": rows, "writing": writing.kind, "languages": writing.record()}


def record_table(record: dict[str, Any]) -> pd.DataFrame:
    """A record's table with the models as index."""
    return pd.DataFrame(record["table"]).set_index("model")


def oracle_series(record: dict[str, Any]) -> pd.Series:
    """The record's main oracle column (index: models)."""
    return record_table(record)[record["oracle"]].astype(float)


def chance_level(record: dict[str, Any]) -> float:
    """Guessing's accuracy on a classification record (1 / classes); 0 otherwise."""
    return 1.0 / record["n_classes"] if record.get("n_classes") else 0.0
