"""Load and validate a user corpus (CSV/TSV, Parquet, JSONL) into a :class:`Corpus`.

The loader reads a table (:mod:`flare_core.data.reading`), picks (or checks) the text, label and pair
columns (:mod:`flare_core.data.columns`), drops empty texts,
counts duplicates, optionally samples rows, and fingerprints the kept texts and labels with a
content hash that does not depend on the file format.

Every rejection raises :class:`CorpusError` (a ``ValueError``) whose message says what is wrong and
where (file, column, row or line). Row numbers in messages are 1-based data rows (the header is not
counted); line numbers are 1-based lines of the file. ``Corpus.ids`` are 0-based data-row indices.

Cells are only ever read as strings: nothing is evaluated, unpickled or written while loading.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from flare_core.checks import check_int
from flare_core.data.cells import AUTO, _Auto, choose_columns, label_values, rows_desc, text_values
from flare_core.data.reading import DEFAULT_MAX_BYTES, read_table
from flare_core.errors import CorpusError

__all__ = ["AUTO", "MAX_TEXT_CHARS", "Corpus", "corpus_from_table", "corpus_summary", "load_corpus"]

_HASH_PREFIX = b"flare-corpus/v1\x00"

#: The longest text kept, in characters. A longer text (and a longer pair text) is cut to its first
#: ``MAX_TEXT_CHARS`` characters when the corpus is loaded; ``stats["n_truncated"]`` counts the cut texts
#: and ``stats["truncation_note"]`` says it in words. Transformers read at most 512 tokens and static
#: models at most ``max_length`` words of a text, far below this limit, so the cut changes only models
#: built on whole texts (TF-IDF, doc2vec); it keeps one pasted book or log file from filling memory in
#: every later stage.
MAX_TEXT_CHARS = 100_000


@dataclass(frozen=True, eq=False)
class Corpus:
    """Texts (and optional labels and pairs) kept from one table, in file order.

    ``texts[i]`` came from data row ``ids[i]`` (0-based) of the file; ``labels[i]`` is its label
    as a string. ``pairs`` has columns ``text_a``, ``text_b``, ``score`` (float) indexed by data
    row id, or is ``None``. ``content_hash`` is the SHA-256 of the kept texts and labels.
    """

    texts: list[str]
    ids: list[int]
    labels: list[str] | None
    pairs: pd.DataFrame | None
    text_column: str
    label_column: str | None
    content_hash: str
    source_name: str
    stats: dict

    def __len__(self) -> int:
        return len(self.texts)

    def to_frame(self) -> pd.DataFrame:
        """Columns ``id`` (int), ``text`` (str), ``label`` (str, or None when unlabeled); one row per text."""
        labels = self.labels if self.labels is not None else [None] * len(self.texts)
        return pd.DataFrame({"id": list(self.ids), "text": list(self.texts), "label": list(labels)})


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------------


def load_corpus(
    source: str | os.PathLike | bytes | BinaryIO,
    *,
    text_column: str | None = None,
    label_column: str | None | _Auto = AUTO,
    pair_columns: tuple[str, str, str] | None | _Auto = AUTO,
    drop_duplicates: bool = False,
    max_rows: int | None = None,
    seed: int = 0,
    name: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    min_texts: int = 2,
    max_text_chars: int | None = MAX_TEXT_CHARS,
) -> Corpus:
    """Read ``source`` with :func:`read_table` and validate it into a :class:`Corpus`
    (:func:`corpus_from_table` describes the columns, sampling and checks). With ``max_rows``, a large
    CSV/TSV file is sampled in bounded memory instead (:mod:`flare_core.data.sampling`)."""
    if max_rows is not None:
        corpus = _load_sampled(
            source,
            max_rows=max_rows,
            max_bytes=max_bytes,
            text_column=text_column,
            label_column=label_column,
            pair_columns=pair_columns,
            drop_duplicates=drop_duplicates,
            seed=seed,
            name=name,
            min_texts=min_texts,
            max_text_chars=max_text_chars,
        )
        if corpus is not None:
            return corpus
    frame, info = read_table(source, name=name, max_bytes=max_bytes)
    return corpus_from_table(
        frame,
        info,
        text_column=text_column,
        label_column=label_column,
        pair_columns=pair_columns,
        drop_duplicates=drop_duplicates,
        max_rows=max_rows,
        seed=seed,
        min_texts=min_texts,
        max_text_chars=max_text_chars,
    )


def _load_sampled(
    source: Any, *, min_texts: int, max_text_chars: int | None, **options: Any
) -> Corpus | None:
    """The corpus of a large file sampled in bounded memory (:mod:`flare_core.data.sampling`), with the
    file's row ids and counts; None when the file is to be read whole."""
    from flare_core.data.sampling import sample_large_file

    sampled = sample_large_file(source, **options)
    if sampled is None:
        return None
    text_column, label_column, pair_columns = sampled.columns
    try:
        corpus = corpus_from_table(
            sampled.frame,
            sampled.info,
            text_column=text_column,
            label_column=label_column,
            pair_columns=pair_columns,
            min_texts=min_texts,
            max_text_chars=max_text_chars,
        )
    except CorpusError:
        return None  # its message would number rows of the sample: reading the file whole words it right
    rows = sampled.rows
    pairs = corpus.pairs
    if pairs is not None:
        pairs = pairs.set_axis(pd.Index([int(rows[i]) for i in pairs.index], name=pairs.index.name), axis=0)
    return dataclasses.replace(
        corpus, ids=[int(rows[i]) for i in corpus.ids], pairs=pairs, stats=corpus.stats | sampled.counts
    )


