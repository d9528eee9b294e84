"""The Overview's quality–cost section: each model's quality against its speed or storage, the Pareto
front, and the cheapest model that is good enough (the same chart as the HTML report)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.common import escape
from dashboard.tables import show_table
from flare_core.store.runs import Run
from flare_core.view import answer_figures
from flare_core.view.tradeoff import cheapest_sentence, cost_table, tradeoff_view

COST_CHOICES = {"speed (texts per second)": "texts_per_s", "storage (bytes per vector)": "bytes_per_vector"}


def show_quality_cost(run: Run, quality: pd.DataFrame | None = None) -> None:
    """The section: a choice of cost, the chart, the sentence and the measured costs. ``quality`` (model,
    quality, ci_low, ci_high, label) replaces the run's own label-based or label-free score."""
    st.subheader(
        "Quality against cost",
        help="Each point is a model: how good it is (up) against what it costs (right: faster; or left: "
        "smaller vectors). The dotted line joins the models that no other model beats on both.",
    )
    view = tradeoff_view(run, quality)
    if view is None:
        st.info(
            "This chart appears once the run has embedded its models and scored them. Uploaded embeddings "
            "have no measured cost, so a run of uploaded embeddings only has no chart here."
        )
        return
    choice = st.radio("Weigh quality against", list(COST_CHOICES), horizontal=True, key="cost-axis")
    cost = COST_CHOICES[choice]
    st.plotly_chart(
        answer_figures.quality_cost(
            view["quality"], view["costs"], cost, best=view.get("best"), mark=view["suggest"]
        ),
        key="quality-cost",
    )
    sentence = cheapest_sentence(view, cost)
    if sentence:
        st.markdown(escape(sentence))
    with st.expander("Costs measured in this run"):
        st.caption(
            "Texts per second while this run embedded its corpus on this machine, model loading excluded "
            "(figures from the embedding cache when the embeddings were already there); peak memory above "
            "what the process held before loading; size of the model's files (or, for models fitted on the "
            "corpus, of their parameters); bytes per vector at float32 and at int8."
        )
        show_table(cost_table(view["costs"]))
