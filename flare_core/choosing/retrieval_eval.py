"""Choosing a model for search: each model ranks the documents for every judged query by cosine, and the
rankings are scored per query by trec_eval's own code (``pytrec_eval``, as MTEB scores retrieval).

Per query: ``ndcg_at_10`` (trec_eval's ``ndcg_cut.10``: graded gains, ``log2(rank + 1)`` discount, the ideal
ranking of every judged document), ``recall_at_10`` (``recall.10``: relevant documents found in the top 10
over all relevant ones) and ``mrr_at_10`` (``recip_rank`` of the top-10 ranking: 1 / rank of the first
relevant document, 0 when none is in the top 10). A document is relevant when its grade is > 0.

Models are compared by their mean nDCG@10 over the queries. The gap of each model to the best has a 95%
interval from a paired bootstrap over the queries (every model's mean recomputed on the same resampled
queries), and a model whose interval reaches 0 is tied with the best.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import pytrec_eval
from sklearn.preprocessing import normalize

from flare_core.analyses.resampling import percentile_bootstrap
from flare_core.checks import check_int, check_matrix
from flare_core.choosing.accuracy_posterior import AccuracyPrior, estimate_frame
from flare_core.choosing.label_forecast import forecast

#: Bootstrap draws behind the intervals.
DRAWS = 1000
#: The rank cut of the metrics.
K = 10
#: The per-query metrics, in the order they are shown; the first one decides.
METRICS = ("ndcg_at_10", "recall_at_10", "mrr_at_10")
#: The level of nDCG@10 assumed before any judgement when nothing else is known (within the flat prior's
#: wide spread): the middle of the scale.
SEARCH_LEVEL = 0.5


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest ``scores`` (D,), best first; ties broken by the lower index."""
    order = np.lexsort((np.arange(scores.shape[0]), -scores))
    return order[: min(k, scores.shape[0])]


def top_k_rows(query_emb: np.ndarray, doc_emb: np.ndarray, k: int = K) -> np.ndarray:
    """The ``k`` documents (rows of ``doc_emb`` (D, d)) each query (rows of ``query_emb`` (Q, d)) finds by
    cosine, best first: (Q, min(k, D)), from one matrix product; ties broken by the lower row, as
    :func:`per_query_scores` ranks."""
    q = check_matrix(query_emb, "query_emb")
    d = check_matrix(doc_emb, "doc_emb")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"query_emb has {q.shape[1]} dimensions but doc_emb has {d.shape[1]}")
    scores = normalize(q.astype(np.float64)) @ normalize(d.astype(np.float64)).T
    return np.stack([_top_k(row, k) for row in scores]) if len(scores) else np.zeros((0, min(k, len(d))), int)


def check_judgements(judgements: Mapping[str, Mapping[int, float]], n_docs: int) -> dict[str, dict[int, int]]:
    """``judgements`` (query id → {document row → grade}) checked: integer grades >= 0, rows in range, every
    query with at least one relevant document (grade > 0). Raises ``ValueError`` naming what is wrong."""
    out: dict[str, dict[int, int]] = {}
    if not judgements:
        raise ValueError("there are no judgements: give at least one query with a relevant document")
    for query, docs in judgements.items():
        grades: dict[int, int] = {}
        for row, grade in docs.items():
            if isinstance(row, bool) or not isinstance(row, int | np.integer) or not 0 <= int(row) < n_docs:
                raise ValueError(
                    f"query {query!r} judges document row {row!r}, not one of the {n_docs} documents"
                )
            value = float(grade)
            if not np.isfinite(value) or value < 0 or value != int(value):
                raise ValueError(f"query {query!r}: relevance grades are whole numbers >= 0, got {grade!r}")
            grades[int(row)] = int(value)
        if not any(g > 0 for g in grades.values()):
            raise ValueError(f"query {query!r} has no relevant document (no grade above 0)")
        out[str(query)] = grades
    return out


def per_query_scores(
    query_emb: np.ndarray,
    doc_emb: np.ndarray,
    judgements: Mapping[str, Mapping[int, float]],
    query_rows: Mapping[str, int],
) -> pd.DataFrame:
    """One model's scores on each judged query.

    ``query_emb`` (Q, d) and ``doc_emb`` (D, d) are the model's embeddings of the queries and documents;
    ``judgements`` maps a query id to ``{document row: grade}``; ``query_rows`` a query id to its row of
    ``query_emb``. Returns one row per query (in the order of ``judgements``): ``query`` and
    :data:`METRICS`. Raises ``ValueError`` for malformed inputs (see :func:`check_judgements`).
    """
    q = check_matrix(query_emb, "query_emb")
    d = check_matrix(doc_emb, "doc_emb")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"query_emb has {q.shape[1]} dimensions but doc_emb has {d.shape[1]}")
    judged = check_judgements(judgements, d.shape[0])
    missing = [query for query in judged if query not in query_rows]
    if missing:
        raise ValueError(f"{len(missing)} judged queries have no text, e.g. {missing[0]!r}")
    tops = top_k_rows(q[[int(query_rows[query]) for query in judged]], d, K)
    return ranking_scores(dict(zip(judged, tops, strict=True)), judged, K)[["query", *METRICS]]


