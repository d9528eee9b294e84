"""Search judgements: which documents are relevant to which queries, read from the files people keep them in.

The documents are the run's corpus (one text per row, with an id column). The judgements (TREC "qrels")
come in one of these forms:

- a table with columns ``query_id``, ``doc_id``, ``relevance`` (graded: whole numbers, 0 = not relevant),
  and the query texts in a ``query`` column of the same table or in a separate queries table
  (``query_id``, ``query``);
- a table with ``query``, ``doc_id``, ``relevance`` (the query text is its id);
- TREC's own qrels file: no header, four fields a line, ``query_id iteration doc_id relevance``, with the
  query texts in a queries table.

Common spellings of the column names are understood (``qid``, ``query-id``, ``docid``, ``corpus-id``,
``score``, ``grade``, ``_id``, ``text``). :func:`load_judgements` checks everything before anything is
stored: an unknown document, a query without a relevant document or without a text, a judgement given
twice, a grade that is not a whole number, a file that is not UTF-8 each stop it with a message that says
where.

The result is stored with the run as :data:`JUDGEMENTS`: columns ``query_id`` (``q1``, ``q2``, … when the
queries were named by their text), ``query_text``, ``doc_row`` (the document's row in the run's corpus)
and ``relevance``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.data.corpus import Corpus
from flare_core.data.reading import read_table
from flare_core.errors import CorpusError

#: The run's file of judgements.
JUDGEMENTS = "judgements.parquet"

_QUERY_ID = ("query_id", "qid", "query-id", "queryid", "topic", "topic_id")
_DOC_ID = ("doc_id", "docid", "doc-id", "corpus-id", "corpus_id", "docno", "document_id")
_RELEVANCE = ("relevance", "rel", "grade", "score", "label", "judgement", "judgment")
_QUERY_TEXT = ("query", "text", "query_text", "question")
_ANY_ID = ("_id", "id")
_TREC_LINE = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s*$")
#: A file: its path, or its name and bytes (an upload).
Source = str | os.PathLike | tuple[str, bytes]


def _find(columns: Sequence[Any], names: Sequence[str]) -> str | None:
    lowered = {str(c).strip().lower(): str(c) for c in columns}
    return next((lowered[n] for n in names if n in lowered), None)


def _name_and_bytes(source: Source) -> tuple[str, bytes]:
    if isinstance(source, tuple):
        return str(source[0]), bytes(source[1])
    return Path(source).name, Path(source).read_bytes()


def _label(source: Source) -> str:
    return f"'{source[0] if isinstance(source, tuple) else Path(source).name}'"


def _table(source: Source) -> tuple[pd.DataFrame, dict]:
    name, data = _name_and_bytes(source)
    return read_table(data, name=name)


def _read_utf8(source: Source) -> tuple[pd.DataFrame, dict]:
    frame, info = _table(source)
    if info.get("encoding_warning"):
        raise CorpusError(
            f"{_label(source)} is not UTF-8: ids must match exactly, so it is not guessed. Save it as UTF-8. "
            f"({info['encoding_warning']})"
        )
    return frame, info


def _trec_frame(source: Source) -> pd.DataFrame | None:
    """A headerless TREC qrels file as a table, or None when ``source`` is not one."""
    name, data = _name_and_bytes(source)
    if Path(name).suffix.lower() in (".parquet", ".jsonl", ".json"):
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None  # read_table says what is wrong with it
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not _TREC_LINE.match(lines[0]):
        return None
    rows = []
    for number, line in enumerate(lines, start=1):
        match = _TREC_LINE.match(line)
        if match is None:
            raise CorpusError(
                f"{_label(source)} line {number} is not 'query_id iteration doc_id relevance': {line[:80]!r}"
            )
        rows.append((match.group(1), match.group(3), match.group(4)))
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])


def id_column(columns: Sequence[Any]) -> str | None:
    """The column of a documents table that names its documents by default (``doc_id``, ``docid``,
    ``corpus-id``, ``_id``, ``id``, …), or None."""
    return _find(columns, (*_DOC_ID, *_ANY_ID))


def document_ids(
    source: Source, corpus: Corpus, column: str | None = None, *, frame: pd.DataFrame | None = None
) -> list[str]:
    """The id of each of ``corpus``'s texts (in its order), read from the column ``column`` (or
    :func:`id_column`'s) of the documents file ``source`` (its table ``frame`` when already read)."""
    if frame is None:
        frame, _ = _table(source)
    if column is None:
        column = id_column(frame.columns)
        if column is None:
            raise CorpusError(
                f"the documents file {_label(source)} has no id column (doc_id or id) for the judgements to "
                f"name documents by; its columns: {', '.join(map(str, frame.columns))}. Name one with "
                "--doc-id-col."
            )
    elif column not in frame.columns:
        raise CorpusError(
            f"the documents file {_label(source)} has no column {column!r}; its columns: "
            f"{', '.join(map(str, frame.columns))}"
        )
    ids = frame[column]
    missing = ids.isna()
    if missing.any():
        raise CorpusError(
            f"the documents file {_label(source)} has {int(missing.sum())} rows without an id in {column!r} "
            f"(first: data row {int(missing.idxmax()) + 1})"
        )
    ids = ids.astype(str).str.strip()
    repeated = ids[ids.duplicated(keep=False)]
    if not repeated.empty:
        raise CorpusError(
            f"the documents file {_label(source)} has the id {repeated.iloc[0]!r} on "
            f"{int((ids == repeated.iloc[0]).sum())} rows ({column!r} must name each document once)"
        )
    return [ids.iloc[int(row)] for row in corpus.ids]


