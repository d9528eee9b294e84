"""How far to trust a run's ranking: seven checks, each with its figure and one plain sentence.

The trust level is *high* only when every check passes, *low* as soon as one fails (the verdict then
names no model: "no reliable recommendation on this corpus"), and *moderate* otherwise. The checks and
their thresholds:

==============  ====================================================  ==========  ==========
check           figure                                                pass        fail
==============  ====================================================  ==========  ==========
stability       Spearman of rankings on 20% of the validation texts   ≥ 0.9       < 0.7
agreement       Spearman between the flow and mixture rankings        ≥ 0.6       < 0.3
controls        random-weights controls below every trained model     all below   one above
shuffled        score of the rows-shuffled control / best score       ≤ 0.10      > 0.25
sample size     training texts per estimated dimension; validation    ≥ 20, ≥ 100 < 5 or < 50
                texts; generalisation gap against the IS values
pool            trained candidates ranked                              ≥ 8         < 5
separation      candidates whose interval overlaps the leader's       0           —
==============  ====================================================  ==========  ==========

A check whose evidence is missing (one estimator only, no control in the pool) cannot pass: it reads
"not checked" and the level is at most moderate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

STATUSES = ("pass", "warn", "fail", "not checked")
LEVELS = ("high", "moderate", "low")
#: Kinds of control a run can hold (see :mod:`flare_core.encoders.model_pool`).
RANDOM_WEIGHTS, ROWS_SHUFFLED = "random weights", "rows shuffled"


@dataclass(frozen=True)
class Check:
    """One trust check: ``status`` in :data:`STATUSES`, the ``figure`` it rests on, a plain sentence."""

    name: str
    status: str
    figure: str
    text: str
    value: float | None = None


@dataclass(frozen=True)
class Evidence:
    """What the checks read, gathered from a finished run (see
    :func:`flare_core.answer.evidence.ranking_verdict`).

    ``scores``: the ranked candidates (columns ``model``, ``score``, ``ci_low``, ``ci_high``);
    ``controls``: control model → (kind, score under the same estimator); ``n_train``/``n_val``: texts
    of the estimator's split; ``dims``: the dimensions the densities were fitted in (after reduction);
    ``raw_dim``: the widest embedding; ``median_gap`` and ``median_is``: medians over pairs of the
    conditional flow's generalisation gap Δ_emp and of IS, in nats.
    """

    scores: pd.DataFrame
    controls: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    stability: float | None = None
    agreement: float | None = None
    n_train: int = 0
    n_val: int = 0
    dims: int | None = None
    raw_dim: int | None = None
    median_gap: float | None = None
    median_is: float | None = None


@dataclass(frozen=True)
class TrustAssessment:
    level: str
    checks: list[Check]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status in ("warn", "not checked")]

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "checks": [asdict(c) for c in self.checks]}


def _finite(value: float | None) -> bool:
    return value is not None and bool(np.isfinite(value))


def _graded(value: float, good: float, bad: float) -> str:
    return "pass" if value >= good else ("fail" if value < bad else "warn")


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def check_stability(stability: float | None) -> Check:
    if not _finite(stability):
        return Check(
            "stability", "not checked", "—", "Ranking stability was not measured (no validation study)."
        )
    status = _graded(stability, 0.9, 0.7)
    words = {"pass": "barely changes", "warn": "changes somewhat", "fail": "changes a lot"}[status]
    return Check(
        "stability",
        status,
        f"ρ = {stability:.2f}",
        f"The ranking {words} when only a fifth of the held-out texts is used (agreement {stability:.2f}).",
        stability,
    )


def check_agreement(agreement: float | None) -> Check:
    if not _finite(agreement):
        return Check(
            "agreement",
            "not checked",
            "—",
            "Only one estimator ran, so there is no second opinion on the ranking.",
        )
    status = _graded(agreement, 0.6, 0.3)
    if agreement < 0:
        text = (
            "The two ways of estimating the score rank the models in opposite orders (agreement "
            f"{agreement:.2f}"
        )
    else:
        words = {"pass": "agree", "warn": "agree only partly", "fail": "hardly agree"}[status]
        text = (
            f"The two ways of estimating the score (flows and Gaussian mixtures) {words} on the order of the "
            f"models (agreement {agreement:.2f}"
        )
    text += (
        "; 1 = same order). This compares two estimators with each other; the ranking's stability compares "
        "one estimator with itself on fewer texts, so the ranking can be stable and still depend on the "
        "estimator."
    )
    return Check("agreement", status, f"ρ = {agreement:.2f}", text, agreement)


def check_controls(scores: pd.DataFrame, controls: Mapping[str, tuple[str, float]]) -> Check:
    random = {m: s for m, (kind, s) in controls.items() if kind == RANDOM_WEIGHTS and _finite(s)}
    scores = scores[np.isfinite(scores["score"].astype(float))]
    if not random or scores.empty:
        return Check(
            "controls",
            "not checked",
            "—",
            "No random-weights control was in the pool to show where a model that learned nothing lands.",
        )
    weakest = scores.loc[scores["score"].idxmin()]
    above = {m: s for m, s in random.items() if s >= weakest["score"]}
    if not above:
        return Check(
            "controls",
            "pass",
            f"{len(random)} below all",
            f"The random-weights control{'s' if len(random) > 1 else ''} ({_join(sorted(random))}) scored "
            "below every trained model, as it should.",
            0.0,
        )
    beaten = scores.loc[scores["score"] <= max(above.values()), "model"].tolist()
    return Check(
        "controls",
        "fail",
        f"{len(beaten)} trained below",
        f"A network with random weights ({_join(sorted(above))}) scored above {_join(beaten)}: on this "
        "corpus the score rewards something other than what training teaches.",
        float(len(beaten)),
    )


def check_shuffled(scores: pd.DataFrame, controls: Mapping[str, tuple[str, float]]) -> Check:
    shuffled = {m: s for m, (kind, s) in controls.items() if kind == ROWS_SHUFFLED and _finite(s)}
    best = float(scores["score"].max()) if not scores.empty else float("nan")
    if not shuffled or not (best > 0):
        return Check(
            "shuffled",
            "not checked",
            "—",
            "No rows-shuffled control was in the pool to show the score of vectors unrelated to the texts.",
        )
    ratio = max(shuffled.values()) / best
    status = "pass" if ratio <= 0.10 else ("fail" if ratio > 0.25 else "warn")
    words = "stays near zero" if status == "pass" else "is not near zero"
    return Check(
        "shuffled",
        status,
        f"{ratio:.0%} of the best",
        f"Vectors handed to the wrong texts get a score that {words} ({ratio:.0%} of the leader's).",
        ratio,
    )


def check_sample_size(evidence: Evidence) -> Check:
    dims = evidence.dims or evidence.raw_dim or 1
    per_dim = evidence.n_train / dims
    problems, status = [], "pass"
    if evidence.n_val < 50 or per_dim < 5:
        status = "fail"
        problems.append(
            f"{evidence.n_train + evidence.n_val} texts are too few to estimate densities in {dims} "
            f"dimensions ({evidence.n_val} held out)"
        )
    elif evidence.n_val < 100 or per_dim < 20:
        status = "warn"
        problems.append(f"{evidence.n_val} held-out texts give wide intervals")
    if (
        _finite(evidence.median_gap)
        and _finite(evidence.median_is)
        and evidence.median_gap > evidence.median_is
    ):
        status = "fail" if status == "fail" else "warn"
        problems.append(
            f"the models fit their training texts much better than new ones (gap {evidence.median_gap:.2g} "
            f"nats against IS values of {evidence.median_is:.2g})"
        )
    if evidence.raw_dim and evidence.n_train + evidence.n_val < evidence.raw_dim:
        status = "fail" if status == "fail" else "warn"
        problems.append(
            f"there are fewer texts ({evidence.n_train + evidence.n_val}) than dimensions "
            f"({evidence.raw_dim})"
        )
    text = (
        f"Enough texts: {evidence.n_train} to fit and {evidence.n_val} to test, in {dims} dimensions."
        if not problems
        else problems[0][0].upper()
        + problems[0][1:]
        + (f"; {'; '.join(problems[1:])}" if problems[1:] else "")
        + "."
    )
    return Check("sample size", status, f"{per_dim:.0f} texts per dimension", text, per_dim)


def check_pool(n_candidates: int) -> Check:
    if n_candidates >= 8:
        status, text = "pass", f"{n_candidates} trained candidates: enough for the ranking to mean something."
    elif n_candidates >= 5:
        status = "warn"
        text = (
            f"Only {n_candidates} trained candidates: the ranking can separate clearly weaker models, but a "
            "pool this small often misplaces close ones (the method was validated on 8 to 45 models)."
        )
    else:
        status = "fail"
        text = (
            f"Only {n_candidates} trained candidates: a pool this small can flag a clearly broken model but "
            "cannot pick the best one reliably (agreement with task scores reaches 0.8 only from about "
            "15 models in the published study of the mixture estimator, EMIR). Add models to the pool."
        )
    return Check("pool", status, f"{n_candidates} candidates", text, float(n_candidates))


def overlapping(scores: pd.DataFrame, model: str) -> list[str]:
    """Models whose bootstrap interval overlaps ``model``'s (they cannot be told apart on this corpus)."""
    row = scores.set_index("model").loc[model]
    others = scores[scores["model"] != model]
    hit = (others["ci_low"] <= row["ci_high"]) & (others["ci_high"] >= row["ci_low"])
    return others.loc[hit, "model"].tolist()


