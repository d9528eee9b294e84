"""Every chart FLARE Studio draws: the dashboard pages and the HTML report call these functions (no
Streamlit here), so a run looks the same in both."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from flare_core.analyses.sufficiency.registry import estimator_label
from flare_core.view.glossary import LAYER_AXES, label

DIVERGING = "RdBu"
SEQUENTIAL = "Viridis"
#: Okabe & Ito's colour-blind-safe categorical palette (black last); every chart's categories use it in
#: this order, so two categories always get clearly different colours for all common kinds of colour
#: blindness.
PALETTE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
#: Marker symbols that tell categories apart once the palette's colours repeat (more than 8 categories).
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross")
HIGHLIGHT = PALETTE[3]
GREYS = [[0.0, "#f2f2f2"], [1.0, "#bdbdbd"]]
#: Below this many models a correlation takes only a handful of values (±0.5, ±1 with three models) and
#: says little: the correlation heatmap is drawn in grey with a warning in its title.
MIN_CORRELATION_MODELS = 5
#: Pairs drawn in a collapse scatter unless asked otherwise (a seeded sample above it).
DEFAULT_SCATTER_POINTS = 20_000


def category_style(index: int) -> tuple[str, str]:
    """The colour and marker symbol of the ``index``-th category: all distinct up to 48 categories."""
    return PALETTE[index % len(PALETTE)], SYMBOLS[(index // len(PALETTE)) % len(SYMBOLS)]


#: The template of every chart.
TEMPLATE = "plotly_white"


def apply_layout(fig: go.Figure, title: str, height: int = 420) -> go.Figure:
    """The common look; the margins grow to hold the tick labels and axis titles (never clipped). The title
    is HTML-escaped: it may name a model, and plotly draws the tags of its text (a link among them)."""
    _set_template(fig, TEMPLATE)
    fig.update_layout(
        title=html.escape(title, quote=False),
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        colorway=list(PALETTE),
    )
    fig.update_xaxes(automargin=True, title_standoff=8)
    fig.update_yaxes(automargin=True, title_standoff=8)
    return fig


def _set_template(fig: go.Figure, name: str) -> None:
    """Give ``fig`` the registered template ``name`` as plotly gives a new figure its default template:
    the registered object, already checked, is set without being checked and copied again. Through
    ``update_layout(template=name)`` that check and copy took about 17 ms a chart, and with three
    sessions on two cores most of a page's server time; the figure is the same."""
    layout = fig.layout
    layout._validate = False
    try:
        layout.template = pio.templates[name]
    finally:
        layout._validate = fig._validate


#: At most this many ticks on an axis of whole numbers.
MAX_WHOLE_TICKS = 8


def whole_ticks(values: Any, *, at_values: bool = True) -> dict[str, Any]:
    """Axis settings that put ticks on whole numbers only, for an axis that counts (models, labels,
    texts) and reaches the largest of ``values``: with ``at_values``, a tick at each value when there are
    few; else every ``dtick`` (1, 2, 5, 10, 20, …) from 0."""
    finite = [float(v) for v in np.asarray(values, dtype=float).ravel() if np.isfinite(v)]
    distinct = sorted(set(finite))
    if at_values and distinct and len(distinct) <= MAX_WHOLE_TICKS and all(v.is_integer() for v in distinct):
        return {"tickmode": "array", "tickvals": distinct, "ticktext": [f"{int(v):,}" for v in distinct]}
    top = max([abs(v) for v in finite] + [1.0])
    step = 1
    while top / step > MAX_WHOLE_TICKS:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": ",d"}


