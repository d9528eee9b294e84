"""What each analysis page found on one run, in two plain sentences: a ``headline`` and the figure behind
it in words (``detail``). Pure functions of the run's stored tables, shown at the top of the Collapse,
Layers, Corpus, Sufficiency and Validation pages; the symbols and formulas stay in the glossary."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import spearman
from flare_core.view.columns import column_words
from flare_core.view.figures import MIN_CORRELATION_MODELS
from flare_core.view.glossary import label

#: Average SOCM over all pairs of 1,000 Wikipedia texts, from the SOCM paper (Hara et al., Table 1),
#: lowest first: the yardsticks a run's figure is read against.
SOCM_REFERENCES = (
    ("gte-base", 0.018),
    ("all-mpnet-base-v2", 0.100),
    ("all-MiniLM-L12-v2", 0.313),
    ("BERT-base", 0.396),
)
#: Preferred score on the labels for the Validation finding, best first.
DOWNSTREAM_ORDER = ("accuracy", "f1", "v_measure", "cosine_spearman", "ndcg_at_10", "map_at_10")


@dataclass(frozen=True)
class Finding:
    """Two lines for people: ``headline`` (what the page found) and ``detail`` (the figure behind it)."""

    headline: str
    detail: str


def _number(value: float) -> str:
    """Two decimals; "about 0" for what would print as 0.00 without being 0."""
    return f"{value:.2f}" if abs(value) >= 0.005 or value == 0 else "about 0"


def _columns(frame: Any, columns: Sequence[str], name: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{name} must be a DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks the columns {missing}")
    return frame


# ---------------------------------------------------------------------------------------------------
# collapse


def collapse_level(socm_mean: float) -> str:
    """How much mean pooling hides, in a word, for an average SOCM: little (< 0.05), some (< 0.2) or much."""
    return "little" if socm_mean < 0.05 else "some" if socm_mean < 0.2 else "much"


def _against_references(value: float) -> str:
    lower = [(n, v) for n, v in SOCM_REFERENCES if v <= value]
    upper = [(n, v) for n, v in SOCM_REFERENCES if v > value]
    if not lower:
        name, ref = upper[0]
        return f"below {name}'s {_number(ref)} in the SOCM paper"
    if not upper:
        name, ref = lower[-1]
        return f"above {name}'s {_number(ref)} in the SOCM paper"
    (low_name, low), (high_name, high) = lower[-1], upper[0]
    return f"between {low_name} ({_number(low)}) and {high_name} ({_number(high)}) in the SOCM paper"


def collapse_finding(summary: pd.DataFrame) -> Finding:
    """The Collapse page's finding from its summary table (one row per model: ``model``, ``socm_mean``,
    ``n_pairs``, ``n_texts``, optionally ``socm_same_label_mean`` and ``socm_different_label_mean``).
    The headline names the model whose mean pooling hides the most."""
    _columns(summary, ["model", "socm_mean", "n_pairs", "n_texts"], "the collapse summary")
    rows = summary.dropna(subset=["socm_mean"]).sort_values("socm_mean", ascending=False, kind="mergesort")
    if rows.empty:
        return Finding("No pair of texts could be scored for collapse on this run.", "")
    worst = rows.iloc[0]
    value = float(worst["socm_mean"])
    headline = (
        f"Mean pooling hides {collapse_level(value)} of the difference between texts for {worst['model']}: "
        f"its average collapse score is {_number(value)}, {_against_references(value)}."
    )
    parts = [f"Measured on all {int(worst['n_pairs']):,} pairs of {int(worst['n_texts']):,} sampled texts"]
    if len(rows) > 1:
        best = rows.iloc[-1]
        parts.append(
            f"{best['model']} collapses least ({_number(float(best['socm_mean']))}, "
            f"{collapse_level(float(best['socm_mean']))})"
        )
    same, different = worst.get("socm_same_label_mean"), worst.get("socm_different_label_mean")
    if same is not None and different is not None and np.isfinite([same, different]).all():
        gap = float(different) - float(same)
        relation = "about as much as" if abs(gap) < 0.02 else "more than" if gap > 0 else "less than"
        parts.append(
            f"texts with different labels collapse {relation} texts with the same label "
            f"({_number(float(different))} against {_number(float(same))})"
        )
    return Finding(headline, "; ".join(parts) + ". Higher means texts whose words differ end up alike.")


# ---------------------------------------------------------------------------------------------------
# layers


def layers_finding(frame: pd.DataFrame) -> Finding:
    """The Layers page's finding from the layer rows of a concentration table (``model``, ``layer``,
    ``mean_cos``): how much alike the layers make the tokens of a text, from the first layer to the last,
    and where the largest step is (one model) or which model ends most alike (several)."""
    _columns(frame, ["model", "layer", "mean_cos"], "the concentration table")
    ends = []
    for model, group in frame.dropna(subset=["mean_cos"]).groupby("model", sort=False):
        group = group.sort_values("layer")
        cos = group["mean_cos"].to_numpy(dtype=float)
        steps = np.diff(cos)
        step_at = int(np.argmax(np.abs(steps))) + 1 if len(steps) else 0
        ends.append(
            {
                "model": model,
                "first": int(group["layer"].iloc[0]),
                "last": int(group["layer"].iloc[-1]),
                "start": float(cos[0]),
                "end": float(cos[-1]),
                "step_layer": int(group["layer"].iloc[step_at]),
                "step": float(steps[step_at - 1]) if len(steps) else 0.0,
            }
        )
    if not ends:
        return Finding("No layer of this run's models could be measured.", "")
    top = max(ends, key=lambda e: e["end"])
    change = top["end"] - top["start"]
    trend = (
        "keep the tokens of a text about as alike as they are"
        if abs(change) < 0.05
        else "make the tokens of a text more alike"
        if change > 0
        else "make the tokens of a text less alike"
    )
    headline = (
        f"In {top['model']}, the layers {trend}: their average cosine goes from {_number(top['start'])} "
        f"after layer {top['first']} to {_number(top['end'])} after layer {top['last']}."
    )
    if len(ends) > 1:
        low = min(ends, key=lambda e: e["end"])
        detail = (
            f"Of the {len(ends)} models, tokens end up most alike in {top['model']} ({_number(top['end'])}) "
            f"and least in {low['model']} ({_number(low['end'])})"
        )
    else:
        sign = "+" if top["step"] >= 0 else "−"
        detail = f"The largest step is at layer {top['step_layer']} ({sign}{_number(abs(top['step']))})"
    return Finding(
        headline,
        detail + "; the more alike they end up, the less their mean tells texts with different words apart.",
    )


# ---------------------------------------------------------------------------------------------------
# corpus


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def corpus_finding(
    texts: pd.Series,
    labels: pd.Series | None = None,
    stats: Mapping[str, Any] | None = None,
    models: Sequence[Mapping[str, Any]] = (),
    *,
    lengths: pd.Series | None = None,
    labelled: int = 0,
    judged: int = 0,
) -> Finding:
    """The Corpus page's finding: how many texts and how long (characters), the labels and their
    balance, then what was dropped or repeated and how many of the models the person chose embedded the
    texts (``stats`` is the manifest's corpus statistics, ``models`` its model entries; the controls the
    product adds are not counted). ``lengths`` (characters per text) stand in for the texts' own when
    these are hidden (a "figures only" share link). ``labelled`` and ``judged``: the texts a person
    labelled and the search queries they judged, said instead of "without labels" when there are any."""
    if not isinstance(texts, pd.Series):
        raise ValueError(f"texts must be a pandas Series, got {type(texts).__name__}")
    if lengths is not None and (not isinstance(lengths, pd.Series) or len(lengths) != len(texts)):
        raise ValueError(f"lengths must be a pandas Series of {len(texts)} lengths, one per text")
    stats = stats or {}
    lengths = texts.fillna("").astype(str).str.len() if lengths is None else lengths.astype(int)
    if lengths.empty:
        return Finding("This run's corpus holds no text.", "")
    headline = (
        f"{_count(len(texts), 'text')}, typically {int(lengths.median()):,} characters long "
        f"(from {int(lengths.min()):,} to {int(lengths.max()):,})"
    )
    counts = pd.Series(dtype=int) if labels is None else labels.dropna().astype(str).value_counts()
    if counts.empty:
        headline += _given_words(int(labelled), int(judged))
    else:
        if counts.min() == counts.max():
            headline += f", in {_count(len(counts), 'label')} of {_count(int(counts.max()), 'text')} each."
        else:
            headline += (
                f", in {_count(len(counts), 'label')}: from {_count(int(counts.min()), 'text')} "
                f"({counts.index[-1]}) to {int(counts.max()):,} ({counts.index[0]})."
            )
    found = []
    duplicates = int(stats.get("n_duplicates") or 0)
    if duplicates:
        fate = "dropped" if stats.get("duplicates_dropped") else "kept"
        found.append(f"{_count(duplicates, 'duplicate text')} ({fate})")
    empty = int(stats.get("n_empty_dropped") or 0)
    if empty:
        found.append(f"{_count(empty, 'empty row')} dropped")
    sampled_out = int(stats.get("n_sampled_out") or 0)
    if sampled_out:
        found.append(f"{_count(sampled_out, 'text')} left out by sampling")
    detail = ("Found " + ", ".join(found)) if found else "No duplicate or empty texts"
    models = [m for m in models if m.get("role", "candidate") == "candidate"]
    if models:
        done = [m for m in models if m.get("status") == "done"]
        failed = [str(m.get("id")) for m in models if m.get("status") == "failed"]
        detail += f"; {len(done)} of {_count(len(models), 'model')} embedded them"
        if failed:
            detail += f" ({', '.join(failed)} failed)"
    return Finding(headline, detail + ".")


def _given_words(labelled: int, judged: int) -> str:
    """The end of the Corpus headline for a corpus without a label column: what a person gave it."""
    given = []
    if labelled:
        given.append(f"you labelled {labelled:,} of them")
    if judged:
        given.append(f"you judged {_count(judged, 'search query', 'search queries')} on them")
    if not given:
        return ", without labels."
    return ", without a label column; " + " and ".join(given) + "."


# ---------------------------------------------------------------------------------------------------
# information sufficiency


def sufficiency_finding(scores: pd.DataFrame, per_dim: pd.DataFrame | None = None) -> Finding:
    """The Sufficiency page's finding from one estimator's ``scores`` (``model``, ``score``, ``ci_low``,
    ``ci_high``) and its (sources × targets) ``per_dim`` matrix: the leader and whether the runner-up
    can be told apart from it, then the strongest link and the hardest model to predict."""
    _columns(scores, ["model", "score", "ci_low", "ci_high"], "the scores")
    ranked = scores.dropna(subset=["score"]).sort_values("score", ascending=False, kind="mergesort")
    if ranked.empty:
        return Finding("No model could be scored on this run.", "")
    lead = ranked.iloc[0]
    headline = (
        f"{lead['model']} tells the most about the other models' embeddings: "
        f"a score of {_number(float(lead['score']))}, likely between "
        f"{_number(float(lead['ci_low']))} and {_number(float(lead['ci_high']))} (nats per dimension)"
    )
    if len(ranked) > 1:
        second = ranked.iloc[1]
        if float(second["ci_high"]) >= float(lead["ci_low"]):
            headline += f"; {second['model']} is too close to tell apart."
        else:
            headline += f", clearly ahead of {second['model']} ({_number(float(second['score']))})."
    else:
        headline += "."
    detail = ""
    if per_dim is not None and not per_dim.empty:
        candidates = [m for m in ranked["model"] if m in per_dim.index]
        matrix = per_dim.loc[candidates] if candidates else per_dim
        stacked = matrix.stack().dropna()
        if not stacked.empty:
            (source, target), value = stacked.idxmax(), float(stacked.max())
            detail = f"Strongest link: {source} predicts {target} best (a score of {_number(value)})"
            received = matrix.median(axis=0, skipna=True).dropna()
            if len(received) > 1:
                hardest = received.idxmin()
                detail += (
                    f"; {hardest} is the hardest to predict from the others "
                    f"(typically {_number(float(received.min()))})"
                )
            detail += "."
    return Finding(headline, detail)


def generalisation_sentence(pairs: pd.DataFrame) -> str:
    """The generalisation gap in words: how much worse the estimators fit held-out texts than training
    texts (``delta_emp_marg`` + ``delta_emp_cond``, nats), set against the information measured
    (``is_nats``) at the median pair; empty when the table lacks those columns."""
    if not {"delta_emp_marg", "delta_emp_cond"} <= set(pairs.columns) or pairs.empty:
        return ""
    gap = (pairs["delta_emp_marg"] + pairs["delta_emp_cond"]).dropna()
    if gap.empty:
        return ""
    median, largest = float(gap.median()), float(gap.max())
    sentence = (
        f"Held-out check: the estimators fit texts they were not trained on worse by {_number(median)} nats "
        f"for a typical pair (at most {_number(largest)})"
    )
    if "is_nats" in pairs.columns and pairs["is_nats"].notna().any():
        information = float(pairs["is_nats"].abs().median())
        reading = (
            "small next to the information measured, so the estimates hold on new texts"
            if median < 0.5 * information
            else "not small next to the information measured, so part of each estimate may not carry "
            "over to new texts"
        )
        sentence += f", against {_number(information)} nats of information measured: {reading}"
    return sentence + "."


def floor_sentence(pairs: pd.DataFrame) -> str:
    """The pairs whose IS is shown as 0 although the estimator's own figure (``is_raw_nats``) is below
    it: a flow's conditional starts as the target's own density and keeps it when no trained version
    does better on held-out texts. Empty when no pair was held at 0 or the table predates the column."""
    if not {"is_nats", "is_raw_nats"} <= set(pairs.columns) or pairs.empty:
        return ""
    held = pairs[pairs["is_raw_nats"] < pairs["is_nats"] - 1e-9]
    if held.empty:
        return ""
    raw = held["is_raw_nats"]
    spread = (
        f"{_number(float(raw.iloc[0]))} nats"
        if len(held) == 1
        else f"from {_number(float(raw.min()))} to {_number(float(raw.max()))} nats"
    )
    return (
        f"{len(held)} of {len(pairs)} pairs are shown as 0: trained on the source, the estimator fitted the "
        f"held-out texts worse than the target's own density did, so it claims no information. Its own "
        f'figures for them, {spread}, are in the column "{column_words("is_raw_nats")[0]}": how far below '
        "0 an estimate can fall "
        "when there is nothing to find."
    )


# ---------------------------------------------------------------------------------------------------
# validation


def _stability(subsampling: pd.DataFrame | None) -> str:
    if subsampling is None or subsampling.empty:
        return "The ranking's stability was not studied on this run."
    _columns(subsampling, ["alpha", "rank_agreement"], "the subsampling study")
    means = subsampling.groupby("alpha")["rank_agreement"].agg(["mean", "size"])
    means = means[means.index < 1.0] if (means.index < 1.0).any() else means
    fifth = means[means.index >= 0.2]
    alpha = float(fifth.index.min()) if not fifth.empty else float(means.index.max())
    agreement, repeats = float(means.loc[alpha, "mean"]), int(means.loc[alpha, "size"])
    if agreement >= 0.9:
        word, effect = "stable", "keeps nearly the same order"
    elif agreement >= 0.7:
        word, effect = "fairly stable", "keeps most of its order"
    else:
        word, effect = "unstable", "changes its order"
    return (
        f"The ranking is {word}: recomputed from {alpha:.0%} of the held-out texts, it {effect} "
        f"(agreement {_number(agreement)} on average over {_count(repeats, 'repeat')}; 1 = same order). "
        "This compares one estimator with itself; whether the two estimators agree with each other is a "
        "separate check of the answer."
    )


def _labels_check(correlations: pd.DataFrame | None, estimator: str) -> str:
    if correlations is None or correlations.empty:
        return "Without labels, the order could not be checked against how the models do on a task."
    _columns(correlations, ["label_free", "downstream", "n_models", "spearman_rho"], "the correlations")
    ours = correlations[correlations["label_free"] == f"{estimator}_is_median_norm"]
    if ours.empty:
        ours = correlations[correlations["label_free"] == f"{estimator}_score"]
    order = {name: index for index, name in enumerate(DOWNSTREAM_ORDER)}
    ours = ours.assign(_order=ours["downstream"].map(order).fillna(len(order))).sort_values("_order")
    if ours.empty:
        return "The score could not be compared with this corpus's labels."
    row = ours.iloc[0]
    n, task = int(row["n_models"]), label(str(row["downstream"]))
    if n < MIN_CORRELATION_MODELS:
        return (
            f"The labels cannot confirm the order yet: the score was compared with {task} over only "
            f"{_count(n, 'model')}, and fewer than {MIN_CORRELATION_MODELS} make any correlation unreliable."
        )
    rho = float(row["spearman_rho"])
    if math.isnan(rho):
        return f"The score could not be correlated with {task} (one of them is the same for every model)."
    word = "agrees" if rho >= 0.5 else "barely agrees" if rho > 0 else "disagrees"
    return (
        f"On this corpus's labels, the score {word} with {task}: rank correlation {_number(rho)} over "
        f"{_count(n, 'model')} (1 = same order)."
    )


#: A person's few labels judge the label-free ranking once there are this many.
MIN_CHECK_LABELS = 16


#: A person's few search judgements judge the label-free ranking once this many queries count.
MIN_CHECK_QUERIES = 10


def few_labels_check(verdict: Mapping[str, Any] | None) -> str | None:
    """Whether a person's few labels confirm the label-free ranking (the map): the Spearman correlation of
    the map's scores with the models' accuracies estimated from the labels, and whether the map's leader
    is the labels' choice. None before :data:`MIN_CHECK_LABELS` labels (or without a map)."""
    few = (verdict or {}).get("few_labels") or {}
    n = int(few.get("n_labels") or 0)
    ranking = (verdict or {}).get("ranking") or []
    if n == 0 or not ranking:
        return None
    search = few.get("metric") == "ndcg@10"
    if search and (n < MIN_CHECK_QUERIES or not few.get("estimates")):
        return (
            f"Your {n} judged quer{'y is' if n == 1 else 'ies are'} too few to check the order: it is "
            f"checked from {MIN_CHECK_QUERIES} judged queries with a relevant document on."
        )
    if not search and (n < MIN_CHECK_LABELS or not few.get("estimates")):
        return (
            f"Your {_count(n, 'label')} {'is' if n == 1 else 'are'} too few to check the order: it is "
            f"checked from {MIN_CHECK_LABELS} labels of at least two categories on."
        )
    scores = {r["model"]: r.get("score") for r in ranking}
    pairs = [
        (float(scores[r["model"]]), float(r["estimate"]))
        for r in few["estimates"]
        if r["model"] in scores
        and scores[r["model"]] is not None
        and r.get("estimate") is not None
        and math.isfinite(float(scores[r["model"]]))
    ]
    source = f"from your {n} judged queries" if search else f"from your {n} labels"
    if len(pairs) < 3:
        return (
            f"Your {n} {'judged queries' if search else 'labels'} cannot check the order: fewer than 3 "
            "models have both a score and an estimate."
        )
    x, y = np.array(pairs).T
    rho = spearman(x, y)
    if math.isnan(rho):
        return f"The order could not be checked {source}: every model has the same score or estimate."
    word = "agrees" if rho >= 0.5 else "barely agrees" if rho > 0 else "disagrees"
    few_models = (
        f"; with only {len(pairs)} models a correlation takes few values, so read it as a rough check"
        if len(pairs) < MIN_CORRELATION_MODELS
        else ""
    )
    sentence = (
        f"Checked {source}: the label-free order {word} with the "
        f"{'nDCG@10 your judgements give' if search else 'accuracy the labels estimate for'} each model, "
        f"rank correlation {_number(rho)} over {_count(len(pairs), 'model')} (1 = same order{few_models})."
    )
    leader = (verdict or {}).get("leading") or max(pairs and scores, key=lambda m: scores[m] or -np.inf)
    best = ((few.get("advice") or {}).get("best")) or max(few["estimates"], key=lambda r: r["p_best"])[
        "model"
    ]
    if leader and best:
        sentence += (
            f" The map's leader, {leader}, is also the one your {'judgements' if search else 'labels'} "
            "favour."
            if leader == best
            else f" The map's leader, {leader}, is not the one your {'judgements' if search else 'labels'} "
            f"favour: {best}."
        )
    return sentence


def validation_finding(
    subsampling: pd.DataFrame | None,
    correlations: pd.DataFrame | None,
    estimator: str = "flow",
    verdict: Mapping[str, Any] | None = None,
) -> Finding:
    """The Validation page's finding: how stable the ranking of ``estimator`` is when the held-out texts
    are subsampled (``alpha``, ``rank_agreement``; read at a fifth of the texts), and whether the labels
    confirm it (``correlations``, refused below :data:`MIN_CORRELATION_MODELS` models; without them, a
    person's few labels in the run's ``verdict``, once there are :data:`MIN_CHECK_LABELS`)."""
    check = _labels_check(correlations, estimator)
    if correlations is None or correlations.empty:
        check = few_labels_check(verdict) or check
    return Finding(_stability(subsampling), check)