def load_judgements(
    qrels: Source,
    doc_ids: Sequence[str],
    *,
    queries: Source | None = None,
) -> pd.DataFrame:
    """The judgements of ``qrels`` checked against the documents ``doc_ids`` (the id of each of the run's
    texts, in order; see :func:`document_ids`), with the query texts from ``qrels`` or ``queries``.

    Returns columns ``query_id``, ``query_text``, ``doc_row``, ``relevance`` (int), in the file's order.
    Raises :class:`~flare_core.errors.CorpusError` naming the first problem found.
    """
    label = _label(qrels)
    frame = _trec_frame(qrels)
    if frame is None:
        frame, _ = _read_utf8(qrels)
    q_col = _find(frame.columns, _QUERY_ID)
    text_col = _find(frame.columns, _QUERY_TEXT)
    d_col = _find(frame.columns, _DOC_ID)
    r_col = _find(frame.columns, _RELEVANCE)
    if d_col is None or r_col is None or (q_col is None and text_col is None):
        raise CorpusError(
            f"{label} needs the columns query_id (or query), doc_id and relevance; its columns: "
            f"{', '.join(map(str, frame.columns))}"
        )
    out = pd.DataFrame(
        {
            "query_id": frame[q_col if q_col is not None else text_col],
            "doc_id": frame[d_col],
            "relevance": frame[r_col],
        }
    )
    for column in ("query_id", "doc_id", "relevance"):
        empty = out[column].isna() | (out[column].astype(str).str.strip() == "")
        if empty.any():
            raise CorpusError(f"{label} data row {int(empty.idxmax()) + 1} has no {column}")
    out = out.astype(str).apply(lambda c: c.str.strip())
    out["relevance"] = _grades(out["relevance"], label)
    twice = out.duplicated(["query_id", "doc_id"], keep=False)
    if twice.any():
        first = out[twice].iloc[0]
        rows = (
            out.index[twice & (out["query_id"] == first["query_id"]) & (out["doc_id"] == first["doc_id"])] + 1
        ).tolist()
        raise CorpusError(
            f"{label} judges document {first['doc_id']!r} for query {first['query_id']!r} more than once "
            f"(data rows {', '.join(map(str, rows))}); keep one judgement per query and document"
        )
    position = {doc: row for row, doc in enumerate(doc_ids)}
    unknown = out.loc[~out["doc_id"].isin(position), "doc_id"].unique().tolist()
    if unknown:
        raise CorpusError(
            f"{label} judges {len(unknown)} document{'s' if len(unknown) > 1 else ''} that "
            f"{'are' if len(unknown) > 1 else 'is'} not among the {len(doc_ids):,} documents of the run, "
            f"e.g. {', '.join(repr(d) for d in unknown[:3])}; check the ids (and that no sampling or "
            "filtering dropped those documents)"
        )
    best = out.groupby("query_id", sort=False)["relevance"].max()
    if (best <= 0).any():
        none = best.index[best <= 0].tolist()
        raise CorpusError(
            f"{label}: {len(none)} quer{'ies have' if len(none) > 1 else 'y has'} no relevant document "
            f"(every grade is 0), e.g. {none[0]!r}; a query needs at least one document with a grade above 0"
        )
    out["query_text"] = _query_texts(frame, out, q_col, text_col, queries, label)
    if q_col is None:  # a query named by its text gets an id of its own: texts stay in the text column only
        order = {text: n for n, text in enumerate(out["query_text"].drop_duplicates(), start=1)}
        out["query_id"] = out["query_text"].map(lambda text: f"q{order[text]}")
    out["doc_row"] = out["doc_id"].map(position).astype("int64")
    return out[["query_id", "query_text", "doc_row", "relevance"]].reset_index(drop=True)


