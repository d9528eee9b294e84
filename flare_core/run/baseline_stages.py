"""The stages that need no training: label-free geometry, 2-D maps and the supervised oracle."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from flare_core.answer.search_labels import QUERY_SCORES
from flare_core.choosing.retrieval_eval import METRICS, per_query_scores
from flare_core.compute import Executor, LocalExecutor, Outcome
from flare_core.compute.scheduler import Task, Unit, run_units
from flare_core.data.judgements import JUDGEMENTS
from flare_core.run.params import RunParams
from flare_core.store.manifest import model_kind, record_worker
from flare_core.store.runs import Run, safe_name


def geometry_stage(run: Run, ok: list[str], labels, params: RunParams, report) -> None:
    from flare_core.analyses.geometry import geometry_report

    rows = []
    for index, model_id in enumerate(ok):
        report("geometry", index, len(ok), f"geometry of {model_id}")
        x = run.load_embeddings(model_id)
        rows.append({"model": model_id, **geometry_report(x, labels=labels, seed=params.seed)})
    run.save_frame(pd.DataFrame(rows), "geometry.parquet")
    report("geometry", len(ok), len(ok), "geometry done")


@dataclass(frozen=True)
class MapUnit(Unit):
    """Draw one model's 2-D map."""

    model: str


def maps_stage(run: Run, ok: list[str], params: RunParams, report, executor: Executor | None = None) -> None:
    """One :class:`MapUnit` per model whose map is not stored yet, on ``executor`` (the run's pool of worker
    processes when it has one: the maps side by side, one per core; else here, one after another)."""
    todo = [m for m in ok if not run.has(*_map_parts(m))]
    handler = _MapHandler(run, params, report, total=len(ok), done=len(ok) - len(todo))
    ex = executor or LocalExecutor()
    try:
        run_units(ex, [MapUnit(m) for m in todo], handler, poll=0.5 if ex.remote else None)
    finally:
        if executor is None:
            ex.close()
    report("maps", len(ok), len(ok), "maps done")


def _map_parts(model_id: str) -> tuple[str, str]:
    return ("maps", f"{safe_name(model_id)}.parquet")


class _MapHandler:
    """Runs :class:`MapUnit` tasks and stores each map in the run; a map that fails fails the stage."""

    def __init__(self, run: Run, params: RunParams, report, *, total: int, done: int) -> None:
        self.run, self.params, self.report = run, params, report
        self.total, self.done = total, done

    def pending(self, unit: MapUnit) -> MapUnit:
        return unit

    def task(self, unit: MapUnit) -> Task:
        from flare_core.analyses.maps import embedding_map

        self.report("maps", self.done, self.total, f"UMAP of {unit.model}")
        x = self.run.load_embeddings(unit.model)
        return Task(
            functools.partial(embedding_map, max_points=self.params.map_points, seed=self.params.seed), (x,)
        )

    def finish(self, unit: MapUnit, outcome: Outcome) -> None:
        record_worker(self.run, "maps", unit.model, outcome.worker, outcome.seconds, outcome.ok)
        if not outcome.ok:
            raise outcome.error
        self.run.save_frame(outcome.value, *_map_parts(unit.model))
        self.done += 1

    def check_stop(self) -> None:
        self.run.check_cancelled()


def downstream_stage(run: Run, ok: list[str], labels, params: RunParams, report) -> None:
    from flare_core.choosing.downstream import downstream_report

    pairs = run.load_frame("pairs.parquet") if run.has("pairs.parquet") else None
    judged = run.load_frame(JUDGEMENTS) if run.has(JUDGEMENTS) else None
    rows, cosines, per_query = [], {}, []
    for index, model_id in enumerate(ok):
        report("downstream", index, len(ok), f"supervised oracle for {model_id}")
        x = run.load_embeddings(model_id)
        pair_embeddings = _pair_embeddings(run, model_id, pairs, params) if pairs is not None else None
        means: dict[str, float] = {}  # the mean of each per-query score, as the answer reads them
        scores = _judged_scores(run, model_id, x, judged, params) if judged is not None else None
        if scores is not None:
            per_query.append(scores.assign(model=model_id))
            means = {m: float(scores[m].mean()) for m in METRICS}
            if labels is None:
                rows.append({"model": model_id, **means})
                continue
        if labels is None and pair_embeddings is None:
            continue
        gold = qrels = None
        if pair_embeddings is not None:
            if pairs["score"].notna().any():
                gold = pairs["score"].to_numpy(dtype=float)
                cosines[model_id] = _cosines(*pair_embeddings)
            else:  # retrieval: rank the distinct documents for each query; its own row's document is relevant
                documents, doc_index = np.unique(pairs["text_b"].to_numpy(dtype=object), return_inverse=True)
                first_row = {d: int(np.flatnonzero(doc_index == d)[0]) for d in range(len(documents))}
                pair_embeddings = (
                    pair_embeddings[0],
                    pair_embeddings[1][[first_row[d] for d in range(len(documents))]],
                )
                qrels = {q: {int(doc_index[q]): 1} for q in range(len(pairs))}
                scores = _pair_query_scores(pairs, doc_index, *pair_embeddings)
                per_query.append(scores.assign(model=model_id))
                means = {m: float(scores[m].mean()) for m in METRICS}
        result = downstream_report(
            x if labels is not None else None,
            labels=labels,
            pairs=pair_embeddings,
            gold=gold,
            qrels=qrels,
            seed=params.seed,
        )
        rows.append({"model": model_id, **result["scores"], **means})
    if rows:
        run.save_frame(pd.DataFrame(rows), "downstream.parquet")
    if cosines:  # each model's cosine of every scored pair: the answer compares the models on them
        run.save_frame(pd.DataFrame(cosines), *PAIR_COSINES)
    if (
        per_query
    ):  # each model's nDCG@10, recall@10 and MRR@10 on every judged query: the answer compares them
        run.save_frame(pd.concat(per_query, ignore_index=True)[["model", "query", *METRICS]], *QUERY_SCORES)
    report("downstream", len(ok), len(ok), "downstream done")


