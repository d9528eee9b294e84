"""The verdict as people read it: a headline in the colour of its trust level, a sentence or two, and the
trust checks as a table. The Overview and Validation pages and the HTML report all show it from here.

Reads ``verdict.json`` of schema 2 (``flare_core.answer.verdict``); a verdict of an older run (schema 1: a
``text`` and a ``confidence``) is shown as its text, in the neutral tone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: The tone of each trust level: the name of a Streamlit alert (``st.success``…) and a report CSS class.
TONES = {"high": "success", "moderate": "warning", "low": "error"}
STATUS_WORDS = {"pass": "passed", "warn": "caution", "fail": "failed", "not checked": "not checked"}
CHECK_WORDS = {
    "stability": "Same answer from fewer texts",
    "agreement": "Both estimators agree",
    "controls": "Untrained model ranks below trained ones",
    "shuffled": "Scrambled model carries no information",
    "sample size": "Enough texts for the dimensions",
    "pool": "Enough candidates to compare",
    "separation": "Leader is clearly ahead",
}


@dataclass(frozen=True)
class VerdictView:
    """What to show: ``tone`` (success, warning, error or info), the ``headline``, the ``summary``,
    the trust ``level`` (None for an old run), the ``checks`` table and the controls' sentences."""

    tone: str
    headline: str
    summary: str
    level: str | None
    provisional: bool
    checks: pd.DataFrame = field(repr=False)
    controls: list[str] = field(default_factory=list)


def verdict_view(verdict: dict[str, Any]) -> VerdictView:
    """The :class:`VerdictView` of a stored verdict (schema 1 or 2)."""
    if not isinstance(verdict, dict):
        raise ValueError(f"a verdict is a dict, got {type(verdict).__name__}")
    if verdict.get("version", 1) < 2:
        return VerdictView("info", str(verdict.get("text", "")), "", None, False, trust_checks({}))
    trust = verdict.get("trust") or {}
    level = trust.get("level")
    return VerdictView(
        tone=TONES.get(level, "info"),
        headline=str(verdict.get("headline", "")),
        summary=str(verdict.get("summary", "")),
        level=level,
        provisional=bool(verdict.get("provisional")),
        checks=trust_checks(trust),
        controls=[str(row["text"]) for row in verdict.get("controls", []) if row.get("text")],
    )


def trust_checks(trust: dict[str, Any]) -> pd.DataFrame:
    """One row per trust check: ``check`` (plain words), ``result``, ``figure``, ``meaning``."""
    rows = [
        {
            "check": CHECK_WORDS.get(c["name"], c["name"]),
            "result": STATUS_WORDS.get(c["status"], c["status"]),
            "figure": c.get("figure", ""),
            "meaning": c.get("text", ""),
        }
        for c in trust.get("checks", [])
    ]
    return pd.DataFrame(rows, columns=["check", "result", "figure", "meaning"])


def trust_sentence(level: str | None) -> str:
    """One sentence on what the trust level means."""
    return {
        "high": "Trust: high — every check of this ranking passed.",
        "moderate": "Trust: moderate — no check failed, but some could not pass; see the checks.",
        "low": "Trust: low — at least one check failed, so no model is recommended.",
    }.get(level or "", "")
