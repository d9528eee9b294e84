"""Label-free scores that read the corpus itself: pseudo-queries cut from its own texts, the consistency of
two halves of each text, and the agreement of the models' neighbourhoods.

- **Pseudo-queries** (the inverse cloze task): one sentence of a text is the query and the rest of that
  text its one relevant document; a text of one sentence is cut into its first and second half (by words,
  or by characters where the writing has no spaces), and a text too short for either is skipped. A fixed,
  seeded sample of at most :data:`SAMPLE` texts gives the pseudo-queries (:func:`pseudo_queries`). Each
  model ranks every text of the corpus for each query, with the sampled text replaced by its rest, so the
  sentence itself is never found; :func:`rank_of_own` gives the rank of the rest, and
  :func:`ndcg_and_mrr` the nDCG@10 and MRR@10 of one relevant document at that rank.
- **Halves** (:func:`halves`): the first half of each sampled text retrieves its own second half among
  the second halves of the sample (and the other way); the score is the MRR of the two directions.
- **Neighbourhood agreement** (:func:`neighbour_agreement`): the share of each text's 10 nearest
  neighbours (cosine) a model shares with each other model, averaged over the texts and the others. From
  the corpus's vectors alone: nothing is embedded again.

Every score is oriented so that higher is better.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flare_core.checks import check_int, check_matrix

#: Pseudo-queries (and halves) drawn per corpus: each one is two more texts for every model to embed.
SAMPLE = 200
#: The fewest words (characters, for writing without spaces) a text needs to be cut in two halves.
MIN_WORDS = 8
MIN_CHARS = 16
#: The rank cut of nDCG and MRR.
K = 10
#: Neighbours compared per text by :func:`neighbour_agreement`.
NEIGHBOURS = 10

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])")
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u0e00-\u0e7f]")


@dataclass(frozen=True)
class PseudoQueries:
    """Pseudo-queries of a corpus: ``queries[i]`` is cut from text ``rows[i]``, whose ``rests[i]`` is the
    rest of it (the one document relevant to the query); ``kinds[i]`` says how (``sentence``, ``half``)."""

    rows: list[int]
    queries: list[str]
    rests: list[str]
    kinds: list[str]


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after ``.``, ``!``, ``?`` followed by a space, and after the full
    stops of Chinese and Japanese), stripped, empty ones dropped."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def split_halves(text: str) -> tuple[str, str] | None:
    """``text`` cut into its first and second half: by words, or by characters when most of its letters
    are written without spaces (Chinese, Japanese, Thai); None when it is too short to cut."""
    text = text.strip()
    words = text.split()
    if len(_UNSPACED.findall(text)) > len(text) / 3:
        if len(text) < MIN_CHARS:
            return None
        middle = len(text) // 2
        return text[:middle].strip(), text[middle:].strip()
    if len(words) < MIN_WORDS:
        return None
    middle = len(words) // 2
    return " ".join(words[:middle]), " ".join(words[middle:])


def _cut(text: str, rng: np.random.Generator) -> tuple[str, str, str] | None:
    """(query, rest, kind) of one text: a random sentence and the others, or its two halves."""
    parts = sentences(text)
    if len(parts) >= 2:
        pick = int(rng.integers(len(parts)))
        return parts[pick], " ".join(parts[:pick] + parts[pick + 1 :]), "sentence"
    halves = split_halves(text)
    return None if halves is None else (halves[0], halves[1], "half")


def pseudo_queries(texts: Sequence[str], *, sample: int = SAMPLE, seed: int = 0) -> PseudoQueries:
    """At most ``sample`` pseudo-queries from ``texts`` (see the module docstring): the texts are visited
    in a seeded random order and each one that can be cut gives one, so the same texts and seed give the
    same pseudo-queries."""
    check_int(sample, "sample", min_value=1)
    rng = np.random.default_rng(seed)
    rows, queries, rests, kinds = [], [], [], []
    for row in rng.permutation(len(texts)):
        cut = _cut(str(texts[row]), rng)
        if cut is None:
            continue
        rows.append(int(row))
        queries.append(cut[0])
        rests.append(cut[1])
        kinds.append(cut[2])
        if len(rows) == sample:
            break
    return PseudoQueries(rows, queries, rests, kinds)


def halves(
    texts: Sequence[str], *, sample: int = SAMPLE, seed: int = 0
) -> tuple[list[int], list[str], list[str]]:
    """At most ``sample`` texts of ``texts`` (seeded order) long enough to cut in two: their rows, first
    halves and second halves."""
    check_int(sample, "sample", min_value=1)
    rows, firsts, seconds = [], [], []
    for row in np.random.default_rng(seed).permutation(len(texts)):
        cut = split_halves(str(texts[row]))
        if cut is None:
            continue
        rows.append(int(row))
        firsts.append(cut[0])
        seconds.append(cut[1])
        if len(rows) == sample:
            break
    return rows, firsts, seconds


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def rank_of_own(
    queries: np.ndarray, rests: np.ndarray, documents: np.ndarray | None = None, rows: Sequence[int] = ()
) -> np.ndarray:
    """The rank (1 = first) at which each query (rows of ``queries`` (Q, d)) finds its own rest (the same
    row of ``rests`` (Q, d)) by cosine. The other documents are every row of ``documents`` (N, d) but
    the query's own text ``rows[i]`` (``documents`` None: the other rests). A tie counts against the rest."""
    q, r = _unit(check_matrix(queries, "queries")), _unit(check_matrix(rests, "rests"))
    if q.shape != r.shape:
        raise ValueError(f"queries {q.shape} and rests {r.shape} differ in shape")
    own = np.einsum("ij,ij->i", q, r)
    if documents is None:
        others = q @ r.T
        np.fill_diagonal(others, -np.inf)
    else:
        d = _unit(check_matrix(documents, "documents"))
        if d.shape[1] != q.shape[1] or len(rows) != len(q):
            raise ValueError("documents must have the queries' width and rows one text per query")
        others = q @ d.T
        others[np.arange(len(q)), np.asarray(rows, dtype=int)] = -np.inf
    return 1 + (others >= own[:, None] - 1e-12).sum(axis=1)


