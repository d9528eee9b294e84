"""What a run's few search judgements say, and which queries to ask next: the twin of
:mod:`flare_core.answer.from_labels` for search (the queries, pools and judgements themselves are stored by
:mod:`flare_core.answer.few_judgements`).

- :func:`next_queries`: the queries to judge next, those with unjudged pooled documents first, then queries
  drafted from the corpus (:func:`draft_queries`: a document's first sentence as a known-item query, for
  documents drawn at random);
- :func:`few_search_block`: the answer, every figure from one estimate,
  :func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates`, and its stopping advice,
  :func:`~flare_core.choosing.stopping.search_stopping_advice`;
- :func:`search_history`: the estimates after each batch, replayed from the stored order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.few_judgements import (
    KNOWN_ITEM_WORDS,
    METRIC,
    MIN_KNOWN_ITEM_WORDS,
    Encode,
    SearchJudgements,
    add_queries,
    load_search_judgements,
    stored_query_embeddings,
)
from flare_core.answer.from_labels import candidate_ids, tolerance_of
from flare_core.choosing.retrieval_eval import K, few_judgement_estimates, per_query_scores
from flare_core.choosing.stopping import search_stopping_advice
from flare_core.store.runs import Run


def first_sentence(text: str, max_words: int = KNOWN_ITEM_WORDS) -> str:
    """A document's first sentence (or line), cut to ``max_words`` words: a known-item query for it."""
    first = re.split(r"(?<=[.!?])\s+|\n", str(text).strip(), maxsplit=1)[0]
    return " ".join(first.split()[:max_words]).rstrip(",;:")


def draft_queries(run: Run, n: int, judged: SearchJudgements | None = None) -> pd.DataFrame:
    """``n`` queries drafted from the corpus (columns ``query``, ``known_item_row``): the first sentence of
    a document, for documents drawn in a seeded order (the run's seed and the queries asked so far); never
    a query asked already or twice.

    Documents are drawn at random: on the benchmark's three retrieval corpora, drafting first from the
    documents whose neighbours the candidates disagree on most picked a model within 2 nDCG@10 points in
    52 / 60 / 83 / 80% of draws at 5 / 10 / 20 / 40 queries against 43 / 59 / 79 / 82% for random queries,
    and in 3 / 20 / 57 / 47% on bbc-titles (``bench/studies/few_judgements.py``): no better, with a far worse
    worst case.
    """
    judged = judged if judged is not None else load_search_judgements(run)
    texts = run.corpus_frame()["text"].astype(str).to_numpy()
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    rng = np.random.default_rng([seed, len(judged.queries)])
    used = {int(r) for r in judged.queries["known_item_row"] if int(r) >= 0}
    asked = {" ".join(str(t).lower().split()) for t in judged.queries["query_text"] if isinstance(t, str)}
    drafts: dict[int, str] = {}
    for row in rng.permutation(len(texts)):
        if len(drafts) >= max(int(n), 0):
            break
        query = first_sentence(texts[row])
        key = " ".join(query.lower().split())
        if int(row) in used or len(query.split()) < MIN_KNOWN_ITEM_WORDS or key in asked:
            continue
        asked.add(key)
        drafts[int(row)] = query
    return pd.DataFrame(
        {
            "query": pd.Series(list(drafts.values()), dtype=str),
            "known_item_row": pd.Series(list(drafts), dtype="int64"),
        }
    )


def next_queries(run: Run, n: int, *, encode: Encode | None = None) -> list[str]:
    """The ids of ``n`` queries to judge next: those with pooled documents still unjudged, oldest first,
    then new queries drafted from the corpus (:func:`draft_queries`, added to the run)."""
    if int(n) < 1:
        raise ValueError(f"ask for at least one query, not {n}")
    current = load_search_judgements(run)
    ids = current.pending()[: int(n)]
    if len(ids) < n:
        drafts = draft_queries(run, int(n) - len(ids), current)
        if len(drafts):
            ids += add_queries(
                run,
                drafts["query"].tolist(),
                source="suggested",
                known_items=drafts["known_item_row"].tolist(),
                encode=encode,
            )
    return ids


