"""A few search judgements decide a label-free run: a person gives a few queries (typed, or picked from
queries the product drafts from the corpus), judges the documents the candidates find for each, and the
answer ranks the candidates by nDCG@10 on those judgements.

For each query every candidate embeds it with its own encoder and finds its top :data:`POOL_DEPTH`
documents by cosine (one matrix product); their union is the query's *pool*, shown as one list in a
seeded shuffled order that does not say which model found which document. A person marks each pooled
document relevant (1) or not (0). A document nobody judged counts as not relevant, as in TREC pooling, so
each candidate's top 10 is judged in full once its pool is. The queries' embeddings are stored with the
run when a query is added, so an update after a judgement embeds nothing
(``bench/speed/few_judgement_speed.py``).

Stored with the run, under its labels lock (:func:`flare_core.answer.labels.labels_lock`); Parquet and
NumPy files only, so that a bundle carries them and a bundle without texts drops the query texts::

    labels/search_queries.parquet     query_id (q1, q2, …), query_text, source ("typed", "suggested",
                                      "file"), known_item_row (the document a suggested query was drafted
                                      from, its first sentence; -1 for others), at
    labels/search_pools.parquet       query_id, position (the shuffled order shown), doc_row, rank (the
                                      best place any candidate gave it, 1 to 10; 10 in older runs)
    labels/search_judgements.parquet  query_id, doc_row, relevance (0 or 1), order, batch, at, source
    labels/search_query_embeddings/<model>.npy   each candidate's embedding of every query, in the order
                                      of search_queries.parquet

Judgements are never rewritten: a document judged twice for a query keeps its latest judgement. Every
figure of the answer comes from one estimate,
:func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates`, and its stopping advice,
:func:`~flare_core.choosing.stopping.search_stopping_advice`
(:func:`flare_core.answer.from_judgements.few_search_block`).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.from_labels import candidate_ids
from flare_core.answer.labels import labels_lock
from flare_core.choosing.retrieval_eval import K, top_k_rows
from flare_core.store.runs import Run, safe_name, utc_now

QUERIES = ("labels", "search_queries.parquet")
POOLS = ("labels", "search_pools.parquet")
JUDGED = ("labels", "search_judgements.parquet")
QUERY_EMBEDDINGS = ("labels", "search_query_embeddings")
#: Each candidate's documents pooled per query (the rank cut of nDCG@10).
POOL_DEPTH = K
#: The most documents a query asks a person to read, unless they ask for all of its pool: each candidate's
#: top d documents, d as deep as keeps their union within this (at least each one's first).
POOL_SHOWN = 15
#: The longest query kept (longer ones are refused with a message).
MAX_QUERY_CHARS = 1000
#: The words of a document's first sentence a drafted (known-item) query keeps, at most; and at least.
KNOWN_ITEM_WORDS, MIN_KNOWN_ITEM_WORDS = 12, 3
#: The metric of the answer, as the comparison names it.
METRIC = "ndcg@10"

_QUERY_COLUMNS = ["query_id", "query_text", "source", "known_item_row", "at"]
_POOL_COLUMNS = ["query_id", "position", "doc_row", "rank"]
_JUDGED_COLUMNS = ["query_id", "doc_row", "relevance", "order", "batch", "at", "source"]
#: A function that embeds texts with one candidate: (model id, texts) -> (n, d).
Encode = Callable[[str, Sequence[str]], np.ndarray]


class CannotEmbedQueries(ValueError):
    """No candidate of the run can embed a query (precomputed embeddings only, or no model to be had)."""


@dataclass(frozen=True)
class SearchJudgements:
    """A run's queries, their pools and the judgements given, as read (empty frames when none)."""

    queries: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_QUERY_COLUMNS))
    pools: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_POOL_COLUMNS))
    entries: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_JUDGED_COLUMNS))

    def latest(self) -> dict[str, dict[int, int]]:
        """Query id → {document row → its latest relevance}, queries in the order first judged."""
        out: dict[str, dict[int, int]] = {}
        for query, row, grade in self.entries[["query_id", "doc_row", "relevance"]].itertuples(index=False):
            out.setdefault(str(query), {})[int(row)] = int(grade)
        return out

    def pool(self, query_id: str) -> list[int]:
        """The pooled document rows of ``query_id``, in the shuffled order shown."""
        rows = self.pools[self.pools["query_id"] == query_id].sort_values("position")
        return [int(r) for r in rows["doc_row"]]

    def shown(self, query_id: str, every: bool = False) -> list[int]:
        """The documents of ``query_id`` a person is asked to judge, in the shuffled order: each candidate's
        top d, d the deepest whose union holds at most :data:`POOL_SHOWN` documents (``every``: the whole
        pool)."""
        rows = self.pools[self.pools["query_id"] == query_id].sort_values("position")
        ranks = rows["rank"].astype(int).to_numpy()
        depth = max([d for d in range(1, POOL_DEPTH + 1) if (ranks <= d).sum() <= POOL_SHOWN], default=1)
        return [int(r) for r, rank in zip(rows["doc_row"], ranks, strict=True) if every or rank <= depth]

    @property
    def ids(self) -> list[str]:
        return [str(q) for q in self.queries["query_id"]]

    def text(self, query_id: str) -> str:
        texts = self.queries.loc[self.queries["query_id"] == query_id, "query_text"]
        return str(texts.iloc[0]) if len(texts) and isinstance(texts.iloc[0], str) else ""

    @property
    def judged(self) -> list[str]:
        """Queries with at least one judgement."""
        return list(self.latest())

    @property
    def counted(self) -> list[str]:
        """Judged queries with at least one relevant document: those the answer counts."""
        return [q for q, docs in self.latest().items() if any(g > 0 for g in docs.values())]

    @property
    def no_relevant(self) -> list[str]:
        """Judged queries with no document marked relevant (kept, but not counted until one is)."""
        return [q for q, docs in self.latest().items() if not any(g > 0 for g in docs.values())]

    def pending(self) -> list[str]:
        """Queries with a document to judge (:meth:`shown`) not judged yet, oldest first."""
        latest = self.latest()
        return [q for q in self.ids if set(self.shown(q)) - set(latest.get(q, {}))]

    @property
    def batches(self) -> int:
        return int(self.entries["batch"].max()) if len(self.entries) else 0


