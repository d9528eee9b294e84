"""Writing a run's answer, ``verdict.json``, from everything stored: the label-free ranking (the map), the
run's own labels, a person's few labels and the provisional label-free choice
(:func:`~flare_core.answer.decide.compose` says which ground decides).

:func:`write_verdict` is called by the pipeline (a provisional answer as soon as the quick candidates are
embedded, naming those still pending, then as each slower one joins; again after the labels and after each
estimator, and the final one at the end of the run), and by the dashboard and ``flare label`` after each
batch of labels. It holds the run's labels lock, so that an answer never misses a batch saved meanwhile.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import ranking_correlation
from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.answer.costs import cheapest_good_enough
from flare_core.answer.decide import chosen_candidates, compose, pending_candidates
from flare_core.answer.evidence import ranking_verdict
from flare_core.answer.from_labels import few_label_block, full_label_block
from flare_core.answer.label_free import few_label_prior, provisional_choice
from flare_core.answer.labels import labels_lock, load_labels
from flare_core.answer.stored import (
    FewLabelsGround,
    LabelsGround,
    MapVerdict,
    Verdict,
    metric_column,
    save_verdict,
)
from flare_core.choosing.accuracy_posterior import AccuracyPrior
from flare_core.data.judgements import JUDGEMENTS
from flare_core.data.language import Writing, read_share, read_writing
from flare_core.store.runs import Run

#: Geometry columns a label-free rule reads, with the sign that makes higher better.
_GEOMETRY = {"effective_rank": 1.0, "uniformity": -1.0, "isoscore": 1.0}


def label_free_scores(run: Run) -> pd.DataFrame:
    """One row per embedded candidate (index: model): ``dim`` and every label-free score the run has
    (``flow``, ``gmm``, ``effective_rank``, ``uniformity`` negated, ``isoscore``), higher better, and
    ``reads_corpus`` (the share of the run's texts the model reads, NaN when either is not known; the
    :class:`~flare_core.data.language.Writing` in ``attrs["writing"]``; from what each model's embedding
    record says it reads, so a run embedded before the records said so has none)."""
    models = [m for m in run.manifest["models"] if m.get("status") == "done" and m.get("role") == "candidate"]
    table = pd.DataFrame(
        {"dim": [float(m.get("dim") or np.nan) for m in models]}, index=[m["id"] for m in models]
    )
    for estimator in ESTIMATOR_NAMES:
        if run.has("sufficiency", estimator, "scores.parquet"):
            scores = run.load_frame("sufficiency", estimator, "scores.parquet").set_index("model")["score"]
            table[estimator] = scores.reindex(table.index).astype(float)
    if run.has("geometry.parquet"):
        geometry = run.load_frame("geometry.parquet").set_index("model")
        for column, sign in _GEOMETRY.items():
            if column in geometry:
                table[column] = sign * geometry[column].reindex(table.index).astype(float)
    known = {str(m["id"]): str(m.get("reads") or "unknown") for m in models}
    if len(table) and run.has("corpus.parquet") and set(known.values()) != {"unknown"}:
        corpus = run.artefact("corpus.parquet")
        writing = _writing(corpus, corpus.stat().st_mtime_ns)
        shares = {m: read_share(known[m], writing) for m in table.index}
        table["reads_corpus"] = [np.nan if shares[m] is None else float(shares[m]) for m in table.index]
        table.attrs["writing"] = writing
    return table


@functools.lru_cache(maxsize=32)
def _writing(corpus: Path, stamp: int) -> Writing:
    """Which languages and scripts the texts of the ``corpus`` file are in, read from a seeded sample
    spread over all of them (once per file and ``stamp``, its modification time)."""
    texts = pd.read_parquet(corpus, columns=["text"])["text"]
    return read_writing(texts.fillna("").astype(str).tolist())


def _agreement(ranking: MapVerdict, full: LabelsGround | None) -> float | None:
    """Spearman of the label-free ranking's scores with the labels' accuracies, over the candidates."""
    if not full or not ranking.get("ranking"):
        return None
    scores = pd.Series({r["model"]: r["score"] for r in ranking["ranking"]}, dtype=float)
    metric = metric_column(full)
    accuracy = pd.Series({r["model"]: r[metric] for r in full["rows"]}, dtype=float)
    both = pd.concat([scores, accuracy], axis=1, join="inner").dropna()
    if len(both) < 3:
        return None
    return ranking_correlation(both.iloc[:, 0], both.iloc[:, 1])


def _few_block(run: Run, use: str, scores: pd.DataFrame) -> FewLabelsGround | None:
    """A person's few labels or few search judgements: the search judgements when the run's use is search
    or when no text is labelled, else the labels, updating what the label-free ``scores`` and the
    benchmark said before them."""
    from flare_core.answer.few_judgements import has_search_judgements
    from flare_core.answer.from_judgements import few_search_block

    search = few_search_block(run) if has_search_judgements(run) else None
    labels = load_labels(run)
    if search is not None and (use == "search" or not labels.entries):
        return search  # type: ignore[return-value]
    prior = few_label_prior(scores, use) if labels.entries and len(scores) >= 2 else None
    return few_label_block(run, labels, prior) or search  # type: ignore[return-value]


def run_few_label_prior(run: Run) -> AccuracyPrior | None:
    """What the run knew of its candidates before the first label (None with fewer than two): the prior
    that its labels update, for the answer and for the history of its estimates alike."""
    scores = label_free_scores(run)
    use = str(run.manifest.get("params", {}).get("use") or "unsure")
    return few_label_prior(scores, use) if len(scores) >= 2 else None


def build_verdict(run: Run, *, provisional: bool) -> Verdict:
    """The run's version-3 verdict (see :mod:`flare_core.answer.decide`), from what is stored now."""
    ranking = ranking_verdict(run, provisional=False)
    use = str(run.manifest.get("params", {}).get("use") or "unsure")
    scores = label_free_scores(run)
    choice = provisional_choice(scores, use)
    full = (
        full_label_block(run)
        if run.manifest["corpus"].get("has_labels") or run.has("pairs.parquet") or run.has(JUDGEMENTS)
        else None
    )
    few = None if full else _few_block(run, use, scores)
    verdict = compose(
        ranking,
        full=full,
        few=few,
        choice=choice,
        agreement=_agreement(ranking, full),
        provisional=provisional,
        pending=pending_candidates(run.manifest),
        n_candidates=len(chosen_candidates(run.manifest)),
    )
    cost = cheapest_good_enough(run, verdict)
    if cost is not None and verdict["recommended"]:
        verdict["cost"] = cost
        verdict["text"] += " " + cost["sentence"]
    return verdict


def write_verdict(run: Run, *, provisional: bool | None = None) -> Verdict:
    """Build and store the run's verdict (under the labels lock); returns it. ``provisional``: whether the
    run is still computing (None: as its manifest says, so that labels given while the run works do not
    end its answer's "while the run finishes")."""
    if provisional is None:
        provisional = run.manifest.get("status") in ("queued", "running")
    with labels_lock(run):
        verdict = build_verdict(run, provisional=provisional)
        save_verdict(run, verdict)
    return verdict