def _cap_pair_texts(pair_frame: pd.DataFrame, max_chars: int | None) -> int:
    """Cut the ``text_a`` and ``text_b`` columns of ``pair_frame`` in place (see :func:`_cap_texts`);
    returns how many texts were cut."""
    n_cut = 0
    for column in ("text_a", "text_b"):
        pair_frame[column], cut = _cap_texts(pair_frame[column].tolist(), max_chars)
        n_cut += cut
    return n_cut


def corpus_from_table(
    frame: pd.DataFrame,
    info: dict[str, Any],
    *,
    text_column: str | None = None,
    label_column: str | None | _Auto = AUTO,
    pair_columns: tuple[str, str, str] | None | _Auto = AUTO,
    drop_duplicates: bool = False,
    max_rows: int | None = None,
    seed: int = 0,
    min_texts: int = 2,
    max_text_chars: int | None = MAX_TEXT_CHARS,
) -> Corpus:
    """Validate a table read by :func:`read_table` (``frame`` and its ``info``) into a :class:`Corpus`.

    ``text_column=None`` and the default ``AUTO`` of ``label_column``/``pair_columns`` detect the
    column with :func:`detect_columns`; ``label_column=None`` (or ``""``) loads without labels and
    ``pair_columns=None`` (or ``()``) ignores pair columns.
    Empty, NaN and whitespace-only texts are dropped and counted; duplicate texts are counted and
    dropped (first occurrence kept) only with ``drop_duplicates``. With ``max_rows``, that many
    texts are sampled without replacement (``numpy.random.default_rng(seed)``), kept in file order.
    A kept row with a missing label is rejected. Kept texts and pair texts longer than
    ``max_text_chars`` characters (``None``: no limit) are cut to their first ``max_text_chars``
    characters, counted in ``stats["n_truncated"]`` and ``stats["n_pair_texts_truncated"]`` and said in
    ``stats["truncation_note"]`` (None when nothing was cut); the content hash is of the cut texts.
    """
    check_int(min_texts, "min_texts", min_value=1, error=CorpusError)
    check_int(max_text_chars, "max_text_chars", min_value=1, allow_none=True, error=CorpusError)
    check_int(max_rows, "max_rows", min_value=1, allow_none=True, error=CorpusError)
    check_int(seed, "seed", min_value=0, error=CorpusError)

    src = f"'{info['source_name']}'"
    text_column, label_column, pairs = choose_columns(frame, src, text_column, label_column, pair_columns)
    raw_texts = text_values(frame[text_column], text_column, src)
    keep, n_empty, n_duplicates = _rows_with_text(raw_texts, drop_duplicates)
    labels_all = _labels_of_rows(frame, label_column, keep, src)
    n_before_sampling = len(keep)
    if max_rows is not None and max_rows < len(keep):
        chosen = np.sort(np.random.default_rng(seed).choice(len(keep), size=max_rows, replace=False))
        keep = [keep[int(j)] for j in chosen]
    if len(keep) < min_texts:
        raise CorpusError(
            f"{src}: only {len(keep)} usable text(s) in column '{text_column}' "
            f"({len(frame)} rows read, {n_empty} empty dropped"
            + (f", {n_duplicates} duplicates dropped" if drop_duplicates and n_duplicates else "")
            + f"); at least {min_texts} are needed"
        )
    _check_different(raw_texts, keep, min(min_texts, 2), src, text_column)

    texts, n_truncated = _cap_texts([raw_texts[i] for i in keep], max_text_chars)  # type: ignore[misc]
    labels = [labels_all[i] for i in keep] if labels_all is not None else None
    pair_frame, n_pairs_dropped = _pairs_frame(frame, pairs, keep, src) if pairs is not None else (None, 0)
    n_pair_texts_truncated = _cap_pair_texts(pair_frame, max_text_chars) if pair_frame is not None else 0
    stats = {
        "n_rows_read": len(frame),
        "n_empty_dropped": n_empty,
        "n_duplicates": n_duplicates,
        "duplicates_dropped": bool(drop_duplicates),
        "n_sampled_out": n_before_sampling - len(keep),
        "n_pairs_dropped": n_pairs_dropped,
        "max_text_chars": max_text_chars,
        "n_truncated": n_truncated,
        "n_pair_texts_truncated": n_pair_texts_truncated,
        "truncation_note": _truncation_note(n_truncated, n_pair_texts_truncated, len(texts), max_text_chars),
        **{key: info[key] for key in ("encoding", "encoding_warning", "delimiter", "format")},
    }
    return Corpus(
        texts=texts,  # type: ignore[arg-type]  # the kept rows all have a text
        ids=list(keep),
        labels=labels,  # type: ignore[arg-type]  # no None left after _labels_of_rows
        pairs=pair_frame,
        text_column=text_column,
        label_column=label_column,
        content_hash=_content_hash(texts, labels),  # type: ignore[arg-type]
        source_name=info["source_name"],
        stats=stats,
    )