def ranking_bar(scores: pd.DataFrame, title: str = "Ranking") -> go.Figure:
    """Horizontal bars of ``score`` per ``model`` with the bootstrap interval (``ci_low``, ``ci_high``)."""
    ordered = scores.sort_values("score")
    fig = go.Figure(
        go.Bar(
            x=ordered["score"],
            y=[html.escape(str(m)) for m in ordered["model"]],
            orientation="h",
            error_x={
                "type": "data",
                "symmetric": False,
                "array": ordered["ci_high"] - ordered["score"],
                "arrayminus": ordered["score"] - ordered["ci_low"],
            },
            marker_color=PALETTE[0],
            hovertemplate="%{y}: %{x:.4g}<extra></extra>",
        )
    )
    fig.update_xaxes(title="score: what the model tells about the others (nats per dimension)")
    return apply_layout(fig, title, height=max(260, 40 * len(ordered) + 120))


def sufficiency_ranking(scores: pd.DataFrame, estimator: str) -> go.Figure:
    """The ranking bar of one estimator's scores, titled with the estimator's name."""
    return ranking_bar(scores, f"{estimator_label(estimator)}: how much each model tells about the others")


def is_heatmap(
    per_dim: pd.DataFrame, title: str = "How much each model (row) tells about each other model (column)"
) -> go.Figure:
    """Heatmap of a (sources × targets) matrix; NaN cells (self pairs) stay blank and show no hover."""
    fig = go.Figure(
        go.Heatmap(
            z=per_dim.to_numpy(dtype=float),
            x=[html.escape(str(c)) for c in per_dim.columns],
            y=[html.escape(str(i)) for i in per_dim.index],
            colorscale=SEQUENTIAL,
            colorbar={"title": "nats per<br>dimension"},
            hoverongaps=False,
            hovertemplate="%{y} → %{x}: %{z:.4g} nats per dimension<extra></extra>",
        )
    )
    fig.update_xaxes(title="model whose embedding is predicted")
    fig.update_yaxes(title="model that predicts it", autorange="reversed")
    return apply_layout(fig, title, height=max(360, 45 * len(per_dim) + 160))