def ndcg_and_mrr(ranks: np.ndarray, k: int = K) -> tuple[float, float]:
    """Mean nDCG@k and MRR@k of queries with one relevant document each, found at ``ranks`` (1 = first):
    1 / log2(rank + 1) and 1 / rank within the first ``k``, 0 beyond; NaN without a query."""
    ranks = np.asarray(ranks, dtype=float)
    if ranks.size == 0:
        return float("nan"), float("nan")
    inside = ranks <= k
    ndcg = np.where(inside, 1.0 / np.log2(ranks + 1.0), 0.0)
    mrr = np.where(inside, 1.0 / ranks, 0.0)
    return float(ndcg.mean()), float(mrr.mean())


def query_similarities(
    queries: np.ndarray, rests: np.ndarray, documents: np.ndarray, rows: Sequence[int]
) -> np.ndarray:
    """The cosine of each query (Q, d) with every text of the corpus (N, d), its own text ``rows[i]``
    replaced by its rest: (Q, N)."""
    q, r, d = _unit(queries), _unit(rests), _unit(documents)
    sims = q @ d.T
    sims[np.arange(len(q)), np.asarray(rows, dtype=int)] = np.einsum("ij,ij->i", q, r)
    return sims


def fused_ndcg(
    similarities: Mapping[str, np.ndarray], k: int = K, constant: float = 60.0
) -> dict[str, float]:
    """Each model's nDCG@k against the candidates' fused ranking: every model ranks the N texts for each of
    the Q queries (``similarities[m]`` (Q, N)); reciprocal rank fusion (the sum of 1 / (``constant`` +
    rank)) orders them, and its first ``k`` are the relevant texts of the query (binary gains)."""
    ranks = {}
    for model, sims in similarities.items():
        order = np.argsort(-np.asarray(sims, dtype=np.float64), axis=1, kind="stable")
        place = np.empty_like(order)
        np.put_along_axis(
            place, order, np.arange(1, order.shape[1] + 1)[None, :].repeat(len(order), 0), axis=1
        )
        ranks[model] = place
    fused = sum(1.0 / (constant + place) for place in ranks.values())
    width = min(k, fused.shape[1])
    relevant = np.argsort(-fused, axis=1, kind="stable")[:, :width]
    ideal = float((1.0 / np.log2(np.arange(2, width + 2))).sum())
    out = {}
    for model, place in ranks.items():
        found = np.take_along_axis(place, relevant, axis=1)  # where the model puts each relevant text
        gains = np.where(found <= width, 1.0 / np.log2(found + 1.0), 0.0)
        out[model] = float(gains.sum(axis=1).mean() / ideal)
    return out


def halves_score(firsts: np.ndarray, seconds: np.ndarray, k: int = K) -> float:
    """How well each first half finds its own second half among the sample's second halves, and each second
    half its first: the mean MRR@k of the two directions."""
    there = ndcg_and_mrr(rank_of_own(firsts, seconds), k)[1]
    back = ndcg_and_mrr(rank_of_own(seconds, firsts), k)[1]
    return (there + back) / 2.0


def neighbour_sets(vectors: np.ndarray, k: int = NEIGHBOURS, block: int = 1024) -> np.ndarray:
    """The ``k`` nearest other rows (cosine) of each row of ``vectors`` (N, d): (N, min(k, N - 1)) ints,
    unordered within a row."""
    x = _unit(check_matrix(vectors, "vectors"))
    k = min(k, len(x) - 1)
    out = np.empty((len(x), k), dtype=np.int64)
    for start in range(0, len(x), block):
        sims = x[start : start + block] @ x.T
        sims[np.arange(len(sims)), np.arange(start, start + len(sims))] = -np.inf
        out[start : start + len(sims)] = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    return out


def neighbour_agreement(embeddings: Mapping[str, np.ndarray], k: int = NEIGHBOURS) -> dict[str, float]:
    """Each model's mean share of a text's ``k`` nearest neighbours that another model shares, averaged
    over the texts and the other models (every model embeds the same N texts; at least two models)."""
    if len(embeddings) < 2:
        raise ValueError("neighbour agreement compares at least two models")
    sets = {m: neighbour_sets(v, k) for m, v in embeddings.items()}
    n, width = next(iter(sets.values())).shape
    masks = {}
    for model, rows in sets.items():
        if rows.shape != (n, width):
            raise ValueError(f"{model} embeds {rows.shape[0]} texts, not {n}")
        mask = np.zeros((n, n), dtype=bool)
        mask[np.repeat(np.arange(n), width), rows.ravel()] = True
        masks[model] = mask
    names = list(masks)
    shared = np.zeros((len(names), len(names)))
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            shared[i, j] = shared[j, i] = (masks[a] & masks[names[j]]).sum() / (n * width)
    return {m: float(shared[i].sum() / (len(names) - 1)) for i, m in enumerate(names)}
