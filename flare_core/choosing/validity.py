"""The arithmetic of the validity benchmark: a supervised oracle on stored embeddings, the label-free
baselines computed the same way for every model, and how well each label-free score orders the models.

Everything here reads embeddings, labels and scores; nothing trains a density. The label-free
baselines are computed without labels (the silhouette on k-means clusters) so that a run on labelled
data is judged as if it had none. Each score is oriented so that higher means "predicted better":
the uniformity loss is negated (lower is better for it), the others are used as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import correlation_table, spearman
from flare_core.analyses.geometry import effective_rank, isoscore, silhouette, uniformity
from flare_core.checks import check_int
from flare_core.choosing.downstream import classification, clustering, knn_accuracy

#: The label-free baselines, with the sign that makes "higher is better".
BASELINES = {"uniformity": -1.0, "isoscore": 1.0, "effective_rank": 1.0, "silhouette": 1.0, "dim": 1.0}


def oracle_scores(
    embeddings: Mapping[str, np.ndarray],
    *,
    labels: Sequence[str] | None = None,
    pairs: pd.DataFrame | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """What the labels say of each model: one row per model (the index).

    With ``labels`` (N,): ``accuracy`` (5-fold logistic regression) and ``knn_accuracy`` (10 nearest
    neighbours, cosine), on the same seeded folds, and ``v_measure`` (k-means with as many clusters as
    classes, seeded: how well the texts group by themselves). With ``pairs`` (columns ``i``, ``j``, ``score``:
    row positions and a human similarity): ``sts_spearman``, the Spearman correlation of the cosine of each
    pair with its score. ``embeddings[name]`` is (N, d).
    """
    if (labels is None) == (pairs is None):
        raise ValueError("give either labels (classification) or pairs (similarity), not both or neither")
    rows = {}
    for name, x in embeddings.items():
        x = np.asarray(x, dtype=np.float64)
        if labels is not None:
            probe = classification(x, labels, seed=seed)
            knn = knn_accuracy(x, labels, seed=seed)["knn_accuracy"]
            grouping = clustering(x, labels, seed=seed)["v_measure"]
            rows[name] = {"accuracy": probe["accuracy"], "knn_accuracy": knn, "v_measure": grouping}
        else:
            unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
            i, j = pairs["i"].to_numpy(), pairs["j"].to_numpy()
            cosine = (unit[i] * unit[j]).sum(axis=1)
            rows[name] = {"sts_spearman": spearman(cosine, pairs["score"].to_numpy(dtype=float))}
    return pd.DataFrame.from_dict(rows, orient="index")


def judgement_map(judgements: pd.DataFrame) -> tuple[dict[str, dict[int, int]], dict[str, int]]:
    """Search judgements (columns ``query_id``, ``query_text``, ``doc_row``, ``relevance``) as
    :func:`~flare_core.choosing.retrieval_eval.per_query_scores` reads them: query id → {document row:
    grade}, and query id → the query's row among the distinct queries (in order of first appearance)."""
    order = judgements["query_id"].astype(str).drop_duplicates().tolist()
    rows = {query: n for n, query in enumerate(order)}
    graded: dict[str, dict[int, int]] = {query: {} for query in order}
    for query, doc, grade in judgements[["query_id", "doc_row", "relevance"]].itertuples(index=False):
        graded[str(query)][int(doc)] = int(grade)
    return graded, rows


def retrieval_oracle(
    query_embeddings: Mapping[str, np.ndarray],
    doc_embeddings: Mapping[str, np.ndarray],
    judgements: pd.DataFrame,
) -> pd.DataFrame:
    """What search judgements say of each model: one row per model (the index) with the means over the
    queries of ``ndcg_at_10``, ``recall_at_10`` and ``mrr_at_10`` (trec_eval's figures, see
    :mod:`flare_core.choosing.retrieval_eval`), each model ranking its own embeddings of the documents
    (``doc_embeddings[m]``, (D, d)) by cosine with its own embeddings of the queries
    (``query_embeddings[m]``, (Q, d), one row per distinct query of ``judgements`` in order of first
    appearance)."""
    from flare_core.choosing.retrieval_eval import METRICS, per_query_scores

    graded, rows = judgement_map(judgements)
    out = {}
    for name, queries in query_embeddings.items():
        scores = per_query_scores(np.asarray(queries), np.asarray(doc_embeddings[name]), graded, rows)
        out[name] = {metric: float(scores[metric].mean()) for metric in METRICS}
    return pd.DataFrame.from_dict(out, orient="index")


def baseline_scores(
    embeddings: Mapping[str, np.ndarray], *, n_clusters: int = 8, seed: int = 0
) -> pd.DataFrame:
    """The label-free geometric baselines of each model (index), oriented so higher is better.

    Uniformity is computed on the rows that are not all zero (a static model gives the zero vector
    to a text without a known word); the silhouette on ``n_clusters`` seeded k-means clusters.
    """
    check_int(n_clusters, "n_clusters", min_value=2)
    rows = {}
    for name, x in embeddings.items():
        x = np.asarray(x, dtype=np.float64)
        nonzero = x[np.linalg.norm(x, axis=1) > 0]
        rows[name] = {
            "uniformity": -uniformity(nonzero, seed=seed),
            "isoscore": isoscore(x),
            "effective_rank": effective_rank(x),
            "silhouette": silhouette(x, n_clusters=n_clusters, seed=seed),
            "dim": float(x.shape[1]),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def agreement(
    label_free: pd.DataFrame, oracle: pd.Series, models: Sequence[str], seed: int = 0
) -> pd.DataFrame:
    """How well each label-free column orders ``models`` like ``oracle``: one row per column with
    ``spearman``, ``kendall``, the bootstrap interval of the Spearman correlation and ``n_models``."""
    models = list(models)
    table = correlation_table(label_free.loc[models], oracle.loc[models].to_frame("oracle"), seed=seed)
    return table.rename(
        columns={
            "label_free": "score",
            "spearman_rho": "spearman",
            "kendall_tau": "kendall",
            "spearman_ci_low": "ci_low",
            "spearman_ci_high": "ci_high",
        }
    )[["score", "spearman", "ci_low", "ci_high", "kendall", "n_models"]]


def regret_points(oracle: pd.Series, pick: str | None, models: Sequence[str]) -> float:
    """Points lost (100 × oracle units) by using ``pick`` instead of the oracle's best of ``models``."""
    if pick is None:
        return float("nan")
    values = oracle.loc[list(models)]
    return float(100.0 * (values.max() - oracle.loc[pick]))
