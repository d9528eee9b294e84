"""The verdict as it is stored: its types, its schema version, and the one place that reads and writes
``verdict.json``.

A verdict is a JSON object. Its schema version says which keys it has:

1. an old run's ``text`` and ``confidence`` only;
2. the label-free ranking (the map) with its trust checks: :class:`MapVerdict`
   (built by :func:`flare_core.answer.verdict.verdict`);
3. the answer and its grounds on top of the map: :class:`Verdict` (built by
   :func:`flare_core.answer.decide.compose`, written by :func:`flare_core.answer.write.write_verdict`).

Readers (pages, report, CLI, benchmark) call :func:`load_verdict` and ask :func:`schema_version` what a
verdict holds; the types are ``TypedDict``, so a verdict stays the plain dict that is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from flare_core.store.runs import Run

#: The file of a run that holds its verdict.
VERDICT_FILE = "verdict.json"
#: The schema of the label-free ranking's verdict (the map).
MAP_VERSION = 2
#: The schema written today: the map and the answer's grounds.
VERDICT_VERSION = 3
#: The column of a labels ground's rows that holds its ``metric``: class labels' accuracy, scored pairs'
#: Spearman, search judgements' nDCG@10.
METRIC_COLUMNS = {"accuracy": "accuracy", "spearman": "spearman", "ndcg@10": "ndcg_at_10"}


def metric_column(block: Mapping[str, Any]) -> str:
    """The column of ``block``'s rows (a :class:`LabelsGround`) that holds the metric that decided."""
    return METRIC_COLUMNS.get(str(block.get("metric") or "accuracy"), "accuracy")


class TrustCheck(TypedDict):
    """One check of the label-free ranking: ``status`` is "pass", "warn", "fail" or "not checked"."""

    name: str
    status: str
    figure: str
    text: str
    value: float | None


class Trust(TypedDict):
    """The ranking's trust ``level`` ("high", "moderate", "low"; None with nothing ranked) and its checks."""

    level: str | None
    checks: list[TrustCheck]


class MapVerdict(TypedDict):
    """Schema 2: the label-free ranking's verdict (see :mod:`flare_core.answer.verdict`). ``ranking``
    rows: model, score, ci_low, ci_high, rank, role; ``controls`` rows: model, kind, score, would_rank,
    of, text."""

    version: int
    provisional: bool
    estimator: str | None
    score_label: str | None
    recommended: str | None
    leading: str | None
    trust: Trust
    headline: str
    summary: str
    text: str
    tied_with: list[str]
    ranking: list[dict[str, Any]]
    controls: list[dict[str, Any]]
    failed: list[str]


class _SearchCounts(TypedDict, total=False):
    k: int  # search judgements (metric "ndcg@10"): the rank cut of the metrics
    n_judgements: int | None  # ... and the judgements behind them (n_labels counts the queries)


class LabelsGround(_SearchCounts):
    """What the run's own labels say (:func:`flare_core.answer.from_labels.full_label_block`): ``rows`` are
    the comparison, best first (model, accuracy or spearman or ndcg_at_10 by ``metric``, f1_macro or
    recall_at_10 and mrr_at_10, gap, gap_low, gap_high, tied)."""

    best: str
    tied: list[str]
    runner_up: str | None
    rows: list[dict[str, Any]]
    metric: str
    balanced: bool | None
    method: str | None
    folds: int | None
    repeats: int | None
    n_labels: int | None
    n_classes: int | None


class FewLabelsGround(TypedDict, total=False):
    """What a person's few labels say (:func:`flare_core.answer.from_labels.few_label_block`): always
    ``n_labels``, ``counts``, ``batches``, ``skipped``; then either ``need`` (fewer than two categories
    labelled) or ``method``, ``estimates`` (model, estimate, ci_low, ci_high, p_best …) and ``advice``."""

    n_labels: int
    counts: dict[str, int]
    batches: int
    skipped: int
    need: str
    method: str | None
    estimates: list[dict[str, Any]]
    advice: dict[str, Any]
    # labels: the tolerance of "good enough" (points), what was known before them (words), how the last
    # batch moved the answer (words), the posterior's forecast of labels that would settle it, whether each
    # labelled text's score was carried along the learning curve to plenty of labels
    tolerance_points: float
    prior: str | None
    movement: str
    more_labels_forecast: int | None
    extrapolated: bool
    # search judgements (metric "ndcg@10"): n_labels counts the judged queries with a relevant document
    metric: str
    k: int
    n_queries_judged: int
    n_judgements: int
    no_relevant: list[str]
    unscored: list[str]