def is_graph_figure(
    nodes: pd.DataFrame,
    edges: pd.DataFrame,
    title: str = "Which models inform which: groups of related models",
) -> go.Figure:
    """Directed IS graph: node size = score, colour = community, edge width = IS/d (arrows as annotations)."""
    fig = go.Figure()
    max_weight = float(edges["weight"].max()) if len(edges) else 1.0
    for edge in edges.itertuples():
        fig.add_annotation(
            x=edge.x1,
            y=edge.y1,
            ax=edge.x0,
            ay=edge.y0,
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=2,
            arrowsize=1,
            arrowwidth=0.5 + 4.0 * edge.weight / max_weight if max_weight > 0 else 1.0,
            arrowcolor="rgba(120,120,120,0.55)",
            standoff=12,
        )
    scores = nodes["score"].astype(float).fillna(0.0)
    span = float(scores.max() - scores.min()) or 1.0
    sizes = 18 + 30 * (scores - scores.min()) / span
    fig.add_trace(
        go.Scatter(
            x=nodes["x"],
            y=nodes["y"],
            mode="markers+text",
            text=[html.escape(str(n)) for n in nodes["name"]],
            textposition="top center",
            marker={
                "size": sizes,
                "color": [category_style(int(c))[0] for c in nodes["community"]],
                "symbol": [category_style(int(c))[1] for c in nodes["community"]],
                "line": {"width": 1, "color": "#333"},
            },
            customdata=np.column_stack([nodes["community"], scores]),
            hovertemplate="%{text}<br>group %{customdata[0]}<br>score %{customdata[1]:.4g}<extra></extra>",
        )
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply_layout(fig, title, height=520)


def scatter_points_range(
    n_pairs: int, default: int = DEFAULT_SCATTER_POINTS, least: int = 1_000
) -> tuple[int, int, int, int] | None:
    """The bounds of a "points drawn" slider over ``n_pairs`` pairs: ``(min, max, value, step)`` with max
    = ``n_pairs`` and value = min(``n_pairs``, ``default``); None when there are at most ``least`` pairs
    (all are drawn, nothing to choose)."""
    if n_pairs <= least:
        return None
    step = 1_000 if n_pairs >= 20_000 else 100
    return least, int(n_pairs), int(min(n_pairs, default)), step


def collapse_scatter(
    pairs: pd.DataFrame,
    title: str,
    max_points: int = DEFAULT_SCATTER_POINTS,
    seed: int = 0,
    texts: Sequence[str] | None = None,
) -> go.Figure:
    """d_μ vs d_Σ per text pair (WebGL; seeded sample above ``max_points``) with SOCM iso-lines at the
    50th, 90th and 99th percentiles and the ten most collapsed pairs circled (their texts in the hover
    when ``texts``, the corpus by row, are given)."""
    shown = pairs if len(pairs) <= max_points else pairs.sample(max_points, random_state=seed)
    fig = go.Figure(
        go.Scattergl(
            x=shown["d_mu"],
            y=shown["d_sigma"],
            mode="markers",
            marker={
                "size": 3,
                "color": shown["socm"],
                "colorscale": "Inferno",
                "colorbar": {"title": "collapse"},
                "opacity": 0.6,
            },
            customdata=shown[["i", "j", "socm"]].to_numpy(),
            hovertemplate="pair (%{customdata[0]}, %{customdata[1]})<br>means apart %{x:.3g}<br>"
            "token spreads apart %{y:.3g}<br>collapse %{customdata[2]:.3g}<extra></extra>",
            name=f"pairs ({len(shown):,} of {len(pairs):,})",
        )
    )
    x_max = float(max(shown["d_mu"].max(), 1e-3)) * 1.05
    y_max = float(max(shown["d_sigma"].max(), 1e-3)) * 1.05
    grid = np.linspace(0, min(x_max, 0.999), 200)
    levels = np.quantile(shown["socm"], [0.5, 0.9, 0.99]) if len(shown) else []
    for level, which in zip(levels, ("median pair", "top 10%", "top 1%"), strict=False):
        if level <= 0:
            continue
        fig.add_trace(
            go.Scatter(
                x=grid,
                y=level / (1 - grid),
                mode="lines",
                line={"dash": "dot", "width": 1, "color": "#888"},
                name=f"collapse {level:.3g} ({which})",
                hoverinfo="skip",
            )
        )
    if len(pairs):
        fig.add_trace(_most_collapsed_trace(pairs, texts))
    fig.update_xaxes(title="how far apart the mean-pooled embeddings are", range=[0, x_max])
    fig.update_yaxes(title="how different the tokens' spreads are", range=[0, y_max])
    fig.update_layout(showlegend=True, legend={"orientation": "h", "y": -0.2})
    return apply_layout(fig, title, height=480)


def _most_collapsed_trace(pairs: pd.DataFrame, texts: Sequence[str] | None, k: int = 10) -> go.Scatter:
    """Circles around the ``k`` pairs with the highest SOCM; the hover names both texts."""
    top = pairs.sort_values(["socm", "i", "j"], ascending=[False, True, True], kind="mergesort").head(k)
    rows_i = top["row_i"] if "row_i" in top else top["i"]
    rows_j = top["row_j"] if "row_j" in top else top["j"]
    hover = []
    for socm, a, b in zip(top["socm"], rows_i, rows_j, strict=True):
        line = f"collapse {socm:.4f}<br>texts {int(a)} and {int(b)}"
        if texts is not None:
            line += f"<br>{html.escape(str(texts[int(a)])[:80])}<br>{html.escape(str(texts[int(b)])[:80])}"
        hover.append(line)
    return go.Scatter(
        x=top["d_mu"],
        y=top["d_sigma"],
        mode="markers",
        marker={"size": 9, "color": "rgba(0,0,0,0)", "line": {"width": 2, "color": HIGHLIGHT}},
        hovertext=hover,
        hoverinfo="text",
        name=f"{len(top)} most collapsed pairs",
    )


def distributions(values: Mapping[str, np.ndarray], title: str, axis: str) -> go.Figure:
    """Overlaid histograms (probability density) of one quantity per model."""
    fig = go.Figure()
    for index, (name, data) in enumerate(values.items()):
        fig.add_trace(
            go.Histogram(
                x=np.asarray(data),
                name=html.escape(str(name)),
                histnorm="probability density",
                opacity=0.6,
                nbinsx=60,
                marker_color=PALETTE[index % len(PALETTE)],
            )
        )
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title=axis)
    return apply_layout(fig, title)


