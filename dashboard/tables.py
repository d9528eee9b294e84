"""Tables as people read them on every page: headings in words with the symbol in their help, numbers to 3
significant figures, dates as dates (:mod:`flare_core.view.tables`, which the HTML report reads too)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from flare_core.view.tables import NUMBER_FORMAT, shown_columns, shown_frame


def column_config(frame: pd.DataFrame) -> dict[str, Any]:
    """Streamlit's column settings of ``frame`` (as :func:`shown_frame` leaves it): each column's heading
    in words and its help; fractions to 3 significant figures, counts as whole numbers."""
    config: dict[str, Any] = {}
    for column in shown_columns(frame):
        if column.kind == "number":
            config[column.name] = st.column_config.NumberColumn(
                column.heading, help=column.help or None, format=NUMBER_FORMAT
            )
        elif column.kind == "whole":
            config[column.name] = st.column_config.NumberColumn(column.heading, help=column.help or None)
        else:
            config[column.name] = st.column_config.TextColumn(column.heading, help=column.help or None)
    return config


def show_table(frame: pd.DataFrame, *, columns: dict[str, Any] | None = None, **options: Any) -> Any:
    """``frame`` as a table without its index, shown as :func:`column_config` says; ``columns`` replace the
    settings of the columns they name (a link, a bar, a width), ``options`` go to ``st.dataframe``.
    Returns what ``st.dataframe`` returns (the selection, with ``on_select``)."""
    shown = shown_frame(frame)
    config = column_config(shown)
    config.update(columns or {})
    return st.dataframe(shown, hide_index=True, column_config=config, **options)
