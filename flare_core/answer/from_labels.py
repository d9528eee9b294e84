"""What labels say about a run's candidates: the run's own label column (every text labelled), or the few
labels a person gave it (:mod:`flare_core.answer.labels`), and which texts to ask about next.

Everything reads the embeddings the run stored; nothing is embedded again, so an update after a batch of
labels takes about a second (``bench/speed/few_label_speed.py``).

The run's own labels are judged by the pipeline's stage ``labels`` (:mod:`flare_core.run.labels_stage`),
which stores ``labels/comparison.parquet`` and ``labels/comparison.json``; :func:`full_label_block` reads
them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.label_free import forecast_sentence, shipped_reading
from flare_core.answer.labels import LabelSet
from flare_core.answer.stored import FewLabelsGround, LabelsGround
from flare_core.choosing.accuracy_posterior import SWITCH_CHANCE, AccuracyPrior
from flare_core.choosing.probes import DEFAULT_TOLERANCE, few_label_estimates
from flare_core.choosing.stopping import chance_words, stopping_advice
from flare_core.store.runs import Run

COMPARISON = ("labels", "comparison.parquet")
COMPARISON_INFO = ("labels", "comparison.json")
#: Texts shown to a person in one batch (issue: 8 to 16).
BATCH_SIZE = 16


def candidate_ids(run: Run) -> list[str]:
    """The embedded candidates of ``run`` (not the controls, references or partial models), in order."""
    return [
        m["id"]
        for m in run.manifest["models"]
        if m.get("status") == "done" and m.get("role", "candidate") == "candidate"
    ]


def candidate_embeddings(run: Run) -> dict[str, np.ndarray]:
    """The embedded candidates of ``run``: model → (N, d) float64."""
    return {m: np.asarray(run.load_embeddings(m), dtype=np.float64) for m in candidate_ids(run)}


def full_label_block(run: Run) -> LabelsGround | None:
    """The answer of the run's own labels (None before the ``labels`` stage has stored it): ``best``,
    ``tied`` (models that cannot be told apart from it), ``rows`` (the comparison, best first), ``runner_up``
    (the best model not tied, or the second), ``balanced``, ``method``, ``n_labels``, ``n_classes``."""
    if not run.has(*COMPARISON):
        return None
    frame = run.load_frame(*COMPARISON)
    info = run.load_json(*COMPARISON_INFO) if run.has(*COMPARISON_INFO) else {}
    best = str(frame.iloc[0]["model"])
    tied = frame.loc[frame["tied"].astype(bool), "model"].astype(str).tolist()
    others = frame.iloc[1:]
    runner = others[~others["tied"].astype(bool)] if (~others["tied"].astype(bool)).any() else others
    return {
        "best": best,
        "tied": tied,
        "runner_up": None if runner.empty else str(runner.iloc[0]["model"]),
        "rows": _records(frame),
        "metric": info.get("metric", "accuracy"),
        **{k: info.get(k) for k in ("balanced", "method", "folds", "repeats", "n_labels", "n_classes")},
        **{k: info[k] for k in ("k", "n_judgements") if k in info},  # search judgements' rank cut and count
    }


def few_label_block(run: Run, labels: LabelSet, prior: AccuracyPrior | None = None) -> FewLabelsGround | None:
    """The answer of a person's few labels: the candidates' ``estimates`` (estimated accuracy with labels
    aplenty, interval, chance of being best) and the stopping ``advice``; with fewer than two categories
    labelled, only ``need`` (what to label first). None without labels or without two candidates.
    ``prior``: what was known before the labels (:func:`flare_core.answer.label_free.few_label_prior`);
    the labels update it. The tolerance of "good enough" is the run's (``params.tolerance_points``)."""
    if not labels.entries:
        return None
    embeddings = candidate_embeddings(run)
    if len(embeddings) < 2:
        return None
    counts = pd.Series(labels.labels).value_counts()
    base = {
        "n_labels": int(len(labels.labels)),
        "counts": {str(k): int(v) for k, v in counts.items()},
        "batches": labels.batches,
        "skipped": len(labels.skipped_rows),
    }
    if counts.size < 2:
        only = str(counts.index[0])
        return {
            **base,
            "need": f"All {int(counts.iloc[0])} labels so far are {only!r}: label texts of another "
            "category too, so that the models can be told apart.",
        }
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    before = _named_before(run, labels, embeddings, prior, seed)
    estimates = few_label_estimates(
        embeddings,
        labels.rows,
        labels.labels,
        seed=seed,
        prior=_prior_of(prior, embeddings),
        tolerance_points=tolerance_of(run),
        named_before=before[0] if before else None,
        classes=len(labels.categories),
    )
    advice = stopping_advice(estimates, len(labels.labels))
    if (
        advice["more_labels"]
        and advice["reason"] == "not sure yet"
        and (told := forecast_sentence(tolerance_of(run)))
    ):
        advice = {**advice, "text": f"{advice['text']} {told}"}
    return {
        **base,
        "prior": estimates.attrs.get("prior"),
        "movement": movement_sentence(before, estimates, len(labels.labels)),
        "tolerance_points": float(estimates.attrs.get("tolerance_points", tolerance_of(run))),
        "more_labels_forecast": estimates.attrs.get("more_labels"),
        "method": estimates.attrs.get("method"),
        "extrapolated": bool(estimates.attrs.get("extrapolated", True)),
        "kept": estimates.attrs.get("kept"),
        "estimates": _records(estimates),
        "advice": advice,
    }