def ranking_scores(
    rankings: Mapping[str, np.ndarray], judged: Mapping[str, Mapping[int, int]], k: int = K
) -> pd.DataFrame:
    """trec_eval's scores of rankings at the cut ``k``: the one nDCG of the product.

    ``rankings`` maps a query id to document rows, best first (only the first ``k`` count); ``judged`` maps
    each of those queries to ``{document row: whole grade >= 0}`` (relevant when > 0). Returns one row per
    query, in the order of ``rankings``: ``query``, ``ndcg_at_{k}`` (``ndcg_cut.k``), ``recall_at_{k}``
    (``recall.k``), ``mrr_at_{k}`` (``recip_rank`` of the top ``k``) and ``map_at_{k}`` (``map_cut.k``:
    precision at each relevant rank up to ``k``, summed, over the number of relevant documents).
    """
    k = check_int(k, "k", min_value=1)
    trec = {
        f"ndcg_cut_{k}": f"ndcg_at_{k}",
        f"recall_{k}": f"recall_at_{k}",
        "recip_rank": f"mrr_at_{k}",
        f"map_cut_{k}": f"map_at_{k}",
    }
    qrel = {query: {f"d{row}": int(grade) for row, grade in judged[query].items()} for query in rankings}
    # trec_eval ranks by score (ties by document id): distinct scores keep the given ranking as it is
    run = {
        query: {f"d{int(row)}": float(k - rank) for rank, row in enumerate(top[:k])}
        for query, top in rankings.items()
    }
    measures = {f"ndcg_cut.{k}", f"recall.{k}", "recip_rank", f"map_cut.{k}"}
    evaluated = pytrec_eval.RelevanceEvaluator(qrel, measures).evaluate(run)
    rows = [
        {"query": query, **{name: float(evaluated[query][key]) for key, name in trec.items()}}
        for query in rankings
    ]
    return pd.DataFrame(rows, columns=["query", *trec.values()])


def _aligned(
    scores: Mapping[str, pd.DataFrame], *, min_models: int
) -> tuple[list[str], list[str], dict[str, pd.DataFrame]]:
    """The models, the judged queries (in the first model's order) and each model's per-query table indexed
    by query in that order; refuses an empty set and models scored on other queries."""
    names = list(scores)
    if len(names) < min_models:
        raise ValueError("scores must hold at least one model")
    queries = scores[names[0]]["query"].astype(str).tolist()
    if not queries:
        raise ValueError("there are no judged queries to compare the models on")
    tables = {}
    for name in names:
        table = scores[name].assign(query=scores[name]["query"].astype(str)).set_index("query")
        if sorted(table.index) != sorted(queries):
            raise ValueError(f"model {name!r} was scored on other queries than {names[0]!r}")
        tables[name] = table.loc[queries]
    return names, queries, tables


def compare_on_queries(
    scores: Mapping[str, pd.DataFrame], *, seed: int = 0, draws: int = DRAWS
) -> pd.DataFrame:
    """Rank models by their mean nDCG@10 over the judged queries.

    ``scores[m]`` is :func:`per_query_scores` of model ``m``, on the same queries. Returns one row per model,
    best first: ``model``, :data:`METRICS` (means over queries), ``gap`` (points: 100 × the difference of
    mean nDCG@10 with the best), ``gap_low, gap_high`` (95% paired bootstrap over queries), ``tied``,
    ``n_queries``; ``attrs``: ``best``, ``method``.
    """
    draws = check_int(draws, "draws", min_value=100)
    names, queries, tables = _aligned(scores, min_models=1)
    ndcg = np.stack([tables[m]["ndcg_at_10"].to_numpy(dtype=np.float64) for m in names])  # (M, Q)
    means = ndcg.mean(axis=1)
    best = min(range(len(names)), key=lambda i: (-means[i], names[i]))

    def gaps(samples: np.ndarray) -> np.ndarray:  # (draws, M): points behind the best on each resample
        boot = ndcg[:, samples].mean(axis=2)  # (M, draws)
        return (100.0 * (boot[best] - boot)).T

    low, high, _ = percentile_bootstrap(gaps, len(queries), draws=draws, rng=np.random.default_rng(seed))
    frame = pd.DataFrame(
        {
            "model": names,
            **{metric: [float(tables[m][metric].mean()) for m in names] for metric in METRICS},
            "gap": 100.0 * (means[best] - means),
            "gap_low": low,
            "gap_high": high,
            "tied": [(i != best) and bool(low[i] <= 0.0) for i in range(len(names))],
            "n_queries": len(queries),
        }
    )
    frame = frame.sort_values(["ndcg_at_10", "model"], ascending=[False, True], kind="stable")
    frame = frame.reset_index(drop=True)
    frame.attrs.update(
        best=names[best],
        method=f"mean nDCG@10 over your queries (trec_eval's figures), {draws} paired bootstrap draws over "
        "queries",
    )
    return frame