def _cap_texts(texts: list[str], max_chars: int | None) -> tuple[list[str], int]:
    """``(texts cut to their first max_chars characters, how many were cut)``; None: no limit."""
    if max_chars is None:
        return texts, 0
    n_cut = sum(len(t) > max_chars for t in texts)
    return ([t[:max_chars] for t in texts] if n_cut else texts), n_cut


def _truncation_note(
    n_texts_cut: int, n_pair_texts_cut: int, n_texts: int, max_chars: int | None
) -> str | None:
    """The cut texts in words, or None when nothing was cut."""
    if not n_texts_cut and not n_pair_texts_cut:
        return None
    parts = []
    if n_texts_cut:
        parts.append(
            f"{n_texts_cut:,} of {n_texts:,} texts" if n_texts_cut > 1 else f"1 of {n_texts:,} texts"
        )
    if n_pair_texts_cut:
        parts.append(f"{n_pair_texts_cut:,} pair text{'s' if n_pair_texts_cut > 1 else ''}")
    verb = "was" if n_texts_cut + n_pair_texts_cut == 1 else "were"
    return (
        f"{' and '.join(parts)} longer than {max_chars:,} characters {verb} cut to the first {max_chars:,} "
        "characters; models read at most a few thousand words of a text"
    )


def _check_different(
    raw_texts: list[str | None], keep: list[int], needed: int, src: str, column: str
) -> None:
    """``CorpusError`` when the kept texts hold fewer than ``needed`` different texts (one text repeated)."""
    distinct = {raw_texts[i] for i in keep}
    if len(distinct) < needed:
        raise CorpusError(
            f"{src}: every one of the {len(keep)} texts in column '{column}' is the same text "
            f"({str(next(iter(distinct)))[:60]!r}): a run compares texts, it needs at least 2 different ones"
        )


def _rows_with_text(raw_texts: list[str | None], drop_duplicates: bool) -> tuple[list[int], int, int]:
    """``(kept row ids, empty rows dropped, duplicate texts)``; duplicates (after the first) are dropped
    only with ``drop_duplicates``."""
    keep = [i for i, t in enumerate(raw_texts) if t is not None]
    n_empty = len(raw_texts) - len(keep)
    seen: set[str] = set()
    unique_keep: list[int] = []
    for i in keep:
        t = raw_texts[i]
        if t not in seen:
            seen.add(t)  # type: ignore[arg-type]
            unique_keep.append(i)
    n_duplicates = len(keep) - len(unique_keep)
    return (unique_keep if drop_duplicates else keep), n_empty, n_duplicates