def socm_distributions(values: Mapping[str, np.ndarray]) -> go.Figure:
    """The distribution of the collapse score (SOCM) over text pairs, one histogram per model."""
    return distributions(
        values,
        "Collapse by mean pooling, over pairs of texts",
        "collapse score (high = different texts pooled alike)",
    )


def layer_curves(frame: pd.DataFrame, metric: str, title: str | None = None) -> go.Figure:
    """One line per model of ``metric`` against ``layer`` (columns model, layer, metric), titled and
    labelled in words (:data:`flare_core.view.glossary.LABELS`)."""
    fig = go.Figure()
    for index, (model, group) in enumerate(frame.groupby("model", sort=False)):
        group = group.sort_values("layer")
        fig.add_trace(
            go.Scatter(
                x=group["layer"],
                y=group[metric],
                mode="lines+markers",
                name=html.escape(str(model)),
                line={"color": category_style(index)[0]},
                marker={"symbol": category_style(index)[1]},
            )
        )
    fig.update_xaxes(title="layer", dtick=1)
    fig.update_yaxes(title=LAYER_AXES.get(metric, label(metric)))
    return apply_layout(fig, title or label(metric), height=340)


def correlation_models(table: pd.DataFrame) -> int:
    """The number of models behind a correlation table (its largest ``n_models``; 0 when unknown)."""
    if "n_models" not in table or table.empty:
        return 0
    return int(pd.to_numeric(table["n_models"], errors="coerce").fillna(0).max())


def correlation_heatmap(
    table: pd.DataFrame, statistic: str = "spearman_rho", title: str | None = None
) -> go.Figure:
    """Label-free scores (rows) × downstream scores (columns), diverging colours in [−1, 1], rows and
    columns named in words. The title gives the number of models; below :data:`MIN_CORRELATION_MODELS`
    the cells are grey, so that no colour suggests a finding."""
    pivot = table.pivot(index="label_free", columns="downstream", values=statistic)
    values = pivot.to_numpy(dtype=float)
    n_models = correlation_models(table)
    too_few = n_models < MIN_CORRELATION_MODELS
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[html.escape(label(str(c))) for c in pivot.columns],
            y=[html.escape(label(str(i))) for i in pivot.index],
            zmin=-1,
            zmax=1,
            colorscale=GREYS if too_few else DIVERGING,
            showscale=not too_few,
            text=np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(values),
            texttemplate="%{text}",
            hoverongaps=False,
            hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(title="score on the labels")
    fig.update_yaxes(title="label-free score", autorange="reversed")
    if title is None:
        title = f"{label(statistic)} over {n_models} models"
        if too_few:
            title += f" (too few to read: at least {MIN_CORRELATION_MODELS} are needed)"
    return apply_layout(fig, title, height=max(360, 26 * len(pivot) + 160))


def study_curve(frame: pd.DataFrame, x: str, y: str, title: str, x_title: str, y_title: str) -> go.Figure:
    """Mean ± standard deviation of ``y`` over repeats at each ``x`` (validation studies)."""
    grouped = frame.groupby(x)[y].agg(["mean", "std"]).reset_index().fillna({"std": 0.0})
    fig = go.Figure(
        go.Scatter(
            x=grouped[x],
            y=grouped["mean"],
            error_y={"type": "data", "array": grouped["std"]},
            mode="lines+markers",
            line={"color": PALETTE[0]},
        )
    )
    whole = np.all(np.mod(grouped[x].to_numpy(dtype=float), 1.0) == 0)  # counts: models in the pool
    fig.update_xaxes(title=x_title, **(whole_ticks(grouped[x]) if whole else {}))
    fig.update_yaxes(title=y_title)
    return apply_layout(fig, title, height=340)