#: Each model's cosine of every scored pair (one column per model, one row per pair of pairs.parquet).
PAIR_COSINES = ("labels", "pair_cosines.parquet")


def _pair_query_scores(
    pairs: pd.DataFrame, doc_index: np.ndarray, query_emb: np.ndarray, doc_emb: np.ndarray
) -> pd.DataFrame:
    """Per-query scores of retrieval pairs: each distinct query text is one query, its rows' documents
    (``doc_index``: each row's document among the distinct ones, rows of ``doc_emb``) are relevant."""
    queries = pairs["text_a"].astype(str).to_numpy()
    number: dict[str, str] = {}  # each distinct query's number: the scores are stored without its text
    judgements: dict[str, dict[int, int]] = {}
    first: dict[str, int] = {}
    for row, (query, doc) in enumerate(zip(queries, doc_index, strict=True)):
        key = number.setdefault(query, str(len(number)))
        judgements.setdefault(key, {})[int(doc)] = 1
        first.setdefault(key, row)
    return per_query_scores(query_emb, doc_emb, judgements, first)


def _judged_scores(
    run: Run, model_id: str, doc_emb: np.ndarray, judged: pd.DataFrame, params: RunParams
) -> pd.DataFrame | None:
    """Per-query scores of the run's judgements: the model embeds the queries and ranks the corpus's texts
    (``doc_emb``, its stored embeddings); None for precomputed embeddings (no encoder to embed queries)."""
    from flare_core import encoders

    if model_kind(run, model_id) == "precomputed":
        return None
    queries = judged.drop_duplicates("query_id")
    encoder = encoders.load_encoder(
        model_id, device=params.device, corpus_texts=run.corpus_frame()["text"].tolist()
    )
    query_emb = encoders.encode_queries(
        encoder, queries["query_text"].astype(str).tolist(), batch_size=params.batch_size
    )
    number = {str(q): str(i) for i, q in enumerate(queries["query_id"])}  # the scores name queries by number
    judgements: dict[str, dict[int, int]] = {}
    for query, row, grade in judged[["query_id", "doc_row", "relevance"]].itertuples(index=False):
        judgements.setdefault(number[str(query)], {})[int(row)] = int(grade)
    return per_query_scores(query_emb, doc_emb, judgements, {n: int(n) for n in number.values()})


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each row pair of ``a`` and ``b`` (P, d) -> (P,); 0 for an all-zero row."""
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms > 0, (a * b).sum(axis=1) / np.maximum(norms, 1e-12), 0.0)


def _pair_embeddings(run: Run, model_id: str, pairs: pd.DataFrame, params: RunParams):
    """(emb_a, emb_b) of the pair columns (an STS pair, or a search query and its document, the query
    embedded as a query), or None for precomputed models (no encoder to call)."""
    from flare_core import encoders

    if model_kind(run, model_id) == "precomputed":
        return None
    encoder = encoders.load_encoder(
        model_id, device=params.device, corpus_texts=run.corpus_frame()["text"].tolist()
    )
    retrieval = pairs["score"].isna().all()  # query,document rows: the first text is a search query
    texts_a = pairs["text_a"].tolist()
    if retrieval:
        a = encoders.encode_queries(encoder, texts_a, batch_size=params.batch_size)
    else:
        a = encoder.encode(texts_a, batch_size=params.batch_size)
    b = encoder.encode(pairs["text_b"].tolist(), batch_size=params.batch_size)
    return (a, b)
