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

from flare_core.analyses.downstream import MIN_CLASS_MEMBERS, MIN_CLASSES
from flare_core.data.corpus import Corpus
from flare_core.data.judgements import JUDGEMENTS
from flare_core.errors import CorpusError
from flare_core.run.params import RunParams, check_stored_params
from flare_core.store.runs import Run, RunStore

_VERSIONED = (
    "flare-studio", "torch", "transformers", "sentence-transformers", "nflows", "numpy", "scipy",
    "scikit-learn", "pandas", "pyarrow", "networkx", "umap-learn", "streamlit", "ray",
    "pytrec-eval-terrier",
)  # fmt: skip


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


def check_labels_for_run(labels: Sequence[str], *, column: str) -> FieldCheck:
    """Whether the labels of the kept texts can drive the supervised check: refused with fewer than
    ``MIN_CLASSES`` classes of at least ``MIN_CLASS_MEMBERS`` texts (one class only, or one text per
    class); a warning when classes will be left out or when nearly every text has its own label."""
    counts = Counter(labels)
    usable = [c for c, n in counts.items() if n >= MIN_CLASS_MEMBERS]
    small = sorted(c for c, n in counts.items() if n < MIN_CLASS_MEMBERS)
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
        return FieldCheck(
            "error",
            f"column '{column}' has {len(counts):,} classes for {len(labels):,} texts but only {len(usable)} "
            f"with {MIN_CLASS_MEMBERS} or more texts; the supervised check needs {MIN_CLASSES}. {looks}, or run "
            "without labels (--no-labels, or (none) on the New run page).",
        )
    if len(counts) > len(labels) / 2:
        return FieldCheck(
            "warning",
            f"column '{column}' has {len(counts):,} classes for {len(labels):,} texts: most texts have a label "
            f"of their own. Is it a label? {len(small):,} classes with a single text are left out of the "
            "supervised check.",
        )
    sizes = sorted(counts.values())
    if small:
        shown = ", ".join(repr(c) for c in small[:5]) + (
            f" and {len(small) - 5} more" if len(small) > 5 else ""
        )
        return FieldCheck(
            "warning",
            f"{len(counts):,} classes; {len(small)} with a single text ({shown}) are left out of the "
            "supervised check.",
        )
    return FieldCheck("ok", f"{len(counts):,} classes, {sizes[0]:,} to {sizes[-1]:,} texts each")


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
    ``judgements`` are search judgements on the corpus's texts (:func:`flare_core.data.judgements.load_judgements`).
    """
    params.validate()
    if judgements is not None:
        _check_judgements(judgements, corpus)
    if corpus.labels is not None:
        labels = check_labels_for_run(corpus.labels, column=corpus.label_column or "label")
        if labels.blocks:
            raise CorpusError(labels.message)
    precomputed = dict(precomputed or {})
    if not params.models and not precomputed:
        raise ValueError("choose at least one model, or add embeddings computed elsewhere")
    check_embedding_names(
        list(precomputed), models=[*params.models, *params.controls, *params.reference_pool]
    )
    for model_name, array in precomputed.items():
        if array.shape[0] != len(corpus):
            raise ValueError(
                f"precomputed embeddings {model_name!r} have {array.shape[0]} rows but the corpus has {len(corpus)} texts"
            )
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