def load_search_judgements(run: Run) -> SearchJudgements:
    """The run's queries, pools and judgements (an empty :class:`SearchJudgements` when none were given)."""
    if not run.has(*QUERIES):
        return SearchJudgements()
    queries = run.load_frame(*QUERIES)
    pools = run.load_frame(*POOLS) if run.has(*POOLS) else SearchJudgements().pools
    entries = run.load_frame(*JUDGED) if run.has(*JUDGED) else SearchJudgements().entries
    if "query_text" not in queries.columns:  # a bundle without texts: the queries are known by id only
        queries = queries.assign(query_text=None)
    if "rank" not in pools.columns:  # pooled before the ranks were kept: the whole pool is shown
        pools = pools.assign(rank=POOL_DEPTH)
    return SearchJudgements(queries[_QUERY_COLUMNS], pools[_POOL_COLUMNS], entries[_JUDGED_COLUMNS])


def has_search_judgements(run: Run) -> bool:
    """Whether a person gave the run search queries (judged or not)."""
    return run.has(*QUERIES)


# -- embedding the queries -----------------------------------------------------------------------------------

_ENCODERS: dict[tuple[str, str], Any] = {}
_MAX_ENCODERS = 16


def run_encoder(run: Run) -> Encode:
    """The run's own candidates embedding texts, as the run embedded its documents (its device and batch
    size; a corpus-fitted model fitted on its corpus), each model loaded once per process. Raises
    :class:`CannotEmbedQueries` for a model of precomputed embeddings (no encoder to call)."""
    from flare_core import encoders
    from flare_core.store.manifest import model_kind

    params = run.manifest.get("params", {})

    def encode(model_id: str, texts: Sequence[str]) -> np.ndarray:
        if model_kind(run, model_id) == "precomputed":
            raise CannotEmbedQueries(f"{model_id} is a set of uploaded embeddings: it cannot embed a query")
        key = (str(run.path), model_id)
        if key not in _ENCODERS:
            if len(_ENCODERS) >= _MAX_ENCODERS:
                _ENCODERS.pop(next(iter(_ENCODERS)))
            _ENCODERS[key] = encoders.load_encoder(
                model_id, device=params.get("device"), corpus_texts=run.corpus_frame()["text"].tolist()
            )
        batch_size = int(params.get("batch_size") or 32)
        embedded = encoders.encode_queries(_ENCODERS[key], list(texts), batch_size=batch_size)
        return np.asarray(embedded, dtype=np.float32)

    return encode


def _embedding_parts(model_id: str) -> tuple[str, ...]:
    return (*QUERY_EMBEDDINGS, f"{safe_name(model_id)}.npy")