def token_view_figure(view: pd.DataFrame, title: str = "Token embeddings (uncentred PCA)") -> go.Figure:
    """Tokens of two texts and their means in 2-D (columns text, kind, x, y, optional token)."""
    fig = go.Figure()
    for text_index, colour in ((0, PALETTE[0]), (1, PALETTE[1])):
        part = view[view["text"] == text_index]
        tokens, means = part[part["kind"] == "token"], part[part["kind"] == "mean"]
        labels = [html.escape(str(t)) for t in tokens["token"]] if "token" in tokens else None
        fig.add_trace(
            go.Scatter(
                x=tokens["x"],
                y=tokens["y"],
                mode="markers",
                name=f"text {'AB'[text_index]} tokens",
                marker={"color": colour, "size": 7, "opacity": 0.7},
                text=labels,
                hovertemplate="%{text}<extra></extra>" if labels else None,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=means["x"],
                y=means["y"],
                mode="markers",
                name=f"text {'AB'[text_index]} mean",
                marker={"color": colour, "size": 16, "symbol": "star", "line": {"width": 1, "color": "#000"}},
            )
        )
    return apply_layout(fig, title, height=460)


def label_counts_bar(labels: pd.Series, title: str = "Texts per label") -> go.Figure:
    """How many texts carry each label (bars in order of decreasing count)."""
    counts = labels.astype(str).value_counts()
    fig = go.Figure(
        go.Bar(
            x=[html.escape(str(label)) for label in counts.index],
            y=counts.to_numpy(),
            marker_color=PALETTE[0],
            hovertemplate="%{x}: %{y} texts<extra></extra>",
        )
    )
    fig.update_xaxes(title="label")
    fig.update_yaxes(title="number of texts", **whole_ticks(counts.to_numpy(), at_values=False))
    return apply_layout(fig, title, height=360)


def embedding_map(points: pd.DataFrame, title: str, colour: str | None = None) -> go.Figure:
    """A 2-D map of one model's texts (columns ``x``, ``y``, ``row``, ``text`` already escaped, and the
    ``colour`` column when given); lasso and box selections return the points' ``row``."""
    fig = go.Figure()
    groups = points.groupby(colour, sort=True) if colour else [(None, points)]
    for index, (value, part) in enumerate(groups):
        colour_of, symbol = category_style(index)
        fig.add_trace(
            go.Scattergl(
                x=part["x"],
                y=part["y"],
                mode="markers",
                customdata=part[["row"]].to_numpy(),
                text=part["text"],
                name=html.escape(str(value)) if value is not None else "texts",
                marker={"size": 5, "color": colour_of, "symbol": symbol},
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.update_layout(dragmode="lasso", showlegend=colour is not None)
    return apply_layout(fig, title, height=480)


def score_scatter(summary: pd.DataFrame, x: str, y: str) -> go.Figure:
    """One point per model: a label-free score against a downstream score."""
    fig = go.Figure(
        go.Scatter(
            x=summary[x],
            y=summary[y],
            mode="markers+text",
            text=[html.escape(str(m)) for m in summary["model"]],
            textposition="top center",
            marker={"color": PALETTE[0], "size": 10},
            hovertemplate="%{text}: %{x:.4g}, %{y:.4g}<extra></extra>",
        )
    )
    fig.update_xaxes(title=label(x))
    fig.update_yaxes(title=label(y))
    return apply_layout(fig, f"{label(x)} against {label(y)}, one point per model")