def _scores(
    run: Run, judged: SearchJudgements, upto: Mapping[str, dict[int, int]]
) -> dict[str, pd.DataFrame]:
    """Each model's per-query scores on the judged queries of ``upto`` that have a relevant document."""
    counted = {q: docs for q, docs in upto.items() if any(g > 0 for g in docs.values())}
    if not counted:
        return {}
    position = {q: i for i, q in enumerate(judged.ids)}
    embeddings = stored_query_embeddings(run, len(judged.ids))
    out = {}
    for model, query_emb in embeddings.items():
        out[model] = per_query_scores(
            query_emb, run.load_embeddings(model, mmap=True), counted, {q: position[q] for q in counted}
        )
    return out


def few_search_block(run: Run, judged: SearchJudgements | None = None) -> dict[str, Any] | None:
    """The answer of a person's few search judgements, in the form of the few-label block (so the answer,
    the table, the cost line and the pages read it alike): ``metric`` ("ndcg@10"), ``k``, ``n_labels``
    (the judged queries that count: those with a relevant document), ``n_judgements``, ``batches``,
    ``no_relevant`` (judged queries without a relevant document: kept, not counted), ``unscored`` (the
    candidates that cannot embed a query); then ``method``, ``estimates`` and ``advice``, or ``need`` (what
    to judge first). None before any judgement."""
    judged = judged if judged is not None else load_search_judgements(run)
    latest = judged.latest()
    if not latest:
        return None
    scores = _scores(run, judged, latest)
    embedded = stored_query_embeddings(run, len(judged.ids))
    base = {
        "metric": METRIC,
        "k": K,
        "n_labels": len(judged.counted),
        "n_queries_judged": len(latest),
        "n_judgements": int(sum(len(docs) for docs in latest.values())),
        "batches": judged.batches,
        "no_relevant": judged.no_relevant,
        "unscored": [m for m in candidate_ids(run) if m not in embedded],
        "counts": {},
        "skipped": 0,
    }
    if len(scores) < 2:
        return {
            **base,
            "need": (
                f"None of the {len(latest)} judged queries has a relevant document yet: mark the documents "
                "that answer a query relevant, so that the models can be told apart."
            ),
        }
    estimates = _replayed(run, judged)[-1][1]
    advice = search_stopping_advice(estimates, len(judged.counted))
    return {
        **base,
        "method": estimates.attrs["method"],
        "estimates": _records(estimates),
        "advice": advice,
        "tolerance_points": float(estimates.attrs["tolerance_points"]),
    }


def _replayed(run: Run, judged: SearchJudgements) -> list[tuple[SearchJudgements, pd.DataFrame]]:
    """The estimates after each batch of judgements that compares at least two models, replayed from the
    stored order, each keeping the model named after the batch before unless its judgements displace it
    (:func:`~flare_core.choosing.accuracy_posterior.named_model`), as the answer did batch by batch: (the
    judgements up to the batch, its estimates) per batch."""
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    out: list[tuple[SearchJudgements, pd.DataFrame]] = []
    named = None
    for batch in range(1, judged.batches + 1):
        part = SearchJudgements(
            judged.queries, judged.pools, judged.entries[judged.entries["batch"] <= batch]
        )
        scores = _scores(run, judged, part.latest())
        if len(scores) < 2:
            continue
        estimates = few_judgement_estimates(
            scores, seed=seed, tolerance_points=tolerance_of(run), named_before=named
        )
        named = str(estimates["model"].iloc[0])
        out.append((part, estimates))
    return out


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    from flare_core.answer.from_labels import _records as records

    return records(frame)


def search_history(run: Run, judged: SearchJudgements | None = None) -> pd.DataFrame:
    """The estimates after each batch of judgements, replayed from the stored order: columns ``n_labels``
    (judged queries that count), ``batch``, ``model``, ``estimate``, ``p_best``."""
    judged = judged if judged is not None else load_search_judgements(run)
    columns = ["n_labels", "batch", "model", "estimate", "p_best"]
    frames = [
        estimates[["model", "estimate", "p_best"]].assign(n_labels=len(part.counted), batch=part.batches)
        for part, estimates in _replayed(run, judged)
    ]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]