def _grades(values: pd.Series, label: str) -> pd.Series:
    numbers = pd.to_numeric(values, errors="coerce")
    bad = numbers.isna() | (numbers < 0) | (numbers != numbers.round())
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise CorpusError(
            f"{label} data row {row + 1} has the relevance {values.iloc[row]!r}: grades are whole numbers "
            "0 or above (0 = not relevant, 1 = relevant, 2 and up = more relevant)"
        )
    return numbers.astype("int64")


def _query_texts(
    frame: pd.DataFrame,
    out: pd.DataFrame,
    q_col: str | None,
    text_col: str | None,
    queries: Source | None,
    label: str,
) -> pd.Series:
    """The text of each judgement's query: its own column, or the queries table's."""
    if q_col is None:  # the query text is its id
        return out["query_id"]
    if queries is None and text_col is not None:
        texts = frame[text_col].fillna("").astype(str).str.strip()
        if (texts == "").any():
            raise CorpusError(
                f"{label} data row {int((texts == '').to_numpy().argmax()) + 1} has no query text"
            )
        pairs = pd.DataFrame({"query_id": out["query_id"], "query": texts}).drop_duplicates()
        _one_text_each(pairs, label)
        return texts
    if queries is None:
        raise CorpusError(
            f"{label} names queries by id only: give their texts in a query column or in a queries file "
            "(--queries, columns query_id and query)"
        )
    table, _ = _read_utf8(queries)
    qid = _find(table.columns, (*_QUERY_ID, *_ANY_ID))
    qtext = _find(table.columns, _QUERY_TEXT)
    if qid is None or qtext is None:
        raise CorpusError(
            f"the queries file {_label(queries)} needs the columns query_id and query; its columns: "
            f"{', '.join(map(str, table.columns))}"
        )
    pairs = pd.DataFrame({"query_id": table[qid].astype(str).str.strip(), "query": table[qtext]})
    pairs = pairs.drop_duplicates()
    _one_text_each(pairs, _label(queries))
    known = pairs.dropna().set_index("query_id")["query"].astype(str).str.strip()
    known = known[known != ""]
    texts = out["query_id"].map(known)
    if texts.isna().any():
        missing = out.loc[texts.isna(), "query_id"].unique().tolist()
        raise CorpusError(
            f"{len(missing)} judged quer{'ies have' if len(missing) > 1 else 'y has'} no text in "
            f"{_label(queries)}, e.g. {missing[0]!r}"
        )
    return texts


def _one_text_each(pairs: pd.DataFrame, label: str) -> None:
    repeated = pairs[pairs["query_id"].duplicated(keep=False)]
    if not repeated.empty:
        raise CorpusError(
            f"{label} gives the query id {repeated['query_id'].iloc[0]!r} two different texts; each query id "
            "needs one text"
        )