def _named_before(
    run: Run, labels: LabelSet, embeddings: dict[str, np.ndarray], prior: AccuracyPrior | None, seed: int
) -> tuple[str, str] | None:
    """The model the answer named before the latest change to the labels and what that change was
    (``"batch"``; ``"correction"`` or ``"corrections"`` when corrected labels came last, and the answer
    before them read every batch with the labels they replaced; ``"provisional"``: the prior's pick before
    any label); None when nothing came before. With a prior the batches are replayed from its pick, each
    keeping the model named before it unless its labels displace it
    (:func:`~flare_core.choosing.accuracy_posterior.named_model`), as the answer did batch by batch."""
    ordered = _prior_of(prior, embeddings)
    # a prior that tells the models apart names one before any label; a flat one names none
    ranks = float(np.ptp(ordered.mean)) > 0
    named = (ordered.models[int(np.argmax(ordered.mean))], "provisional") if ranks else None
    corrections = labels.last_corrections()
    last, kind = labels.batches - 1, "batch"
    if corrections:
        labels, last = labels.before_last_corrections(), labels.batches
        kind = "correction" if len(corrections) == 1 else "corrections"
    for batch in range(1, last + 1):
        upto = labels.upto(batch)
        if len(set(upto.labels)) < 2:
            continue
        frame = few_label_estimates(
            embeddings,
            upto.rows,
            upto.labels,
            seed=seed,
            prior=ordered,
            tolerance_points=tolerance_of(run),
            named_before=named[0] if named else None,
            classes=len(labels.categories),
        )
        named = (str(frame["model"].iloc[0]), kind)
    return named


#: What came before the answer, by the latest change to the labels (:func:`_named_before`).
THEN = {
    "provisional": "before your labels",
    "batch": "before your last batch",
    "correction": "before your correction",
    "corrections": "before your corrections",
}


