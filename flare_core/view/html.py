"""HTML pieces of the report: escaping, tables of any values, figure ``<div>``s, and the corpus texts
(with the means to keep them out of a report that must not show them)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from flare_core.store.texts import TextMatcher
from flare_core.view.tables import (
    BLANK,
    number_words,
    settings_frame,
    shown_columns,
    shown_frame,
    value_words,
)

MAX_TABLE_ROWS = 200

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; \
max-width: 1180px;
       padding: 1.5rem 2rem 4rem; color: #1f2933; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #d9dee3; padding-bottom: 0.25rem; \
margin-top: 2.4rem; }
h3 { margin-top: 1.6rem; }
.meta { color: #52606d; margin-top: 0; }
.status { display: inline-block; padding: 0.1rem 0.55rem; border-radius: 0.8rem; font-weight: 600; \
font-size: 0.9rem; }
.status-done { background: #e3f9e5; color: #1f7a37; } .status-failed { background: #ffe3e3; color: #a61b1b; }
.status-running, .status-queued { background: #e6f0ff; color: #1c4fa0; } \
.status-cancelled { background: #fff3c4; color: #8d6708; }
.recommendation { background: #f0f7ff; border-left: 4px solid #2f6fde; padding: 0.8rem 1rem; \
font-size: 1.05rem; }
.recommendation.success { background: #effaf1; border-left-color: #2e8540; }
.recommendation.warning { background: #fff8e6; border-left-color: #b7791f; }
.recommendation.error { background: #fdf0ef; border-left-color: #c0392b; }
.missing { color: #7b8794; font-style: italic; }
.error { background: #fff0f0; border-left: 4px solid #d64545; padding: 0.6rem 1rem; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.86rem; }
th, td { border: 1px solid #d9dee3; padding: 0.22rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f5f7fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; } nav ul { columns: 2; } .note { color: #52606d; font-size: 0.9rem; }
"""


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and math.isnan(float(value)))


def _cell(value: Any) -> tuple[str, bool]:
    """Escaped cell text and whether it is a number ("—" for a missing value, a list or mapping in words)."""
    if is_missing(value) or value is pd.NA or value is pd.NaT:
        return BLANK, False
    if isinstance(value, bool | np.bool_):
        return ("yes" if value else "no"), False
    if isinstance(value, int | np.integer):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value)), True
    if isinstance(value, float | np.floating):
        return number_words(value), True
    if isinstance(value, dict | list | tuple | np.ndarray):
        return escape(value_words(value)), False
    return escape(value), False


def table(frame: pd.DataFrame, max_rows: int = MAX_TABLE_ROWS) -> str:
    """An HTML table of ``frame`` as a page shows it (:mod:`flare_core.view.tables`): headings in words
    with their symbol as a tooltip, numbers to 3 significant figures, dates as dates; escaped."""
    if frame is None or frame.empty:
        return '<p class="missing">(empty table)</p>'
    shown = shown_frame(frame.head(max_rows))
    head = "".join(
        f'<th title="{escape(c.help)}">{escape(c.heading)}</th>'
        if c.help
        else f"<th>{escape(c.heading)}</th>"
        for c in shown_columns(shown)
    )
    rows = []
    for record in shown.itertuples(index=False, name=None):
        cells = []
        for value in record:
            text, numeric = _cell(value)
            cells.append(f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = f'<p class="note">Showing {max_rows} of {len(frame):,} rows.</p>' if len(frame) > max_rows else ""
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>{more}"
    )


def kv_table(mapping: Mapping[str, Any]) -> str:
    """A (nested) mapping as a table of settings and their values in words (never JSON)."""
    if not mapping:
        return '<p class="missing">(none recorded)</p>'
    return table(settings_frame(mapping), max_rows=10_000)


def missing(what: str) -> str:
    return f'<p class="missing">{escape(what)}: not computed in this run.</p>'


def records_frame(records: Any) -> pd.DataFrame:
    """Records (possibly with nested objects, e.g. collapse statistics) as a flat DataFrame."""
    if not records:
        return pd.DataFrame()
    return pd.json_normalize(records, sep=".")


def figure_div(fig: Any, div_id: str) -> str:
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )


def truncate(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class CorpusTexts:
    """The run's corpus texts, and the means to keep them out of a report that must not show them (the rule
    of :mod:`flare_core.store.texts`)."""

    def __init__(self, texts: Sequence[str], include: bool) -> None:
        self._matcher = TextMatcher(texts)
        self.texts = self._matcher.texts
        self.include = include and any(self.texts)

    def get(self, row: int, limit: int) -> str | None:
        if not self.include or not 0 <= row < len(self.texts):
            return None
        return truncate(self.texts[row], limit)

    def scrub(self, obj: Any) -> Any:
        """``obj`` with any string that is (part of) a corpus text replaced, unless texts are included."""
        return obj if self.include else self._matcher.scrub(obj)
        if isinstance(obj, str):
            return "[corpus text removed]" if self._is_text(obj) else obj
        if isinstance(obj, dict):
            return {k: self.scrub(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.scrub(v) for v in obj]
        return obj
