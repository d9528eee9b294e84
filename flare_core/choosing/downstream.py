"""Supervised oracle: downstream scores of one embedding model where the corpus has labels or pairs.

Metric names follow MTEB: ``accuracy`` and ``f1`` (macro) for classification, ``v_measure`` for
clustering, ``cosine_spearman`` / ``cosine_pearson`` for STS, ``ndcg_at_10``, ``map_at_10`` and
``recall_at_10`` for retrieval. Retrieval is scored by trec_eval's own code (``pytrec_eval``, as MTEB
scores it) through :func:`flare_core.choosing.retrieval_eval.ranking_scores`, the one nDCG of the
product: linear gains with a ``log2(rank + 1)`` discount for nDCG, a document is relevant when its
(whole) grade is > 0, AP@k divides by the number of relevant documents, queries without a relevant
document are skipped.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from scipy.stats import ConstantInputWarning, pearsonr
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import v_measure_score
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import normalize

from flare_core.analyses.correlate import spearman
from flare_core.checks import check_int, check_labels, check_matrix
from flare_core.choosing.retrieval_eval import ranking_scores, top_k_rows

Qrels = Mapping[int, Mapping[int, float]]
#: The supervised check trains and tests on a class only when it has this many texts ...
MIN_CLASS_MEMBERS = 2
#: ... and needs this many such classes.
MIN_CLASSES = 2


# ----------------------------------------------------------------------------------------------------
# validation


def _as_vector(values: Any, n: int, name: str) -> np.ndarray:
    """Validate a finite float vector of shape ``(n,)``."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, expected {n}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has {int(np.sum(~np.isfinite(arr)))} non-finite entries")
    return arr


def _nonzero_rows(x: np.ndarray, name: str) -> None:
    zero = np.linalg.norm(x, axis=1) == 0
    if zero.any():
        raise ValueError(
            f"{name} has {int(zero.sum())} all-zero rows; cosine similarity is undefined for them"
        )


def _as_qrels(qrels: Any, n_queries: int, n_docs: int) -> dict[int, dict[int, int]]:
    """Normalise ``{query: {doc: grade}}`` or an iterable of ``(query, doc)`` / ``(query, doc, grade)``."""
    out: dict[int, dict[int, float]] = {}
    if isinstance(qrels, Mapping):
        items = ((q, d, g) for q, docs in qrels.items() for d, g in _doc_items(docs, q))
    elif isinstance(qrels, Iterable) and not isinstance(qrels, str | bytes):
        items = (_pair_item(p) for p in qrels)
    else:
        raise ValueError("qrels must be a dict {query: {doc: grade}} or an iterable of (query, doc[, grade])")
    for q, d, g in items:
        q, d = _index(q, n_queries, "query"), _index(d, n_docs, "document")
        grade = float(g)
        if not np.isfinite(grade) or grade < 0 or grade != int(grade):
            raise ValueError(
                f"relevance grade for query {q}, document {d} must be a whole number >= 0; got {g!r}"
            )
        out.setdefault(q, {})[d] = int(grade)
    return out


def _doc_items(docs: Any, q: Any) -> Iterable[tuple[Any, Any]]:
    if not isinstance(docs, Mapping):
        raise ValueError(f"qrels[{q!r}] must be a dict {{doc: grade}}; got {type(docs).__name__}")
    return docs.items()


def _pair_item(p: Any) -> tuple[Any, Any, Any]:
    try:
        p = tuple(p)
    except TypeError as exc:
        raise ValueError(f"each qrels pair must be (query, doc) or (query, doc, grade); got {p!r}") from exc
    if len(p) == 2:
        return p[0], p[1], 1
    if len(p) == 3:
        return p
    raise ValueError(f"each qrels pair must be (query, doc) or (query, doc, grade); got {p!r}")