def movement_sentence(before: tuple[str, str] | None, estimates: pd.DataFrame, n_labels: int) -> str:
    """How the answer moved with the last labels, in words: the same leader ("mpnet still leads: 71%
    within 2 points of the best") or a new one, never silently."""
    if before is None or estimates.empty:
        return ""
    leader, p_within = str(estimates["model"].iloc[0]), float(estimates["p_within"].iloc[0])
    tolerance = float(estimates.attrs.get("tolerance_points", DEFAULT_TOLERANCE))
    points = f"{tolerance:g} point" + ("" if tolerance == 1 else "s")
    then = THEN.get(before[1], THEN["batch"])
    if kept := estimates.attrs.get("kept"):
        higher = float(
            estimates.set_index("model").loc[kept["leader"], "estimate"] - estimates["estimate"].iloc[0]
        )
        return (
            f"{leader} stays the answer, as {then}: {kept['leader']}'s estimate is {100 * higher:.1f} "
            f"points higher, but your labels favour it over {leader} with only "
            f"{chance_words(kept['chance'])} chance (the answer changes at {SWITCH_CHANCE:.0%}); {leader} "
            f"has a {chance_words(p_within)} chance of being within {points} of the best."
        )
    if before[0] == leader:
        return (
            f"{leader} still leads, as {then}: {chance_words(p_within)} chance of being within {points} "
            "of the best."
        )
    return (
        f"{leader} now leads instead of {before[0]}, which led {then}: your {n_labels} labels favour it "
        f"({chance_words(p_within)} chance of being within {points} of the best)."
    )


def tolerance_of(run: Run) -> float:
    """The run's tolerance for "good enough", in points (the product's default for runs made before it)."""
    return float(run.manifest.get("params", {}).get("tolerance_points") or DEFAULT_TOLERANCE)


def _prior_of(prior: AccuracyPrior | None, embeddings: dict[str, np.ndarray]) -> AccuracyPrior:
    """``prior`` for exactly the embedded candidates; every model alike, its labels read as the shipped
    benchmark reads them, without one (fewer than two label-free scores yet) or for a candidate embedded
    since it was made."""
    if prior is not None and sorted(prior.models) == sorted(embeddings):
        return prior
    if prior is None:
        return AccuracyPrior.flat(list(embeddings)).read_with(shipped_reading())
    return AccuracyPrior.flat(list(embeddings), prior.level_mean).read_with(prior.reading)


def next_texts(run: Run, labels: LabelSet, n: int = BATCH_SIZE) -> pd.DataFrame:
    """The texts to ask about next (columns ``row``, ``text``), chosen among those not labelled or skipped;
    the same rows for the same labels and embedded candidates (seeded by the run's seed and the labels so
    far). While slower candidates are still being embedded the choice reads those embedded so far; the
    later ones are judged on the same labels when they arrive."""
    from flare_core.choosing.label_choice import next_rows

    embeddings = candidate_embeddings(run)
    if not embeddings:
        raise ValueError("this run has no embedded candidate to choose texts for")
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    texts = run.corpus_frame()["text"].to_numpy()
    rows = next_rows(
        embeddings, labels.rows, labels.labels, n, seed=seed, exclude=labels.skipped_rows, texts=texts
    )
    return pd.DataFrame({"row": rows.astype(np.int64), "text": texts[rows]})


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in frame.to_dict(orient="records"):
        out.append(
            {k: (None if isinstance(v, float) and not np.isfinite(v) else _plain(v)) for k, v in row.items()}
        )
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def few_label_history(run: Run, labels: LabelSet, prior: AccuracyPrior | None = None) -> pd.DataFrame:
    """The estimates after each batch of labels, replayed from the stored order: columns ``n_labels``,
    ``batch``, ``model``, ``estimate``, ``p_best`` (batches with fewer than two categories left out)."""
    embeddings = candidate_embeddings(run)
    if len(embeddings) < 2:
        return pd.DataFrame(columns=["n_labels", "batch", "model", "estimate", "p_best"])
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    frames = []
    for batch in range(1, labels.batches + 1):
        upto = labels.upto(batch)
        if len(set(upto.labels)) < 2:
            continue
        estimates = few_label_estimates(
            embeddings,
            upto.rows,
            upto.labels,
            seed=seed,
            prior=_prior_of(prior, embeddings),
            tolerance_points=tolerance_of(run),
            classes=len(labels.categories),
        )
        frames.append(
            estimates[["model", "estimate", "p_best"]].assign(n_labels=len(upto.labels), batch=batch)
        )
    if not frames:
        return pd.DataFrame(columns=["n_labels", "batch", "model", "estimate", "p_best"])
    return pd.concat(frames, ignore_index=True)[["n_labels", "batch", "model", "estimate", "p_best"]]
