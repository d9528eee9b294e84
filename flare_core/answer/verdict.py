"""The plain-language verdict of a run: which model to use, how far to trust that, and why.

The verdict is built from one estimator's ranking of the candidates (the first estimator that ran,
FLARE's flows by default) and the :mod:`trust assessment <flare_core.answer.trust>`. Its first two
sentences (``headline`` and ``summary``) are for anyone; ``checks`` carry the figures. With a *low*
trust level no model is recommended: the headline says so and the summary gives the reasons.

Schema (``verdict.json``, version 2: :class:`~flare_core.answer.stored.MapVerdict`)::

    version, provisional, estimator, score_label
    recommended        model id, or None when trust is low
    leading            the top-ranked candidate (shown for information when nothing is recommended)
    trust              {"level": "high" | "moderate" | "low", "checks": [{name, status, figure, text, value}]}
    headline, summary  one sentence each; text: the whole verdict in one paragraph
    tied_with          candidates whose interval overlaps the leader's
    ranking            [{model, score, ci_low, ci_high, rank, role}] best first
    controls           [{model, kind, score, would_rank, of, text}]
    failed             models that could not be embedded or scored
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.sufficiency.registry import estimator_label
from flare_core.answer.stored import MAP_VERSION, MapVerdict
from flare_core.answer.trust import TrustAssessment, overlapping

__all__ = ["MIN_RANKED", "overlapping", "unranked_verdict", "verdict"]

#: A ranking compares candidates: it needs at least this many scored ones.
MIN_RANKED = 2


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _join(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _control_rows(controls: pd.DataFrame | None, ranked: pd.DataFrame) -> list[dict[str, Any]]:
    if controls is None or controls.empty:
        return []
    rows = []
    for row in controls.itertuples(index=False):
        score = float(row.score)
        place = int(row.would_rank) if np.isfinite(row.would_rank) else None
        beaten = ranked.loc[ranked["score"] <= score, "model"].tolist()  # a tie is no win for a candidate
        if place is None:
            text = f"{row.model} ({row.kind}) could not be scored."
        elif beaten:
            text = (
                f"{row.model} ({row.kind}) would rank {_ordinal(place)} of {len(ranked) + 1}, above "
                f"{_join(beaten)}."
            )
        else:
            text = f"{row.model} ({row.kind}) would rank last, below every candidate, as it should."
        rows.append(
            {
                "model": row.model,
                "kind": row.kind,
                "score": score,
                "would_rank": place,
                "of": len(ranked) + 1,
                "text": text,
            }
        )
    return rows


def verdict(
    scores: pd.DataFrame,
    *,
    estimator: str,
    trust: TrustAssessment,
    controls: pd.DataFrame | None = None,
    partial: Sequence[str] = (),
    failed: Sequence[str] = (),
    provisional: bool = False,
) -> MapVerdict:
    """The verdict (schema in the module docstring) of ranked candidates ``scores``.

    ``scores``: columns ``model``, ``score``, ``ci_low``, ``ci_high`` (ranked models only: candidates
    and the partial models asked for by name, listed in ``partial``). ``controls``: the controls'
    scores with columns ``model``, ``kind``, ``score``, ``would_rank``. ``provisional`` marks a verdict
    written before the run has finished (its remaining checks are not in yet).
    """
    if scores.empty:
        raise ValueError("no scores to build a verdict from")
    if not isinstance(trust, TrustAssessment):
        raise ValueError(f"trust must be a TrustAssessment, got {type(trust).__name__}")
    ranked = scores.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
    leader = str(ranked.iloc[0]["model"])
    tied = overlapping(ranked, leader) if len(ranked) > 1 else []
    flag = " (a partial model: only the first layers of a trained model)" if leader in partial else ""
    level = trust.level
    if level == "low":
        headline = "The label-free ranking cannot be trusted on this corpus."
        reasons = [c.text for c in trust.failed]
        summary = " ".join(reasons[:2]) + f" For information only, {leader}{flag} leads the ranking."
        recommended = None
    else:
        recommended = leader
        if level == "high":
            headline = f"The label-free ranking puts {leader}{flag} first, and every check of it passed."
            summary = (
                f"Of the {len(ranked)} candidates it carries the most information about the others on your "
                "texts, and every check of this ranking passed."
            )
        else:
            headline = f"The label-free ranking puts {leader}{flag} first, with moderate confidence."
            summary = " ".join(c.text for c in trust.warnings[:2])
    if provisional:
        headline = "Provisional: " + headline[0].lower() + headline[1:]
        summary += " This is the first estimator's answer; the final verdict comes when the run ends."
    control_rows = _control_rows(controls, ranked)
    details = [c.text for c in trust.checks if c.status != "pass"] if level != "low" else []
    text = " ".join([headline, summary, *details, *[r["text"] for r in control_rows]])
    if failed:
        text += f" Not ranked because they failed: {_join(list(failed))}."
    columns = [c for c in ("model", "score", "ci_low", "ci_high", "rank") if c in ranked]
    ranking = ranked[columns].assign(
        role=["partial" if m in partial else "candidate" for m in ranked["model"]]
    )
    return {
        "version": MAP_VERSION,
        "provisional": bool(provisional),
        "estimator": estimator,
        "score_label": f"information sufficiency, {estimator_label(estimator)} (nats per dimension)",
        "recommended": recommended,
        "leading": leader,
        "trust": trust.to_dict(),
        "headline": headline,
        "summary": summary.strip(),
        "text": text,
        "tied_with": tied,
        "ranking": ranking.replace({np.nan: None}).to_dict(orient="records"),
        "controls": control_rows,
        "failed": list(failed),
    }


def unranked_verdict(
    candidates: Sequence[str],
    *,
    facts: Sequence[str] = (),
    failed: Sequence[str] = (),
    provisional: bool = False,
    drawing: bool = False,
) -> MapVerdict:
    """The verdict of a run with fewer than :data:`MIN_RANKED` scored candidates: no ranking, so no
    recommendation, and what the run can still tell (``facts``: sentences on the run's one model, such as
    its accuracy on the labels or its collapse). Same schema as :func:`verdict`, with ``ranking`` empty.
    ``drawing``: the estimators of a running run have not scored the candidates yet (the map is still
    being drawn), which is said instead."""
    candidates = list(candidates)
    if drawing and len(candidates) >= MIN_RANKED:
        headline = (
            "The map is still being drawn: how much each model tells about the others is being measured."
        )
        summary = "The label-free ranking appears here when the run has measured it."
        text = " ".join([headline, summary])
        if failed:
            text += f" Not ranked because they failed: {_join(list(failed))}."
        return {
            **unranked_verdict(candidates, failed=failed, provisional=provisional),
            "headline": headline,
            "summary": summary,
            "text": text,
        }
    if len(candidates) == 1:
        headline = f"Only one candidate, {candidates[0]}: there is nothing to rank it against."
    elif candidates:
        headline = f"{_join(candidates)} could not be scored against each other."
    else:
        headline = "No candidate to rank: every model of this run is a control."
    summary = (
        f"A ranking needs at least {MIN_RANKED} candidates; add models to the pool to compare them. "
        "The other analyses of this run describe the model you chose."
    )
    if facts:
        summary += " " + " ".join(facts)
    text = " ".join([headline, summary])
    if failed:
        text += f" Not ranked because they failed: {_join(list(failed))}."
    return {
        "version": MAP_VERSION,
        "provisional": bool(provisional),
        "estimator": None,
        "score_label": None,
        "recommended": None,
        "leading": None,
        "trust": {"level": None, "checks": []},
        "headline": headline,
        "summary": summary,
        "text": text,
        "tied_with": [],
        "ranking": [],
        "controls": [],
        "failed": list(failed),
    }