def _index(value: Any, size: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{what} ids in qrels must be integer row indices; got {value!r}")
    if not 0 <= int(value) < size:
        raise ValueError(f"{what} index {value} is out of range for {size} rows")
    return int(value)


# ----------------------------------------------------------------------------------------------------
# computation


# ----------------------------------------------------------------------------------------------------
# public API


def classification(x: Any, labels: Any, folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Cross-validated logistic-regression classification of ``labels`` (N,) from ``x`` (N, d).

    ``LogisticRegression(max_iter=1000)`` under ``StratifiedKFold(folds, shuffle=True, random_state=seed)``;
    scores are means over folds. Classes with a single member cannot be both trained on and tested, so
    they are dropped; when the smallest remaining class has fewer than ``folds`` members the number of
    folds is reduced to that size.

    Returns ``{"accuracy", "f1" (macro), "accuracy_std", "f1_std", "n_folds", "n_folds_requested",
    "folds_reduced", "n_samples", "n_classes", "dropped_classes"}``.

    Raises ``ValueError`` for malformed inputs, ``folds < 2``, or fewer than 2 classes with 2+ members.
    """
    xs, ys, cv, info = _classification_folds(x, labels, folds, seed)
    res = cross_validate(
        LogisticRegression(max_iter=1000), xs, ys, cv=cv, scoring={"accuracy": "accuracy", "f1": "f1_macro"}
    )
    return {
        "accuracy": float(np.mean(res["test_accuracy"])),
        "f1": float(np.mean(res["test_f1"])),
        "accuracy_std": float(np.std(res["test_accuracy"])),
        "f1_std": float(np.std(res["test_f1"])),
        **info,
    }


def knn_accuracy(x: Any, labels: Any, k: int = 10, folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Cross-validated accuracy of a ``k``-nearest-neighbour vote (cosine distance) on ``x`` (N, d).

    The same folds as :func:`classification` (stratified, shuffled with ``seed``; single-member classes
    dropped). Returns ``{"knn_accuracy", "knn_accuracy_std", "k", **fold information}``.
    """
    k = check_int(k, "k", min_value=1)
    xs, ys, cv, info = _classification_folds(x, labels, folds, seed)
    smallest_train = len(ys) - int(np.ceil(len(ys) / info["n_folds"]))
    neighbours = min(k, smallest_train)
    res = cross_validate(KNeighborsClassifier(n_neighbors=neighbours, metric="cosine"), xs, ys, cv=cv)
    return {
        "knn_accuracy": float(np.mean(res["test_score"])),
        "knn_accuracy_std": float(np.std(res["test_score"])),
        "k": neighbours,
        **info,
    }


def _classification_folds(
    x: Any, labels: Any, folds: int, seed: int
) -> tuple[np.ndarray, np.ndarray, StratifiedKFold, dict[str, Any]]:
    """Checked rows and label codes (classes with one member dropped), the folds, and what was done."""
    arr = check_matrix(x, "x", min_rows=2)
    folds = check_int(folds, "folds", min_value=2)
    raw = np.asarray(labels)
    codes = check_labels(raw, arr.shape[0])
    counts = np.bincount(codes)
    keep_classes = np.flatnonzero(counts >= MIN_CLASS_MEMBERS)
    if keep_classes.shape[0] < MIN_CLASSES:
        raise ValueError(
            f"classification needs at least {MIN_CLASSES} classes with {MIN_CLASS_MEMBERS} or more members; "
            f"got counts {counts.tolist()}"
        )
    dropped = sorted({str(v) for v in raw[np.isin(codes, np.flatnonzero(counts < MIN_CLASS_MEMBERS))]})
    mask = np.isin(codes, keep_classes)
    n_folds = int(min(folds, counts[keep_classes].min()))
    info = {
        "n_folds": n_folds,
        "n_folds_requested": folds,
        "folds_reduced": n_folds < folds,
        "n_samples": int(mask.sum()),
        "n_classes": int(keep_classes.shape[0]),
        "dropped_classes": dropped,
    }
    return arr[mask], codes[mask], StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed), info


def clustering(x: Any, labels: Any, seed: int = 0) -> dict[str, Any]:
    """V-measure of ``KMeans(k = #labels, n_init=10, random_state=seed)`` on ``x`` (N, d) vs ``labels`` (N,).

    Returns ``{"v_measure", "n_clusters"}``. Raises ``ValueError`` for malformed inputs or when the
    number of distinct labels is not between 2 and N.
    """
    arr = check_matrix(x, "x", min_rows=2)
    codes = check_labels(labels, arr.shape[0])
    k = int(np.unique(codes).shape[0])
    if not 2 <= k <= arr.shape[0]:
        raise ValueError(f"clustering needs between 2 and N = {arr.shape[0]} distinct labels; got {k}")
    pred = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(arr)
    return {"v_measure": float(v_measure_score(codes, pred)), "n_clusters": k}


def sts(emb_a: Any, emb_b: Any, gold: Any) -> dict[str, Any]:
    """Semantic similarity: cosine of each pair ``(emb_a[i], emb_b[i])`` against ``gold[i]``.

    ``emb_a`` and ``emb_b`` have shape (N, d), ``gold`` shape (N,). Returns
    ``{"cosine_spearman", "cosine_pearson", "n_pairs"}``; a correlation is NaN when the cosines or
    the gold scores are constant.

    Raises ``ValueError`` for mismatched shapes, fewer than 2 pairs, non-finite values, all-zero rows.
    """
    a = check_matrix(emb_a, "emb_a", min_rows=2)
    b = check_matrix(emb_b, "emb_b", min_rows=2)
    if a.shape != b.shape:
        raise ValueError(f"emb_a and emb_b must have the same shape; got {a.shape} and {b.shape}")
    g = _as_vector(gold, a.shape[0], "gold")
    _nonzero_rows(a, "emb_a")
    _nonzero_rows(b, "emb_b")
    cos = np.einsum("ij,ij->i", normalize(a), normalize(b))
    if np.ptp(cos) == 0 or np.ptp(g) == 0:
        rho = r = float("nan")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConstantInputWarning)
            rho = spearman(cos, g)
            r = float(pearsonr(cos, g).statistic)
    return {"cosine_spearman": rho, "cosine_pearson": r, "n_pairs": int(a.shape[0])}


