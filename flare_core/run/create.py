"""Creating a run: the corpus, the parameters, the versions and the seeds stored as a queued run."""

from __future__ import annotations

import dataclasses
import os
import platform
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Literal

import numpy as np
import pandas as pd

from flare_core.choosing.downstream import MIN_CLASS_MEMBERS, MIN_CLASSES
from flare_core.data.corpus import Corpus
from flare_core.data.judgements import JUDGEMENTS
from flare_core.errors import CorpusError
from flare_core.run.params import RunParams, check_stored_params
from flare_core.store.runs import Run, RunStore

_VERSIONED = (
    "flare-studio",
    "torch",
    "transformers",
    "sentence-transformers",
    "nflows",
    "numpy",
    "scipy",
    "scikit-learn",
    "pandas",
    "pyarrow",
    "networkx",
    "umap-learn",
    "streamlit",
    "ray",
    "pytrec-eval-terrier",
)


def versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape the numbers."""
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def registry_role(model_id: str) -> str:
    """The role a listed model takes in a run: the registry's role for offline-pool ids (a control stays a
    control whatever the user ticks; a partial model is ranked, and flagged), ``candidate`` otherwise."""
    from flare_core.encoders import get_spec

    try:
        return get_spec(model_id).role
    except ValueError:  # a hub id or a local folder
        return "candidate"


def check_embedding_names(names: Sequence[str], *, models: Sequence[str] = ()) -> list[str]:
    """The names given to embeddings files, stripped; ``ValueError`` when one is empty, repeated, or the
    name of a model of the run (its results would be mixed with that model's)."""
    stripped = [str(n).strip() for n in names]
    if any(not n for n in stripped):
        raise ValueError("every embeddings file needs a name (it is the model's name in the results)")
    repeated = sorted(n for n, k in Counter(stripped).items() if k > 1)
    if repeated:
        raise ValueError(f"two embeddings files are named {repeated[0]!r}: give each file its own name")
    taken = sorted(set(stripped) & set(models))
    if taken:
        raise ValueError(f"embeddings named {taken[0]!r} have the name of a model of this run; rename them")
    return stripped


Level = Literal["ok", "warning", "error"]


@dataclass(frozen=True)
class FieldCheck:
    """What a check found on one field: ``level`` is ``ok``, ``warning`` (the run works, with a caveat)
    or ``error`` (the run would be refused or fail); ``message`` says it in words."""

    level: Level
    message: str

    @property
    def blocks(self) -> bool:
        return self.level == "error"


#: The fewest different texts a run accepts: the geometry of the embeddings (effective rank, silhouette)
#: needs 3 rows, and a run of fewer would end with a failed stage.
MIN_RUN_TEXTS = 3


def check_texts_for_run(texts: Sequence[str]) -> FieldCheck | None:
    """An error when ``texts`` (the kept texts of a corpus) hold fewer than :data:`MIN_RUN_TEXTS`
    different texts, the check every run gets before it is created; None when they are enough."""
    distinct = len(set(texts))
    if distinct >= MIN_RUN_TEXTS:
        return None
    rows = f" (in {len(texts):,} rows)" if len(texts) != distinct else ""
    return FieldCheck(
        "error",
        f"only {distinct} different text{'s' if distinct != 1 else ''}{rows}: a run compares texts and needs "
        f"at least {MIN_RUN_TEXTS} different ones. Add texts to the file.",
    )


def _repeats_note(labels: Sequence[str], texts: Sequence[str] | None) -> str:
    """A sentence naming the labelled texts that repeat another, or "" when none does."""
    if texts is None:
        return ""
    repeats = len(texts) - len(set(texts))
    if not repeats:
        return ""
    return (
        f" {repeats:,} of the {len(labels):,} labelled texts repeat another text: a model can learn a "
        "repeated text by heart, so the labels' accuracy may read too high for every model. Drop the "
        "repeats from the file (or run with --drop-duplicates)."
    )


def check_labels_for_run(
    labels: Sequence[str], *, column: str, texts: Sequence[str] | None = None
) -> FieldCheck:
    """Whether the labels of the kept texts can drive the supervised check: refused with fewer than
    ``MIN_CLASSES`` classes of at least ``MIN_CLASS_MEMBERS`` different texts (one class only, one text
    per class, or a few texts repeated); a warning when classes will be left out, when nearly every text
    has its own label, or when labelled texts repeat (given ``texts``, the texts of the labels)."""
    counts = Counter(labels)
    different = Counter(label for _, label in set(zip(texts, labels, strict=True))) if texts else counts
    usable = [c for c, n in different.items() if n >= MIN_CLASS_MEMBERS]
    small = sorted(c for c, n in different.items() if n < MIN_CLASS_MEMBERS)
    repeats = _repeats_note(labels, texts)
    if len(counts) == 1:
        (only,) = counts
        return FieldCheck(
            "error",
            f"column '{column}' holds one class only ({only!r} on all {len(labels):,} texts): labels must "
            f"tell at least {MIN_CLASSES} groups apart. Choose another column, or run without labels "
            "(--no-labels, or (none) on the New run page).",
        )
    if len(usable) < MIN_CLASSES:
        looks = (
            "It looks like an identifier or free text: choose another column"
            if len(counts) > len(labels) / 2
            else "Label more texts of the small classes, or choose another column"
        )
        texts_word = "different texts" if repeats else "texts"
        return FieldCheck(
            "error",
            f"column '{column}' has {len(counts):,} classes for {len(labels):,} texts but only "
            f"{len(usable)} with {MIN_CLASS_MEMBERS} or more {texts_word}; the supervised check needs "
            f"{MIN_CLASSES}. {looks}, or run without labels (--no-labels, or (none) on the New run page)."
            + repeats,
        )
    return _label_warnings(counts, small, len(labels), column, repeats)


def _label_warnings(counts: Counter, small: list[str], n: int, column: str, repeats: str) -> FieldCheck:
    """The verdict on labels the supervised check can use: ok, or a warning naming what is left out."""
    if len(counts) > n / 2:
        return FieldCheck(
            "warning",
            f"column '{column}' has {len(counts):,} classes for {n:,} texts: most texts have a label "
            f"of their own. Is it a label? {len(small):,} classes with a single text are left out of the "
            "supervised check." + repeats,
        )
    if small:
        shown = ", ".join(repr(c) for c in small[:5]) + (
            f" and {len(small) - 5} more" if len(small) > 5 else ""
        )
        return FieldCheck(
            "warning",
            f"{len(counts):,} classes; {len(small)} with a single text ({shown}) are left out of the "
            "supervised check." + repeats,
        )
    sizes = sorted(counts.values())
    found = f"{len(counts):,} classes, {sizes[0]:,} to {sizes[-1]:,} texts each"
    return FieldCheck("warning", found + "." + repeats) if repeats else FieldCheck("ok", found)


def corpus_notes(corpus: Corpus) -> list[str]:
    """What a person should know about ``corpus`` before its run, one line each ("warning: …", "note: …"):
    the labels' warning (repeated texts, classes left out), its encoding, texts cut."""
    lines = []
    if corpus.labels is not None:
        labels = check_labels_for_run(
            corpus.labels, column=corpus.label_column or "label", texts=corpus.texts
        )
        if labels.level == "warning":
            lines.append(f"warning: {labels.message}")
    if corpus.stats.get("encoding_warning"):
        lines.append(f"warning: {corpus.stats['encoding_warning']}")
    if corpus.stats.get("truncation_note"):
        lines.append(f"note: {corpus.stats['truncation_note']}")
    return lines


def _check_inputs(
    corpus: Corpus, params: RunParams, precomputed: Mapping[str, np.ndarray], judgements: pd.DataFrame | None
) -> None:
    """Every check of a new run's inputs, before anything is written: refused with the reason."""
    params.validate()
    if judgements is not None:
        _check_judgements(judgements, corpus)
    too_few = check_texts_for_run(corpus.texts)
    if too_few is not None:
        raise CorpusError(f"'{corpus.source_name}': {too_few.message}")
    if corpus.labels is not None:
        labels = check_labels_for_run(
            corpus.labels, column=corpus.label_column or "label", texts=corpus.texts
        )
        if labels.blocks:
            raise CorpusError(labels.message)
    if not params.models and not precomputed:
        raise ValueError("choose at least one model, or add embeddings computed elsewhere")
    check_embedding_names(
        list(precomputed), models=[*params.models, *params.controls, *params.reference_pool]
    )
    for model_name, array in precomputed.items():
        if array.shape[0] != len(corpus):
            raise ValueError(
                f"precomputed embeddings {model_name!r} have {array.shape[0]} rows but the corpus has "
                f"{len(corpus)} texts"
            )


def create_run(
    store: RunStore,
    corpus: Corpus,
    params: RunParams,
    *,
    name: str | None = None,
    precomputed: Mapping[str, np.ndarray] | None = None,
    run_id: str | None = None,
    judgements: pd.DataFrame | None = None,
) -> Run:
    """Store ``corpus`` and ``params`` as a new queued run and return it.

    ``precomputed`` maps extra model names to validated float32 (N, d) embeddings (see
    ``flare_core.encoders.load_precomputed``); they join the run as models of kind ``precomputed``.
    ``judgements`` are search judgements on the corpus's texts
    (:func:`flare_core.data.judgements.load_judgements`).
    """
    precomputed = dict(precomputed or {})
    _check_inputs(corpus, params, precomputed, judgements)
    models = [
        {"id": m, "kind": "registry", "role": registry_role(m), "status": "pending"} for m in params.models
    ]
    models += [
        {"id": m, "kind": "precomputed", "role": "candidate", "status": "pending"} for m in precomputed
    ]
    listed = set(params.models)
    models += [
        {"id": m, "kind": "registry", "role": "control", "status": "pending"}
        for m in params.controls
        if m not in listed
    ]
    listed |= set(params.controls)
    models += [
        {"id": m, "kind": "registry", "role": "reference", "status": "pending"}
        for m in params.reference_pool
        if m not in listed
    ]
    manifest = {
        "name": name or corpus.source_name,
        "corpus": {
            "source_name": corpus.source_name,
            "n_texts": len(corpus),
            "content_hash": corpus.content_hash,
            "text_column": corpus.text_column,
            "label_column": corpus.label_column,
            "has_labels": corpus.labels is not None,
            "has_pairs": corpus.pairs is not None,
            **({} if judgements is None else {"n_judged_queries": int(judgements["query_id"].nunique())}),
            "stats": corpus.stats,
        },
        "models": models,
        "params": dataclasses.asdict(params),
        "versions": versions(),
        "seeds": {"global": params.seed},
        "timings": {},
    }
    run = store.create(manifest, run_id=run_id)
    run.save_frame(corpus.to_frame(), "corpus.parquet")
    if corpus.pairs is not None:
        run.save_frame(corpus.pairs.reset_index(drop=True), "pairs.parquet")
    if judgements is not None:
        run.save_frame(judgements.reset_index(drop=True), JUDGEMENTS)
    for model_name, array in precomputed.items():
        run.save_embeddings(model_name, array)
    return run


def _check_judgements(judgements: pd.DataFrame, corpus: Corpus) -> None:
    """Search judgements fit the corpus: the expected columns, documents among its texts, no pair columns."""
    columns = ["query_id", "query_text", "doc_row", "relevance"]
    if list(judgements.columns) != columns:
        raise ValueError(f"judgements need the columns {columns}; got {list(judgements.columns)}")
    if corpus.pairs is not None:
        raise CorpusError("give either pair columns or a judgements file, not both")
    rows = judgements["doc_row"].to_numpy()
    if len(judgements) == 0 or rows.min() < 0 or rows.max() >= len(corpus):
        raise CorpusError(f"the judgements name documents outside the corpus's {len(corpus)} texts")


def import_bundle(store: RunStore, bundle: str | os.PathLike | bytes, *, run_id: str | None = None) -> Run:
    """Add the run of a bundle to ``store`` (:func:`~flare_core.store.bundle_import.import_run`), its
    settings checked as a new run's are: a bundle with one refused setting is refused whole, with the
    reason, and nothing is imported."""
    from flare_core.store.bundle_import import import_run

    return import_run(store, bundle, run_id=run_id, check_params=check_stored_params)
