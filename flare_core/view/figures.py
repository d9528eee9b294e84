"""Every chart FLARE Studio draws: the dashboard pages and the HTML report call these functions (no
Streamlit here), so a run looks the same in both."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from flare_core.analyses.sufficiency.registry import estimator_label

DIVERGING = "RdBu"
SEQUENTIAL = "Viridis"
PALETTE = (
    "#4C78A8",
    "#F58518",
    "#54A24B",
    "#E45756",
    "#72B7B2",
    "#B279A2",
    "#FF9DA6",
    "#9D755D",
    "#BAB0AC",
    "#EECA3B",
)


def _layout(fig: go.Figure, title: str, height: int = 420) -> go.Figure:
    fig.update_layout(
        title=title, height=height, margin={"l": 10, "r": 10, "t": 50, "b": 10}, template="plotly_white"
    )
    return fig


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
    fig.update_xaxes(title="median IS / d_target (nats per dimension)")
    return _layout(fig, title, height=max(260, 40 * len(ordered) + 120))


def sufficiency_ranking(scores: pd.DataFrame, estimator: str) -> go.Figure:
    """The ranking bar of one estimator's scores, titled with the estimator's name."""
    return ranking_bar(scores, f"{estimator_label(estimator)}: median IS/d over targets")


def is_heatmap(per_dim: pd.DataFrame, title: str = "IS(source → target) / d_target") -> go.Figure:
    """Heatmap of a (sources × targets) matrix; NaN cells (self pairs) stay blank."""
    fig = go.Figure(
        go.Heatmap(
            z=per_dim.to_numpy(dtype=float),
            x=[html.escape(str(c)) for c in per_dim.columns],
            y=[html.escape(str(i)) for i in per_dim.index],
            colorscale=SEQUENTIAL,
            colorbar={"title": "nats/dim"},
            hovertemplate="%{y} → %{x}: %{z:.4g}<extra></extra>",
        )
    )
    fig.update_xaxes(title="target")
    fig.update_yaxes(title="source", autorange="reversed")
    return _layout(fig, title, height=max(360, 45 * len(per_dim) + 160))


def is_graph_figure(nodes: pd.DataFrame, edges: pd.DataFrame, title: str = "IS graph") -> go.Figure:
    """Directed IS graph: node size = score, colour = community, edge width = IS/d (arrows as annotations)."""
    fig = go.Figure()
    max_weight = float(edges["weight"].max()) if len(edges) else 1.0
    for edge in edges.itertuples():
        fig.add_annotation(
            x=edge.x1, y=edge.y1, ax=edge.x0, ay=edge.y0, xref="x", yref="y", axref="x", ayref="y",
            showarrow=True, arrowhead=2, arrowsize=1,
            arrowwidth=0.5 + 4.0 * edge.weight / max_weight if max_weight > 0 else 1.0,
            arrowcolor="rgba(120,120,120,0.55)", standoff=12,
        )  # fmt: skip
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
                "color": [PALETTE[int(c) % len(PALETTE)] for c in nodes["community"]],
                "line": {"width": 1, "color": "#333"},
            },
            customdata=np.column_stack([nodes["community"], scores]),
            hovertemplate="%{text}<br>community %{customdata[0]}<br>score %{customdata[1]:.4g}<extra></extra>",
        )
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, height=520)


def collapse_scatter(
    pairs: pd.DataFrame,
    title: str,
    max_points: int = 100_000,
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
                "colorbar": {"title": "SOCM"},
                "opacity": 0.6,
            },
            customdata=shown[["i", "j"]].to_numpy(),
            hovertemplate="pair (%{customdata[0]}, %{customdata[1]})<br>d_μ %{x:.3g}<br>d_Σ %{y:.3g}<extra></extra>",
            name=f"pairs ({len(shown):,} of {len(pairs):,})",
        )
    )
    x_max = float(max(shown["d_mu"].max(), 1e-3)) * 1.05
    y_max = float(max(shown["d_sigma"].max(), 1e-3)) * 1.05
    grid = np.linspace(0, min(x_max, 0.999), 200)
    for level in np.quantile(shown["socm"], [0.5, 0.9, 0.99]) if len(shown) else []:
        if level <= 0:
            continue
        fig.add_trace(
            go.Scatter(
                x=grid, y=level / (1 - grid), mode="lines", line={"dash": "dot", "width": 1, "color": "#888"},
                name=f"SOCM = {level:.3g}", hoverinfo="skip",
            )
        )  # fmt: skip
    if len(pairs):
        fig.add_trace(_most_collapsed_trace(pairs, texts))
    fig.update_xaxes(title="d_μ (distance of the means)", range=[0, x_max])
    fig.update_yaxes(title="d_Σ (distance of the token covariances)", range=[0, y_max])
    fig.update_layout(showlegend=True, legend={"orientation": "h", "y": -0.2})
    return _layout(fig, title, height=480)


def _most_collapsed_trace(pairs: pd.DataFrame, texts: Sequence[str] | None, k: int = 10) -> go.Scatter:
    """Circles around the ``k`` pairs with the highest SOCM; the hover names both texts."""
    top = pairs.sort_values(["socm", "i", "j"], ascending=[False, True, True], kind="mergesort").head(k)
    rows_i = top["row_i"] if "row_i" in top else top["i"]
    rows_j = top["row_j"] if "row_j" in top else top["j"]
    hover = []
    for socm, a, b in zip(top["socm"], rows_i, rows_j, strict=True):
        line = f"SOCM = {socm:.4f}<br>texts {int(a)} and {int(b)}"
        if texts is not None:
            line += f"<br>{html.escape(str(texts[int(a)])[:80])}<br>{html.escape(str(texts[int(b)])[:80])}"
        hover.append(line)
    return go.Scatter(
        x=top["d_mu"],
        y=top["d_sigma"],
        mode="markers",
        marker={"size": 9, "color": "rgba(0,0,0,0)", "line": {"width": 2, "color": "#E45756"}},
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
                x=np.asarray(data), name=html.escape(str(name)), histnorm="probability density", opacity=0.6,
                nbinsx=60, marker_color=PALETTE[index % len(PALETTE)],
            )
        )  # fmt: skip
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title=axis)
    return _layout(fig, title)


def layer_curves(frame: pd.DataFrame, metric: str, title: str | None = None) -> go.Figure:
    """One line per model of ``metric`` against ``layer`` (columns model, layer, metric)."""
    fig = go.Figure()
    for index, (model, group) in enumerate(frame.groupby("model", sort=False)):
        group = group.sort_values("layer")
        fig.add_trace(
            go.Scatter(
                x=group["layer"], y=group[metric], mode="lines+markers", name=html.escape(str(model)),
                line={"color": PALETTE[index % len(PALETTE)]},
            )
        )  # fmt: skip
    fig.update_xaxes(title="layer", dtick=1)
    fig.update_yaxes(title=metric)
    return _layout(fig, title or metric, height=340)


def correlation_heatmap(
    table: pd.DataFrame, statistic: str = "spearman_rho", title: str | None = None
) -> go.Figure:
    """Label-free scores (rows) × downstream scores (columns), diverging colours in [−1, 1]."""
    pivot = table.pivot(index="label_free", columns="downstream", values=statistic)
    fig = go.Figure(
        go.Heatmap(
            z=pivot.to_numpy(dtype=float),
            x=[html.escape(str(c)) for c in pivot.columns],
            y=[html.escape(str(i)) for i in pivot.index],
            zmin=-1,
            zmax=1,
            colorscale=DIVERGING,
            text=np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(pivot.to_numpy(dtype=float)),
            texttemplate="%{text}",
            hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title or statistic, height=max(360, 26 * len(pivot) + 160))


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
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    return _layout(fig, title, height=340)


def token_view_figure(view: pd.DataFrame, title: str = "Token embeddings (uncentred PCA)") -> go.Figure:
    """Tokens of two texts and their means in 2-D (columns text, kind, x, y, optional token)."""
    fig = go.Figure()
    for text_index, colour in ((0, PALETTE[0]), (1, PALETTE[1])):
        part = view[view["text"] == text_index]
        tokens, means = part[part["kind"] == "token"], part[part["kind"] == "mean"]
        labels = [html.escape(str(t)) for t in tokens["token"]] if "token" in tokens else None
        fig.add_trace(
            go.Scatter(
                x=tokens["x"], y=tokens["y"], mode="markers", name=f"text {'AB'[text_index]} tokens",
                marker={"color": colour, "size": 7, "opacity": 0.7}, text=labels,
                hovertemplate="%{text}<extra></extra>" if labels else None,
            )
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=means["x"], y=means["y"], mode="markers", name=f"text {'AB'[text_index]} mean",
                marker={"color": colour, "size": 16, "symbol": "star", "line": {"width": 1, "color": "#000"}},
            )
        )  # fmt: skip
    return _layout(fig, title, height=460)


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
    fig.update_yaxes(title="texts")
    return _layout(fig, title, height=360)


def embedding_map(points: pd.DataFrame, title: str, colour: str | None = None) -> go.Figure:
    """A 2-D map of one model's texts (columns ``x``, ``y``, ``row``, ``text`` already escaped, and the
    ``colour`` column when given); lasso and box selections return the points' ``row``."""
    fig = go.Figure()
    groups = points.groupby(colour, sort=True) if colour else [(None, points)]
    for index, (value, part) in enumerate(groups):
        fig.add_trace(
            go.Scattergl(
                x=part["x"], y=part["y"], mode="markers", customdata=part[["row"]].to_numpy(), text=part["text"],
                name=html.escape(str(value)) if value is not None else "texts",
                marker={"size": 5, "color": PALETTE[index % len(PALETTE)]},
                hovertemplate="%{text}<extra></extra>",
            )
        )  # fmt: skip
    fig.update_layout(dragmode="lasso", showlegend=colour is not None)
    return _layout(fig, title, height=480)


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
    fig.update_xaxes(title=x)
    fig.update_yaxes(title=y)
    return _layout(fig, f"{x} vs {y}")