def few_judgement_estimates(
    scores: Mapping[str, pd.DataFrame],
    *,
    prior: AccuracyPrior | None = None,
    seed: int = 0,
    tolerance_points: float | None = None,
    named_before: str | None = None,
) -> pd.DataFrame:
    """Each model's nDCG@10 on a few judged queries, every figure of the answer from one posterior, in the
    form of :func:`flare_core.choosing.probes.few_label_estimates` (the few-label answer reads both).

    ``scores[m]`` is :func:`per_query_scores` of model ``m`` on the same queries (judged on their pooled
    documents: a document nobody judged counts as not relevant). The (Q, M) matrix of per-query nDCG@10
    updates ``prior`` (what was known before the judgements; every model alike,
    :meth:`~flare_core.choosing.accuracy_posterior.AccuracyPrior.flat`, when None) as labelled texts update
    the classifier's (:func:`~flare_core.choosing.accuracy_posterior.estimate_frame`, the per-query spread
    shrunk towards Jeffreys', so one judged query cannot read as certain). From that one posterior come
    ``estimate``, ``ci_low`` and ``ci_high`` (95%), ``p_best``, ``p_within`` (within ``tolerance_points``
    nDCG@10 points of the best, by default :data:`~flare_core.choosing.probes.DEFAULT_TOLERANCE`), ``gap``
    and ``gap_high`` (points); the model named first (the one named before, ``named_before``, unless the
    judgements favour another enough: :func:`~flare_core.choosing.accuracy_posterior.named_model`), then
    best first. ``diff_sd``: the spread over the queries of the named model's nDCG@10 minus this model's.
    ``recall_at_10`` and ``mrr_at_10`` are their means, beside it. ``attrs``: ``method``, ``n_labels`` (the
    queries), ``tolerance_points``, ``prior`` (in words) and ``more_labels`` (the posterior's forecast of
    the judged queries that would settle it: :func:`~flare_core.choosing.label_forecast.forecast`, in
    steps of :data:`~flare_core.choosing.stopping.QUERY_STEP`; None when even
    :data:`~flare_core.choosing.stopping.MAX_MORE_QUERIES` more would not).
    """
    from flare_core.choosing.probes import DEFAULT_TOLERANCE, SURE
    from flare_core.choosing.stopping import MAX_MORE_QUERIES, QUERY_STEP

    tolerance = DEFAULT_TOLERANCE if tolerance_points is None else float(tolerance_points)
    if len(scores) < 2:
        raise ValueError("comparing models needs the scores of at least two")
    names, queries, tables = _aligned(scores, min_models=2)
    prior = AccuracyPrior.flat(names, SEARCH_LEVEL) if prior is None else prior.reordered(names)
    ndcg = np.stack([tables[m]["ndcg_at_10"].to_numpy(dtype=np.float64) for m in prior.models], axis=1)
    frame = estimate_frame(
        prior, ndcg, tolerance_points=tolerance, chance_level=0.0, seed=seed, named_before=named_before
    )
    at = [prior.models.index(m) for m in frame["model"]]
    paired = ndcg[:, [at[0]]] - ndcg[:, at]
    frame["diff_sd"] = paired.std(axis=0, ddof=1) if ndcg.shape[0] > 1 else np.zeros(len(at))
    for metric in ("recall_at_10", "mrr_at_10"):
        frame[metric] = [float(tables[m][metric].mean()) for m in frame["model"]]
    more = forecast(
        prior, ndcg, tolerance_points=tolerance, sure=SURE, step=QUERY_STEP, most=MAX_MORE_QUERIES, seed=seed
    )
    frame.attrs.update(
        method="mean nDCG@10 over your judged queries (trec_eval's figures, unjudged documents not "
        f"relevant), read with {prior.source}",
        n_labels=len(queries),
        tolerance_points=tolerance,
        prior=prior.source,
        more_labels=more,
    )
    return frame
