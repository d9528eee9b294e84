"""What search judgements say about a run's candidates: every candidate ranked by its mean nDCG@10 over the
judged queries, with recall@10 and MRR@10 beside it, a paired interval over queries and the ties named
(:func:`flare_core.choosing.retrieval_eval.compare_on_queries`).

The pipeline's stage ``downstream`` stores each model's score on every judged query (:data:`QUERY_SCORES`);
:func:`save_search_comparison` turns them into the same comparison files as the run's own class labels
(``labels/comparison.parquet`` and ``labels/comparison.json``, with ``metric`` "ndcg@10"), so the answer
reads them with :func:`flare_core.answer.from_labels.full_label_block`::

    labels/comparison.parquet   one row per candidate: model, ndcg_at_10, recall_at_10, mrr_at_10, gap,
                                gap_low, gap_high, tied, n_queries
    labels/comparison.json      best, method, metric ("ndcg@10"), k, n_labels (the judged queries),
                                n_judgements, n_classes (None)
"""

from __future__ import annotations

from collections.abc import Sequence

from flare_core.answer.from_labels import COMPARISON, COMPARISON_INFO
from flare_core.choosing.retrieval_eval import METRICS, K, compare_on_queries
from flare_core.data.judgements import JUDGEMENTS
from flare_core.store.runs import Run

#: Each model's scores on every judged query: columns model, query, ndcg_at_10, recall_at_10, mrr_at_10.
QUERY_SCORES = ("labels", "query_scores.parquet")
#: The metric that decides, as the comparison names it.
METRIC = "ndcg@10"
#: The column of the comparison's rows that holds the deciding metric.
COLUMN = "ndcg_at_10"


class NotEnoughScored(ValueError):
    """Fewer than two candidates could be scored on the judged queries."""


def save_search_comparison(run: Run, candidates: Sequence[str], *, seed: int = 0) -> dict:
    """Compare ``candidates`` on the run's stored per-query scores and store the comparison; returns its
    information (the ``comparison.json`` dict). Raises :class:`NotEnoughScored` with fewer than two
    candidates scored (precomputed embeddings cannot embed the queries)."""
    scores = run.load_frame(*QUERY_SCORES)
    scored = [m for m in candidates if (scores["model"] == m).any()]
    if len(scored) < 2:
        raise NotEnoughScored(
            "comparing models on your search judgements needs two candidates that can embed the queries"
        )
    frame = compare_on_queries(
        {m: scores.loc[scores["model"] == m, ["query", *METRICS]] for m in scored}, seed=seed
    )
    judgements = run.load_frame(JUDGEMENTS) if run.has(JUDGEMENTS) else None
    info = {
        "best": frame.attrs["best"],
        "method": frame.attrs["method"],
        "metric": METRIC,
        "k": K,
        "n_labels": int(frame["n_queries"].iloc[0]),
        "n_judgements": None if judgements is None else int(len(judgements)),
        "n_classes": None,
        "balanced": None,
    }
    frame.attrs = {}
    run.save_frame(frame, *COMPARISON)
    run.save_json(info, *COMPARISON_INFO)
    return info