def check_separation(scores: pd.DataFrame) -> Check:
    if len(scores) < 2 or scores[["ci_low", "ci_high"]].isna().any(axis=None):
        return Check("separation", "not checked", "—", "No intervals to tell the leader from the others.")
    leader = scores.sort_values("score", ascending=False).iloc[0]["model"]
    tied = overlapping(scores, leader)
    if not tied:
        return Check("separation", "pass", "0 tied", f"{leader} is ahead of every other candidate.", 0.0)
    return Check(
        "separation",
        "warn",
        f"{len(tied)} tied",
        f"{leader} cannot be told apart from {_join(tied)}: their intervals overlap.",
        float(len(tied)),
    )


def assess(evidence: Evidence) -> TrustAssessment:
    """Run every check on ``evidence``; the level follows the rule in the module docstring."""
    if not isinstance(evidence, Evidence):
        raise ValueError(f"evidence must be an Evidence, got {type(evidence).__name__}")
    checks = [
        check_stability(evidence.stability),
        check_agreement(evidence.agreement),
        check_controls(evidence.scores, evidence.controls),
        check_shuffled(evidence.scores, evidence.controls),
        check_sample_size(evidence),
        check_pool(len(evidence.scores)),
        check_separation(evidence.scores),
    ]
    statuses = {c.status for c in checks}
    level = "low" if "fail" in statuses else ("high" if statuses == {"pass"} else "moderate")
    return TrustAssessment(level, checks)
