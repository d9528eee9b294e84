"""The answer's small words, shared by every ground: lists of names, percentages, points and intervals."""

from __future__ import annotations


def join_names(names: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def percent(value: float) -> str:
    """A share as a percentage to one decimal: 0.712 → "71.2%"."""
    return f"{100 * value:.1f}%"


def points_words(tolerance: float) -> str:
    """ "2 points", "1 point"."""
    return f"{float(tolerance):g} point" + ("" if float(tolerance) == 1 else "s")


#: Intervals wider than this share of the scale say nothing yet: shown as :data:`NOT_MEASURED`.
WIDEST_INTERVAL = 0.5
NOT_MEASURED = "not measured yet"


def interval_words(low: float, high: float, unit: str = "%") -> str:
    """ "71.2% and 80.4%": a 95% interval of a share in words, or :data:`NOT_MEASURED` when it spans more
    than :data:`WIDEST_INTERVAL` of the scale (0.0% to 100.0% says nothing)."""
    if float(high) - float(low) > WIDEST_INTERVAL:
        return NOT_MEASURED
    return f"{100 * float(low):.1f}{unit} and {100 * float(high):.1f}{unit}"