class _Languages(TypedDict, total=False):
    languages: str  # the corpus's languages in words ("English 52%, German 48%"; "" when not known)


class _StandIn(_Languages, total=False):
    chosen_words: str  # the rule the benchmark chose for the use, in words (the same while the run works)
    stand_in: str  # the rule ranking in its place until its scores are in, in words ("" when none)


class LabelFreeGround(_StandIn):
    """The provisional label-free choice (:func:`flare_core.answer.label_free.provisional_choice`)."""

    use: str
    use_words: str
    rule: str
    rule_words: str
    cannot_read: list[str]  # candidates that cannot read the corpus's writing (ranked last by the rule)
    choice: str
    short_list: list[str]
    odds: dict[str, Any]


class _Details(TypedDict, total=False):
    details: str  # how the answer was reached, for a person who opens it


class Decision(_Details):
    """The fields a ground decides (:mod:`flare_core.answer.decide`): ``basis`` is "labels", "few labels",
    "label-free" or "unranked"; ``details`` (optional) how the answer was reached."""

    basis: str
    recommended: str | None
    settled: bool
    headline: str
    summary: str
    tied_with: list[str]
    short_list: list[str]
    next_step: str


class _Cost(TypedDict, total=False):
    cost: dict[str, Any]  # the cheapest good-enough model (choosing.tradeoff.cheapest_within), when measured


class Verdict(MapVerdict, _Cost, _Details):
    """Schema 3: the map's keys (``headline`` … ``recommended`` now those of the deciding ground), the
    :class:`Decision`'s, the blocks behind each ground (None when absent), the ``agreement`` (Spearman of
    the label-free ranking with the labels), the map's own ``map_headline`` and ``map_summary``, ``map_note``
    (why the map's leader is not the answer, when it is not), ``run_finished`` and ``pending`` (the
    candidates not embedded yet: the answer compares the others). ``provisional`` is true while the answer
    may still change: the run is not finished, candidates are pending, or its ground has not settled the
    choice."""

    basis: str
    settled: bool
    short_list: list[str]
    next_step: str
    labels: LabelsGround | None
    few_labels: FewLabelsGround | None
    label_free: LabelFreeGround | None
    agreement: float | None
    map_headline: str
    map_summary: str
    map_note: str | None
    run_finished: bool
    pending: list[str]


def schema_version(verdict: Mapping[str, Any]) -> int:
    """The schema version of a stored ``verdict`` (1 for an old run's verdict without one)."""
    if not isinstance(verdict, Mapping):
        raise ValueError(f"a verdict is a dict, got {type(verdict).__name__}")
    return int(verdict.get("version", 1))


def has_trust(verdict: Mapping[str, Any]) -> bool:
    """Whether ``verdict`` carries the label-free ranking and its trust checks (schema 2 or later)."""
    return schema_version(verdict) >= MAP_VERSION


def has_grounds(verdict: Mapping[str, Any]) -> bool:
    """Whether ``verdict`` carries the answer's grounds (schema 3 or later)."""
    return schema_version(verdict) >= VERDICT_VERSION


def load_verdict(run: Run) -> Verdict | None:
    """The verdict stored with ``run`` as written (any schema: see :func:`schema_version`), or None
    before one is written."""
    return run.load_json(VERDICT_FILE) if run.has(VERDICT_FILE) else None


def save_verdict(run: Run, verdict: Verdict) -> None:
    """Store ``verdict`` with ``run`` (an atomic write: readers see the old or the new one)."""
    if schema_version(verdict) != VERDICT_VERSION:
        raise ValueError(
            f"only a verdict of schema {VERDICT_VERSION} is written, got {schema_version(verdict)}"
        )
    run.save_json(verdict, VERDICT_FILE)