def retrieval(query_emb: Any, doc_emb: Any, qrels: Any, k: int = 10) -> dict[str, Any]:
    """Cosine retrieval of documents ``doc_emb`` (D, d) for queries ``query_emb`` (Q, d).

    ``qrels``: ``{query_row: {doc_row: grade}}`` or an iterable of ``(query_row, doc_row)`` (grade 1)
    or ``(query_row, doc_row, grade)``; whole grades >= 0, relevant when > 0. Documents are ranked by
    cosine (ties by lower row) and scored by trec_eval (:func:`~flare_core.choosing.retrieval_eval.
    ranking_scores`); metrics are averaged over queries with at least one relevant document:
    ``ndcg_at_{k}`` (linear gain, log2 discount), ``map_at_{k}`` (sum of precision at relevant ranks
    <= k over the number of relevant documents), ``recall_at_{k}``, plus ``n_queries`` and ``k``.

    Raises ``ValueError`` for malformed inputs, out-of-range rows, negative or fractional grades,
    ``k < 1``, or no query with a relevant document.
    """
    q = check_matrix(query_emb, "query_emb")
    d = check_matrix(doc_emb, "doc_emb")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"query_emb has {q.shape[1]} dimensions but doc_emb has {d.shape[1]}")
    k = check_int(k, "k", min_value=1)
    _nonzero_rows(q, "query_emb")
    _nonzero_rows(d, "doc_emb")
    rel = _as_qrels(qrels, q.shape[0], d.shape[0])
    rel = {qi: {di: g for di, g in docs.items() if g > 0} for qi, docs in rel.items()}
    rel = {qi: docs for qi, docs in rel.items() if docs}
    if not rel:
        raise ValueError("qrels has no query with a relevant document (grade > 0)")
    queries = sorted(rel)
    tops = top_k_rows(q[queries], d, k)
    per_query = ranking_scores(
        {str(qi): top for qi, top in zip(queries, tops, strict=True)}, {str(qi): rel[qi] for qi in queries}, k
    )
    means = {m: float(per_query[m].mean()) for m in (f"ndcg_at_{k}", f"map_at_{k}", f"recall_at_{k}")}
    return {**means, "n_queries": len(queries), "k": k}