def _labels_of_rows(
    frame: pd.DataFrame, label_column: str | None, keep: list[int], src: str
) -> list[str | None] | None:
    """Every row's label (None without a label column); refuses kept rows whose label is empty."""
    if label_column is None:
        return None
    labels_all = label_values(frame[label_column])
    missing = [i for i in keep if labels_all[i] is None]
    if missing:
        raise CorpusError(
            f"{src}: label column '{label_column}' is empty on {len(missing)} of {len(keep)} kept rows "
            f"({rows_desc(missing)}); fill those labels, drop the rows, or load without labels "
            "(label_column=None)"
        )
    return labels_all


def _pairs_frame(
    frame: pd.DataFrame, columns: tuple[str, str, str], keep: list[int], src: str
) -> tuple[pd.DataFrame | None, int]:
    a_col, b_col, s_col = columns
    sub = frame.iloc[keep]
    if s_col is None:  # retrieval pairs (query, document): no score
        a = text_values(sub[a_col], a_col, src, keep)
        b = text_values(sub[b_col], b_col, src, keep)
        rows = [
            (i, ta, tb, np.nan)
            for i, ta, tb in zip(keep, a, b, strict=True)
            if ta is not None and tb is not None
        ]
        pairs = pd.DataFrame(rows, columns=["id", "text_a", "text_b", "score"]).set_index("id")
        pairs["score"] = pairs["score"].astype(float)
        return pairs, len(keep) - len(rows)
    scores = pd.to_numeric(sub[s_col], errors="coerce")
    bad = [
        int(i)
        for i, v, s in zip(keep, sub[s_col].tolist(), scores.tolist(), strict=True)
        if pd.notna(v) and not np.isfinite(s)
    ]
    if bad:
        raise CorpusError(f"{src}: score column '{s_col}' is not a number on {rows_desc(bad)}")
    a = text_values(sub[a_col], a_col, src, keep)
    b = text_values(sub[b_col], b_col, src, keep)
    rows = [
        (i, ta, tb, float(s))
        for i, ta, tb, s in zip(keep, a, b, scores.tolist(), strict=True)
        if ta is not None and tb is not None and np.isfinite(s)
    ]
    pairs = pd.DataFrame(rows, columns=["id", "text_a", "text_b", "score"]).set_index("id")
    pairs["score"] = pairs["score"].astype(float)
    return pairs, len(keep) - len(rows)


def _content_hash(texts: list[str], labels: list[str] | None) -> str:
    """SHA-256 hex of the kept texts (and labels), length-prefixed UTF-8, in order."""
    h = hashlib.sha256(_HASH_PREFIX)
    h.update(b"L" if labels is not None else b"U")
    for i, text in enumerate(texts):
        for part in (text,) if labels is None else (text, labels[i]):
            encoded = part.encode("utf-8", "surrogatepass")
            h.update(len(encoded).to_bytes(8, "big"))
            h.update(encoded)
    return h.hexdigest()


def corpus_summary(corpus: Corpus) -> dict:
    """Counts and length statistics: ``n_texts``, ``n_labels``, ``label_counts``, mean/median/max
    characters and words per text, and ``n_truncated`` (texts cut to ``MAX_TEXT_CHARS`` when loaded)."""
    if not isinstance(corpus, Corpus):
        raise CorpusError(f"corpus_summary needs a Corpus, got {type(corpus).__name__}")
    chars = [len(t) for t in corpus.texts]
    words = [len(t.split()) for t in corpus.texts]
    counts = Counter(corpus.labels) if corpus.labels is not None else Counter()
    return {
        "n_texts": len(corpus.texts),
        "n_labels": len(counts),
        "label_counts": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "mean_chars": float(np.mean(chars)) if chars else 0.0,
        "median_chars": float(statistics.median(chars)) if chars else 0.0,
        "max_chars": int(max(chars)) if chars else 0,
        "mean_words": float(np.mean(words)) if words else 0.0,
        "median_words": float(statistics.median(words)) if words else 0.0,
        "max_words": int(max(words)) if words else 0,
        "n_duplicates": int(corpus.stats.get("n_duplicates", 0)),
        "n_truncated": int(corpus.stats.get("n_truncated", 0)),
    }