def stored_query_embeddings(run: Run, n_queries: int) -> dict[str, np.ndarray]:
    """Each candidate's stored embedding of the run's first ``n_queries`` queries (Q, d); a candidate
    that could not embed them is left out."""
    out = {}
    for model in candidate_ids(run):
        parts = _embedding_parts(model)
        if run.has(*parts):
            array = run.load_array(*parts)
            if array.ndim == 2 and array.shape[0] >= n_queries:
                out[model] = np.asarray(array[:n_queries], dtype=np.float64)
    return out


def _embed_new(run: Run, texts: list[str], have: int, encode: Encode) -> dict[str, np.ndarray]:
    """Each candidate's embeddings of its ``have`` stored queries and of ``texts`` (have + n, d); a model
    that cannot embed them (precomputed, or not to be had here) is left out."""
    from flare_core.errors import ModelUnavailable

    stored = stored_query_embeddings(run, have) if have else {}
    out = {}
    for model in candidate_ids(run):
        if have and model not in stored:
            continue  # it could not embed the queries before: its answers would be partial
        try:
            new = np.asarray(encode(model, texts), dtype=np.float64)
        except (CannotEmbedQueries, ModelUnavailable):
            continue
        if new.ndim != 2 or new.shape[0] != len(texts):
            raise ValueError(f"{model} returned {new.shape} embeddings for {len(texts)} queries")
        out[model] = np.concatenate([stored[model], new]) if have else new
    if len(out) < 2:
        raise CannotEmbedQueries(
            "judging search results needs two candidates that can embed a query; this run has "
            f"{len(out)} (uploaded embeddings cannot embed new texts)"
        )
    return out


# -- adding queries ------------------------------------------------------------------------------------------


def clean_query(text: Any) -> str:
    """A query as kept: whitespace collapsed. Refuses an empty or overlong query with a message."""
    cleaned = " ".join(str(text).split()) if text is not None and not pd.isna(text) else ""
    if not cleaned:
        raise ValueError("a query cannot be empty: type what you would search for")
    if len(cleaned) > MAX_QUERY_CHARS:
        raise ValueError(f"a query is at most {MAX_QUERY_CHARS} characters; {cleaned[:30]!r}… is longer")
    return cleaned


def _shuffled(rows: Iterable[int], seed: int, query_id: str) -> list[int]:
    rng = np.random.default_rng([seed, zlib.crc32(query_id.encode())])
    rows = sorted(set(int(r) for r in rows))
    return [rows[i] for i in rng.permutation(len(rows))]


def add_queries(
    run: Run,
    texts: Sequence[str],
    *,
    source: str = "typed",
    known_items: Sequence[int | None] | None = None,
    encode: Encode | None = None,
) -> list[str]:
    """Add queries to the run and pool their documents; returns their ids, in the order of ``texts``.

    Each candidate embeds the new queries (``encode``: :func:`run_encoder` by default) and its top
    :data:`POOL_DEPTH` documents of each are pooled, in a shuffled order seeded by the run's seed and the
    query id. A query asked before keeps its id (nothing is added for it). ``known_items``: for a query
    drafted from a document, that document's row. Everything is checked before anything is written."""
    cleaned = [clean_query(t) for t in texts]
    items = list(known_items) if known_items is not None else [None] * len(cleaned)
    if len(items) != len(cleaned):
        raise ValueError(f"{len(items)} known items given for {len(cleaned)} queries")
    n_texts = int(run.manifest["corpus"]["n_texts"])
    for row in items:
        if row is not None and not 0 <= int(row) < n_texts:
            raise ValueError(f"row {int(row):,} is not in this run: its corpus has {n_texts:,} texts")
    encode = encode or run_encoder(run)
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    with labels_lock(run):
        current = load_search_judgements(run)
        asked = {
            str(t): str(q)
            for q, t in zip(current.queries["query_id"], current.queries["query_text"], strict=True)
            if isinstance(t, str)
        }
        new = [t for t in dict.fromkeys(cleaned) if t not in asked]
        if new:
            have = len(current.queries)
            embeddings = _embed_new(run, new, have, encode)
            ids = [f"q{have + i + 1}" for i in range(len(new))]
            pools = []
            for model, emb in embeddings.items():
                pools.append(top_k_rows(emb[have:], run.load_embeddings(model), POOL_DEPTH))
            now = utc_now()
            query_rows, pool_rows = [], []
            for i, (query_id, text) in enumerate(zip(ids, new, strict=True)):
                row = items[cleaned.index(text)]
                query_rows.append([query_id, text, source, -1 if row is None else int(row), now])
                rank = _best_ranks([p[i] for p in pools])
                shuffled = _shuffled(rank, seed, query_id)
                pool_rows += [[query_id, pos, r, rank[r]] for pos, r in enumerate(shuffled)]
            queries = pd.concat([current.queries, pd.DataFrame(query_rows, columns=_QUERY_COLUMNS)])
            pool = pd.concat([current.pools, pd.DataFrame(pool_rows, columns=_POOL_COLUMNS)])
            for model, emb in embeddings.items():
                run.save_array(emb.astype(np.float32), *_embedding_parts(model))
            types = {"position": "int64", "doc_row": "int64", "rank": "int64"}
            run.save_frame(pool.astype(types).reset_index(drop=True), *POOLS)
            run.save_frame(queries.astype({"known_item_row": "int64"}).reset_index(drop=True), *QUERIES)
            asked.update(zip(new, ids, strict=True))
    return [asked[t] for t in cleaned]


