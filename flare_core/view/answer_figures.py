"""Charts of the answer: each model's chance of being the best as labels arrive, and quality against cost
(the Pareto front and the cheapest good-enough model). Drawn by the dashboard and the HTML report alike."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from flare_core.view.figures import HIGHLIGHT, PALETTE, apply_layout, category_style, whole_ticks


def chance_history(
    history: pd.DataFrame, title: str = "Chance of being the best, label by label", counted: str = "labels"
) -> go.Figure:
    """One line per model: its chance of being the best (``p_best``) after each batch of labels
    (``n_labels``); ``history`` has the columns ``n_labels``, ``model``, ``p_best``. ``counted`` names what
    ``n_labels`` counts on the axis and in the hover text ("labels", "judged queries")."""
    fig = go.Figure()
    for index, (model, group) in enumerate(history.groupby("model", sort=False)):
        colour, symbol = category_style(index)
        group = group.sort_values("n_labels")
        fig.add_trace(
            go.Scatter(
                x=group["n_labels"],
                y=group["p_best"],
                mode="lines+markers",
                name=html.escape(str(model)),
                line={"color": colour},
                marker={"symbol": symbol, "color": colour},
                hovertemplate="%{y:.0%} after %{x} "
                + counted
                + "<extra>"
                + html.escape(str(model))
                + "</extra>",
            )
        )
    fig.update_yaxes(title="chance of being the best", range=[0, 1], tickformat=".0%")
    fig.update_xaxes(title=f"{counted} so far", **whole_ticks(history["n_labels"]))
    return apply_layout(fig, title, height=360)


#: The cost axis of the quality–cost chart: its title and whether more of it is cheaper.
COST_AXES = {
    "texts_per_s": "speed: texts embedded per second on this machine (log scale; right is cheaper)",
    "bytes_per_vector": "storage: bytes per vector at float32 (log scale; left is cheaper)",
}


_COST_UNITS = {"texts_per_s": "texts per second", "bytes_per_vector": "bytes per vector"}


def quality_cost(
    quality: pd.DataFrame,
    costs: pd.DataFrame,
    cost: str = "texts_per_s",
    best: str | None = None,
    *,
    mark: bool = True,
) -> go.Figure:
    """Each model's quality (y, with its interval) against its cost (x: ``texts_per_s`` or
    ``bytes_per_vector``), the Pareto front drawn as a line through the models no other beats on both, and
    the cheapest good-enough model (:func:`flare_core.choosing.tradeoff.cheapest_within`) marked.

    ``quality``: model, quality, ci_low, ci_high, label; ``costs``: model, texts_per_s,
    bytes_per_vector_float32 (see :mod:`flare_core.choosing.tradeoff`); ``best``: the model the others are
    measured against (the answer's choice; by default the one of highest quality); ``mark``: whether to
    mark the cheapest good-enough model (not where the quality cannot say which are good enough)."""
    from flare_core.choosing.tradeoff import cheapest_within, pareto_front, tradeoff_table

    table = tradeoff_table(quality, costs)
    if cost not in table.columns:
        table[cost] = np.nan
    table = table[np.isfinite(table[cost].astype(float)) & (table[cost].astype(float) > 0)]
    table = table.assign(front=pareto_front(table, cost)).sort_values(cost, kind="stable")
    pick = cheapest_within(quality, costs, cost=cost, best=best) if mark else None
    names = [html.escape(str(m)) for m in table["model"]]
    # labels above and below in turn along the cost axis, so that neighbours' names do not overlap
    positions = ["top center" if i % 2 == 0 else "bottom center" for i in range(len(table))]
    has_ci = table[["ci_low", "ci_high"]].notna().all(axis=1).any()
    error = {
        "type": "data",
        "symmetric": False,
        "visible": bool(has_ci),
        "color": "#999999",
        "array": (table["ci_high"] - table["quality"]).fillna(0),
        "arrayminus": (table["quality"] - table["ci_low"]).fillna(0),
    }
    fig = go.Figure()
    front = table[table["front"]]
    fig.add_trace(
        go.Scatter(
            x=front[cost],
            y=front["quality"],
            mode="lines",
            name="Pareto front (no model beats these on both)",
            line={"color": PALETTE[1], "dash": "dot", "shape": "hv" if cost == "bytes_per_vector" else "vh"},
            hoverinfo="skip",
        )
    )
    colours = [HIGHLIGHT if pick and m == pick["model"] else PALETTE[0] for m in table["model"]]
    fig.add_trace(
        go.Scatter(
            x=table[cost],
            y=table["quality"],
            mode="markers+text",
            text=names,
            textposition=positions,
            marker={"color": colours, "size": [13 if f else 8 for f in table["front"]], "symbol": "circle"},
            error_y=error,
            name="models",
            showlegend=False,
            cliponaxis=False,
            hovertemplate="%{text}<br>quality %{y:.4g}<br>%{x:.4g} "
            + _COST_UNITS.get(cost, cost)
            + "<extra></extra>",
        )
    )
    label = str(table["label"].iloc[0]) if len(table) else "quality"
    fig.update_xaxes(type="log", title=COST_AXES.get(cost, cost))
    fig.update_yaxes(title=html.escape(label))
    title = "Quality against speed" if cost == "texts_per_s" else "Quality against storage"
    return apply_layout(fig, title, height=480)
