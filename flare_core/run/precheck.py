"""Checks of a person's inputs before a run is created, one verdict per field of the New run form.

Each check runs the same validation the run itself runs (:func:`~flare_core.data.corpus.corpus_from_table`
for the columns, :func:`~flare_core.encoders.load_precomputed` for embeddings files, the supervised
check's class rule for labels), so a field passed here is never refused after Start, and a field refused
here would have failed the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flare_core.data.corpus import Corpus, corpus_from_table
from flare_core.data.judgements import document_ids, id_column, load_judgements
from flare_core.encoders import check_model_ids, load_precomputed
from flare_core.errors import CorpusError
from flare_core.run.create import FieldCheck, check_embedding_names, check_labels_for_run, check_texts_for_run

__all__ = [
    "CorpusPrecheck",
    "FieldCheck",
    "check_embedding_names",
    "check_labels_for_run",
    "check_texts_for_run",
    "id_column",
    "precheck_corpus",
    "precheck_embeddings",
    "precheck_judgements",
    "precheck_model_ids",
]


@dataclass(frozen=True)
class CorpusPrecheck:
    """The verdicts on the text, label and pair columns, and the corpus a run would get (None when a
    column is refused)."""

    text: FieldCheck
    label: FieldCheck | None
    pairs: FieldCheck | None
    corpus: Corpus | None

    @property
    def blocks(self) -> bool:
        return any(c is not None and c.blocks for c in (self.text, self.label, self.pairs))


def precheck_model_ids(model_ids: Sequence[str]) -> FieldCheck:
    """The verdict on model ids typed by hand: an error naming each unknown id and its close matches
    (the same check a run's parameters get), else ok."""
    try:
        check_model_ids(list(model_ids))
    except ValueError as exc:
        return FieldCheck("error", str(exc))
    return FieldCheck("ok", f"{len(model_ids)} model id(s) known")


def precheck_corpus(
    frame: pd.DataFrame,
    info: Mapping[str, Any],
    *,
    text_column: str,
    label_column: str | None = None,
    pair_columns: tuple[str, ...] | None = None,
    max_rows: int | None = None,
    seed: int = 0,
) -> CorpusPrecheck:
    """Check the chosen columns of a table read by :func:`~flare_core.data.reading.read_table`.

    The text column first (alone), then the label column on the texts kept, then the pair columns; a
    refused column stops the checks after it (they are ``None``). ``corpus`` is what
    :func:`~flare_core.data.corpus.load_corpus` gives for the same choices.
    """
    options = {"text_column": text_column, "max_rows": max_rows, "seed": seed}
    try:
        texts_only = corpus_from_table(frame, dict(info), label_column=None, pair_columns=None, **options)
    except CorpusError as exc:
        return CorpusPrecheck(FieldCheck("error", str(exc)), None, None, None)
    too_few = check_texts_for_run(texts_only.texts)  # the run's own minimum, before any work
    if too_few is not None:
        return CorpusPrecheck(too_few, None, None, None)
    text = FieldCheck("ok", _texts_sentence(texts_only))
    corpus = texts_only
    label = None
    if label_column is not None:
        try:
            corpus = corpus_from_table(
                frame, dict(info), label_column=label_column, pair_columns=None, **options
            )
        except CorpusError as exc:
            return CorpusPrecheck(text, FieldCheck("error", str(exc)), None, None)
        label = check_labels_for_run(corpus.labels or [], column=label_column, texts=corpus.texts)
    pairs = None
    if pair_columns:
        try:
            corpus = corpus_from_table(
                frame, dict(info), label_column=label_column, pair_columns=tuple(pair_columns), **options
            )
        except CorpusError as exc:
            return CorpusPrecheck(text, label, FieldCheck("error", str(exc)), None)
        pairs = FieldCheck("ok", f"{0 if corpus.pairs is None else len(corpus.pairs):,} pairs")
    blocked = label is not None and label.blocks
    return CorpusPrecheck(text, label, pairs, None if blocked else corpus)


def _texts_sentence(corpus: Corpus) -> str:
    stats = corpus.stats
    notes = []
    if stats.get("n_empty_dropped"):
        notes.append(f"{stats['n_empty_dropped']:,} empty rows skipped")
    if stats.get("n_duplicates"):
        notes.append(f"{stats['n_duplicates']:,} repeated texts")
    if stats.get("n_sampled_out"):
        notes.append(f"a seeded sample of {len(corpus):,} of {len(corpus) + stats['n_sampled_out']:,}")
    return f"{len(corpus):,} texts to analyse" + (f" ({'; '.join(notes)})" if notes else "")


def precheck_embeddings(
    data: bytes, *, name: str, n_rows: int | None
) -> tuple[FieldCheck, np.ndarray | None]:
    """Load an embeddings file as the run will (:func:`~flare_core.encoders.load_precomputed`: ``.npy``
    without pickles, or Parquet with numeric columns or one vector column) and check its rows against
    the corpus's ``n_rows`` texts. Without a corpus (``n_rows`` None) only the file itself is checked."""
    try:
        array = load_precomputed(data, n_rows=n_rows, name=name)
    except ValueError as exc:
        return FieldCheck("error", str(exc)), None
    return FieldCheck("ok", f"{array.shape[0]:,} rows × {array.shape[1]:,} dimensions"), array


def precheck_judgements(
    frame: pd.DataFrame,
    corpus: Corpus,
    *,
    doc_id_column: str,
    qrels: tuple[str, bytes],
    queries: tuple[str, bytes] | None = None,
    pair_columns: Any = None,
    source_name: str = "corpus",
) -> tuple[FieldCheck, pd.DataFrame | None]:
    """Uploaded search judgements (``(name, bytes)`` of the judgements and queries files) checked against
    ``corpus``, read from the table ``frame`` with the document ids in ``doc_id_column``: the check to show,
    and the judgements a run would store (None when refused; see
    :func:`~flare_core.data.judgements.load_judgements`)."""
    if pair_columns is not None:
        return FieldCheck("error", "Use either the pair columns or a judgements file, not both."), None
    try:
        doc_ids = document_ids((source_name, b""), corpus, doc_id_column, frame=frame)
        judged = load_judgements(qrels, doc_ids, queries=queries)
    except CorpusError as exc:
        return FieldCheck("error", str(exc)), None
    words = f"{len(judged):,} judgements of {judged['query_id'].nunique():,} queries"
    return FieldCheck("ok", f"{words}: the answer ranks the models by nDCG@10 over them."), judged