def _best_ranks(tops: list[np.ndarray]) -> dict[int, int]:
    """Each pooled document → the best place (1 = first) any candidate's top list gave it."""
    rank: dict[int, int] = {}
    for top in tops:
        for place, row in enumerate(top, start=1):
            rank[int(row)] = min(rank.get(int(row), place), place)
    return rank


def pooled_documents(
    run: Run, query_ids: Sequence[str], judged: SearchJudgements | None = None, every: bool = False
) -> pd.DataFrame:
    """The documents of ``query_ids`` to judge (:meth:`SearchJudgements.shown`; ``every``: the whole pool),
    one row per document in the shuffled order: ``query_id``, ``query``, ``doc_row``, ``text``,
    ``relevant`` (the latest judgement, or blank)."""
    judged = judged if judged is not None else load_search_judgements(run)
    texts = run.corpus_frame()["text"].astype(str).to_numpy()
    latest = judged.latest()
    rows = []
    for query_id in query_ids:
        for doc in judged.shown(query_id, every):
            grade = latest.get(query_id, {}).get(doc)
            rows.append(
                [query_id, judged.text(query_id), doc, texts[doc], "" if grade is None else str(grade)]
            )
    return pd.DataFrame(rows, columns=["query_id", "query", "doc_row", "text", "relevant"])


# -- judgements ----------------------------------------------------------------------------------------------


def _relevance(value: Any, query_id: str, row: int) -> int:
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if number not in (0.0, 1.0) or isinstance(value, bool):
        raise ValueError(
            f"query {query_id}, document row {row}: relevant is 1 (relevant) or 0 (not relevant), got "
            f"{value!r}; no judgement was saved"
        )
    return int(number)


def add_judgements(
    run: Run, judgements: Iterable[tuple[str, Any, Any]], *, source: str = "page"
) -> SearchJudgements:
    """Add a batch of judgements ``(query id, document row, relevant 0 or 1)``; returns the new set.

    The whole batch is checked before anything is written: an unknown query, a row that is not a whole
    number, a document that is not among the query's pooled documents (or not in the corpus), a relevance
    that is not 0 or 1, a document judged both ways in one batch. A batch that changes nothing is not
    recorded again."""
    n_texts = int(run.manifest["corpus"]["n_texts"])
    with labels_lock(run):
        current = load_search_judgements(run)
        given: dict[tuple[str, int], int] = {}
        for query, row, value in judgements:
            query_id = str(query).strip()
            if query_id not in current.ids:
                raise ValueError(
                    f"query {query_id!r} is not one of this run's queries "
                    f"({', '.join(current.ids) or 'none yet'}); no judgement was saved"
                )
            number = _row(row)
            if not 0 <= number < n_texts:
                raise ValueError(
                    f"query {query_id}: document row {number:,} is not in this run (its corpus has "
                    f"{n_texts:,} texts); no judgement was saved"
                )
            if number not in current.pool(query_id):
                raise ValueError(
                    f"query {query_id}: document row {number:,} is not among the documents pooled for it; "
                    "judge the documents listed for the query); no judgement was saved"
                )
            grade = _relevance(value, query_id, number)
            if given.get((query_id, number), grade) != grade:
                raise ValueError(
                    f"query {query_id}: document row {number:,} is judged both relevant and not relevant; "
                    "no judgement was saved"
                )
            given[(query_id, number)] = grade
        latest = current.latest()
        if all(latest.get(q, {}).get(r) == g for (q, r), g in given.items()):
            return current  # the same batch saved again: nothing new
        batch, order, now = current.batches + 1, len(current.entries), utc_now()
        rows = [[q, r, g, order + i + 1, batch, now, source] for i, ((q, r), g) in enumerate(given.items())]
        entries = pd.concat([current.entries, pd.DataFrame(rows, columns=_JUDGED_COLUMNS)], ignore_index=True)
        entries = entries.astype(
            {"doc_row": "int64", "relevance": "int64", "order": "int64", "batch": "int64"}
        )
        run.save_frame(entries, *JUDGED)
        return SearchJudgements(current.queries, current.pools, entries)