def downstream_report(
    x: Any = None,
    labels: Any = None,
    pairs: tuple[Any, Any] | None = None,
    *,
    gold: Any = None,
    qrels: Any = None,
    folds: int = 5,
    k: int = 10,
    seed: int = 0,
) -> dict[str, Any]:
    """Every downstream task the data allows, for one model.

    - ``x`` (N, d) with ``labels`` (N,): classification and clustering.
    - ``pairs = (emb_a, emb_b)``, both (M, d), with ``gold`` (M,): STS.
    - ``pairs`` without ``gold``: retrieval of ``emb_b`` rows by ``emb_a`` rows, with ``qrels`` when
      given, else row ``i`` of ``emb_a`` is relevant to row ``i`` of ``emb_b`` only.

    Returns ``{"tasks": [...], "<task>": {task dict}, "scores": {metric: value}}`` where ``scores``
    holds the headline metrics of every task run (``accuracy``, ``f1``, ``v_measure``,
    ``cosine_spearman``, ``cosine_pearson``, ``ndcg_at_{k}``, ``map_at_{k}``, ``recall_at_{k}``).

    Raises ``ValueError`` when nothing can be computed or when inputs are malformed.
    """
    if labels is not None and x is None:
        raise ValueError("labels were given without the embeddings x they label")
    if gold is not None and pairs is None:
        raise ValueError("gold scores were given without pairs=(emb_a, emb_b)")
    if qrels is not None and pairs is None:
        raise ValueError("qrels were given without pairs=(query_emb, doc_emb)")
    if gold is not None and qrels is not None:
        raise ValueError("give either gold (STS) or qrels (retrieval) for the pairs, not both")
    if pairs is not None and (not isinstance(pairs, tuple | list) or len(pairs) != 2):
        raise ValueError("pairs must be a tuple (emb_a, emb_b)")
    report: dict[str, Any] = {"tasks": [], "scores": {}}

    def _add(task: str, result: dict[str, Any], metrics: list[str]) -> None:
        report["tasks"].append(task)
        report[task] = result
        report["scores"].update({m: result[m] for m in metrics})

    if labels is not None:
        _add("classification", classification(x, labels, folds=folds, seed=seed), ["accuracy", "f1"])
        _add("clustering", clustering(x, labels, seed=seed), ["v_measure"])
    if pairs is not None:
        emb_a, emb_b = pairs
        if gold is not None:
            _add("sts", sts(emb_a, emb_b, gold), ["cosine_spearman", "cosine_pearson"])
        else:
            if qrels is None:
                n_a, n_b = len(emb_a), len(emb_b)
                if n_a != n_b:
                    raise ValueError(
                        f"aligned retrieval needs as many queries as documents; got {n_a} and {n_b}"
                    )
                qrels = {i: {i: 1} for i in range(n_a)}
            res = retrieval(emb_a, emb_b, qrels, k=k)
            _add("retrieval", res, [f"ndcg_at_{k}", f"map_at_{k}", f"recall_at_{k}"])
    if not report["tasks"]:
        raise ValueError("nothing to evaluate: give labels (with x) or pairs=(emb_a, emb_b)")
    return report
