"""The charts: what each draws from its data, the page's palettes and iso-lines, and escaping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from flare_core.view import figures

EVIL = "<b>x</b>"


def _scores() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["a", EVIL, "c"],
            "score": [0.5, 0.2, 0.8],
            "ci_low": [0.4, 0.1, 0.7],
            "ci_high": [0.6, 0.3, 0.9],
        }
    )


def test_ranking_bar_sorts_by_score_with_asymmetric_intervals_and_escapes_names():
    fig = figures.ranking_bar(_scores(), "Ranking")
    (bar,) = fig.data
    assert list(bar.y) == ["&lt;b&gt;x&lt;/b&gt;", "a", "c"]  # best at the top of a horizontal bar chart
    np.testing.assert_allclose(bar.x, [0.2, 0.5, 0.8])
    np.testing.assert_allclose(bar.error_x.array, [0.1, 0.1, 0.1])
    np.testing.assert_allclose(bar.error_x.arrayminus, [0.1, 0.1, 0.1])
    assert fig.layout.title.text == "Ranking" and fig.layout.height == max(260, 40 * 3 + 120)


def test_sufficiency_ranking_is_titled_with_the_estimator():
    fig = figures.sufficiency_ranking(_scores(), "gmm")
    assert fig.layout.title.text == "EMIR (Gaussian mixtures): how much each model tells about the others"
    assert "nats per dimension" in fig.layout.xaxis.title.text


def test_is_heatmap_keeps_the_order_and_blank_self_pairs_without_hover():
    per_dim = pd.DataFrame([[np.nan, 0.3], [0.1, np.nan]], index=["b", "a"], columns=["b", "a"])
    (heat,) = figures.is_heatmap(per_dim).data
    assert list(heat.x) == ["b", "a"] and list(heat.y) == ["b", "a"]
    assert np.isnan(heat.z[0][0]) and heat.z[0][1] == 0.3 and heat.z[1][0] == 0.1
    assert heat.hoverongaps is False  # the diagonal (NaN) shows no "NaN" hover
    assert heat.colorscale[0][1] == go.Heatmap(colorscale="Viridis").colorscale[0][1]


def _pairs(n: int) -> pd.DataFrame:
    i, j = np.triu_indices(n, k=1)
    rng = np.random.default_rng(0)
    d_mu, d_sigma = rng.uniform(0, 0.5, len(i)), rng.uniform(0, 0.3, len(i))
    return pd.DataFrame(
        {
            "i": i,
            "j": j,
            "row_i": i,
            "row_j": j,
            "d_mu": d_mu,
            "d_sigma": d_sigma,
            "socm": (1 - d_mu) * d_sigma,
        }
    )


def test_collapse_scatter_samples_draws_three_iso_lines_and_circles_the_top_pairs():
    pairs = _pairs(12)  # 66 pairs
    fig = figures.collapse_scatter(pairs, "m", max_points=10, seed=0)
    points, *iso, top = fig.data
    assert points.name == "pairs (10 of 66)" and len(points.x) == 10
    assert points.marker.colorscale[0][1] == "#000004"  # Inferno
    levels = np.quantile(points.marker.color, [0.5, 0.9, 0.99])
    assert [t.name for t in iso] == [
        f"collapse {level:.3g} ({which})"
        for level, which in zip(levels, ("median pair", "top 10%", "top 1%"), strict=True)
    ]
    for trace, level in zip(
        iso, levels, strict=True
    ):  # each line is SOCM = level: d_sigma = level / (1 - d_mu)
        np.testing.assert_allclose(np.asarray(trace.y) * (1 - np.asarray(trace.x)), level)
    best = pairs.nlargest(10, "socm")
    assert top.name == "10 most collapsed pairs"
    np.testing.assert_allclose(sorted(top.y), sorted(best["d_sigma"]))
    assert all("texts" in h and "<br>" in h for h in top.hovertext)


def test_collapse_scatter_hover_names_the_texts_escaped():
    pairs = _pairs(4)
    texts = [f"text {k} {EVIL}" for k in range(4)]
    top = figures.collapse_scatter(pairs, "m", texts=texts).data[-1]
    assert any("text 0 &lt;b&gt;x&lt;/b&gt;" in h for h in top.hovertext)
    assert not any(EVIL in h for h in top.hovertext)


def test_layer_curves_one_line_per_model_in_layer_order():
    frame = pd.DataFrame(
        {"model": ["m1"] * 3 + ["m2"] * 3, "layer": [3, 1, 2, 1, 2, 3], "r": [3.0, 1.0, 2.0, 4.0, 5.0, 6.0]}
    )
    fig = figures.layer_curves(frame, "r")
    assert [t.name for t in fig.data] == ["m1", "m2"]
    assert list(fig.data[0].x) == [1, 2, 3] and list(fig.data[0].y) == [1.0, 2.0, 3.0]
    assert fig.layout.title.text == "Spread of the incoming tokens, relative to their mean"
    assert fig.layout.yaxis.title.text == "input spread / size of the mean"
    assert [t.line.color for t in fig.data] == list(figures.PALETTE[:2])


def _correlations(n_models: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "label_free": ["flow_is_median_norm", "flow_is_median_norm", "v"],
            "downstream": ["accuracy", "f1", "accuracy"],
            "n_models": [n_models] * 3,
            "spearman_rho": [0.5, -1.0, np.nan],
        }
    )


def test_correlation_heatmap_is_diverging_in_minus_one_to_one_named_in_words_with_n():
    fig = figures.correlation_heatmap(_correlations(5))
    (heat,) = fig.data
    assert (heat.zmin, heat.zmax) == (-1, 1) and heat.colorscale[0][1] != "#f2f2f2"
    assert list(heat.x) == ["classification accuracy", "classification macro-F1"]
    assert list(heat.y) == ["FLARE score", "v"]
    assert heat.text[0][0] == "0.50" and heat.text[1][1] == ""
    assert fig.layout.title.text == "Spearman rank correlation over 5 models"


def test_correlation_heatmap_over_too_few_models_is_grey_and_says_so():
    fig = figures.correlation_heatmap(_correlations(4))
    (heat,) = fig.data
    assert [c[1] for c in heat.colorscale] == ["#f2f2f2", "#bdbdbd"] and heat.showscale is False
    assert "over 4 models (too few to read: at least 5 are needed)" in fig.layout.title.text
    assert figures.correlation_models(_correlations(4)) == 4


def test_palette_is_okabe_ito_and_every_chart_uses_it():
    okabe_ito = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"}
    assert set(figures.PALETTE) == okabe_ito and len(figures.PALETTE) == 8
    fig = figures.study_curve(pd.DataFrame({"a": [1, 2], "b": [1.0, 2.0]}), "a", "b", "t", "x", "y")
    assert list(fig.layout.colorway) == list(figures.PALETTE)
    # beyond 8 categories the marker symbol changes, so no two categories look the same
    styles = [figures.category_style(i) for i in range(20)]
    assert len(set(styles)) == 20


@pytest.mark.parametrize(
    ("n_pairs", "expected"),
    [(500, None), (11_175, (1_000, 11_175, 11_175, 100)), (499_500, (1_000, 499_500, 20_000, 1_000))],
)
def test_points_slider_is_bounded_by_the_pairs(n_pairs, expected):
    assert figures.scatter_points_range(n_pairs) == expected


def test_study_curve_averages_repeats():
    frame = pd.DataFrame({"alpha": [0.1, 0.1, 1.0], "rank_agreement": [0.5, 0.7, 1.0]})
    (curve,) = figures.study_curve(frame, "alpha", "rank_agreement", "t", "x", "y").data
    np.testing.assert_allclose(curve.y, [0.6, 1.0])
    np.testing.assert_allclose(curve.error_y.array, [np.std([0.5, 0.7], ddof=1), 0.0])


def test_label_counts_embedding_map_and_score_scatter():
    bar = figures.label_counts_bar(pd.Series(["a", "b", "a", EVIL])).data[0]
    assert list(bar.x)[0] == "a" and list(bar.y) == [2, 1, 1]
    assert "&lt;b&gt;x&lt;/b&gt;" in list(bar.x)
    points = pd.DataFrame(
        {
            "row": [0, 1, 2],
            "x": [0.0, 1.0, 2.0],
            "y": [1.0, 0.0, 1.0],
            "text": ["t0", "t1", "t2"],
            "label": ["a", "b", "a"],
        }
    )
    coloured = figures.embedding_map(points, "m", colour="label")
    assert [t.name for t in coloured.data] == ["a", "b"]
    assert [t.marker.color for t in coloured.data] == ["#0072B2", "#E69F00"]  # blue and orange, not two blues
    assert [list(map(list, t.customdata)) for t in coloured.data] == [[[0], [2]], [[1]]]
    assert coloured.layout.dragmode == "lasso"
    assert len(figures.embedding_map(points, "m").data) == 1
    summary = pd.DataFrame({"model": ["a", EVIL], "flow_score": [0.1, 0.2], "accuracy": [0.8, 0.9]})
    (dots,) = figures.score_scatter(summary, "flow_score", "accuracy").data
    assert list(dots.text) == ["a", "&lt;b&gt;x&lt;/b&gt;"] and list(dots.y) == [0.8, 0.9]


def test_distributions_are_densities_per_model():
    fig = figures.distributions({"a": np.zeros(5), EVIL: np.ones(3)}, "SOCM per text pair", "SOCM")
    assert [t.name for t in fig.data] == ["a", "&lt;b&gt;x&lt;/b&gt;"]
    assert all(t.histnorm == "probability density" for t in fig.data)


@pytest.mark.parametrize("n_texts", [2, 5])
def test_token_view_figure_has_tokens_and_means_of_both_texts(n_texts):
    from flare_core.analyses.collapse import token_view

    rng = np.random.default_rng(n_texts)
    view = token_view(rng.standard_normal((n_texts, 4)) + 1, rng.standard_normal((3, 4)) + 1)
    fig = figures.token_view_figure(view)
    assert [t.name for t in fig.data] == ["text A tokens", "text A mean", "text B tokens", "text B mean"]
    assert len(fig.data[0].x) == n_texts and len(fig.data[1].x) == 1


def test_the_common_look_is_plotly_white_set_without_copying_the_template_again():
    """apply_layout gives the figure plotly checking and copying the template through update_layout
    would give (whatever plotly's default template is, Streamlit's in the dashboard), without sharing the
    registered template with the figure: a change of one figure's template changes nothing else (its speed
    is measured by ``bench/speed/page_sessions.py --profile``, not here)."""
    import json

    import plotly.io as pio

    def through_update_layout() -> go.Figure:
        fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
        fig.update_layout(
            title="t", height=420, margin={"l": 10, "r": 10, "t": 50, "b": 10}, template="plotly_white",
            colorway=list(figures.PALETTE),
        )  # fmt: skip
        fig.update_xaxes(automargin=True, title_standoff=8)
        fig.update_yaxes(automargin=True, title_standoff=8)
        return fig

    made = figures.apply_layout(go.Figure(go.Bar(x=[1, 2], y=[3, 4])), "t")
    assert json.loads(made.to_json()) == json.loads(through_update_layout().to_json())
    made.update_layout(template_layout_font_size=31)
    again = figures.apply_layout(go.Figure(), "u")
    assert again.layout.template.layout.font.size is None
    assert pio.templates["plotly_white"].layout.font.size is None