def _row(value: Any) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"-?\d+(\.0+)?", text):
        raise ValueError(f"document row {value!r} is not a whole row number; no judgement was saved")
    return int(float(text))


def read_judgements_file(
    data: bytes, *, name: str, judged: SearchJudgements, texts: Sequence[str]
) -> list[tuple[str, int, int]]:
    """``(query id, document row, relevant)`` of a judgements file as ``flare label --next-queries`` writes
    it (columns ``query_id``, ``doc_row``, ``relevant``; ``query`` and ``text`` checked when present;
    rows with a blank ``relevant`` skipped). Read like a corpus upload (nothing executed or unpickled);
    refused with a message, before anything is saved, when it is not UTF-8, lacks a column, shows a query
    or document text that is not this run's, or gives one query id two texts."""
    from flare_core.data.reading import read_table
    from flare_core.errors import CorpusError

    try:
        frame, info = read_table(data, name=name, max_bytes=64 * 2**20)
    except CorpusError as exc:
        raise ValueError(f"{name} could not be read as a judgements file: {exc}") from exc
    if info.get("encoding") not in ("utf-8", "utf-8-sig", "parquet", None):
        raise ValueError(
            f"{name} is not UTF-8 text (it reads only as {info['encoding']}), so a query could be misread: "
            "save the file as UTF-8 and read it again; no judgement was saved"
        )
    columns = {str(c).strip().lower(): c for c in frame.columns}
    aliases = {"doc_row": ("doc_row", "row"), "relevant": ("relevant", "relevance")}
    found = {"query_id": columns.get("query_id")}
    found.update({k: next((columns[a] for a in names if a in columns), None) for k, names in aliases.items()})
    missing = [k for k, v in found.items() if v is None]
    if missing:
        raise ValueError(
            f"{name} has no column {missing[0]!r}: a judgements file needs the columns query_id, doc_row and "
            f"relevant (it has {', '.join(map(str, frame.columns)) or 'none'}); no judgement was saved"
        )
    blank = frame[found["relevant"]].isna() | (frame[found["relevant"]].astype(str).str.strip() == "")
    kept = frame[~blank]
    if "text" in columns:
        _check_texts(kept[columns["text"]], kept[found["doc_row"]], texts, name)
    if "query" in columns:
        seen: dict[str, str] = {}
        for query_id, query in zip(
            frame[found["query_id"]].astype(str), frame[columns["query"]], strict=True
        ):
            shown = " ".join(str(query).split()) if not pd.isna(query) else ""
            if seen.setdefault(query_id, shown) != shown:
                raise ValueError(
                    f"{name} gives query id {query_id!r} two different queries ({seen[query_id]!r} and "
                    f"{shown!r}): each query needs its own id; no judgement was saved"
                )
            stored = judged.text(query_id) if query_id in judged.ids else ""
            if stored and shown and shown != stored:
                raise ValueError(
                    f"{name} is not a judgements file of this run: its query {query_id} reads {shown!r}, "
                    f"this run's {query_id} is {stored!r}; no judgement was saved"
                )
    return [
        (str(q).strip(), _row(r), _relevance(v, str(q), -1 if pd.isna(r) else r))
        for q, r, v in zip(
            kept[found["query_id"]], kept[found["doc_row"]], kept[found["relevant"]], strict=True
        )
    ]


def _check_texts(shown: pd.Series, rows: pd.Series, texts: Sequence[str], name: str) -> None:
    """Refuse a judgements file whose ``text`` cells are not the run's texts of their rows."""
    from flare_core.store.export import neutralised

    def same(cell: object, text: str) -> bool:
        return " ".join(str(cell).split()) in {
            " ".join(text.split()),
            " ".join(str(neutralised(text)).split()),
        }

    for cell, row in zip(shown, rows, strict=True):
        try:
            number = _row(row)
        except ValueError:
            continue  # refused later, with its own message
        if 0 <= number < len(texts) and not pd.isna(cell) and not same(cell, texts[number]):
            raise ValueError(
                f"{name} is not a judgements file of this run: the text of document row {number:,} differs "
                "from this run's text there. Judge the file `flare label RUN --next-queries` wrote for this "
                "run; no judgement was saved"
            )
