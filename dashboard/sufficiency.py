"""Information sufficiency: the IS heatmap, the directed IS graph with Louvain communities, per-pair
figures."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.common import (
    download_csv,
    explain_missing,
    load_sufficiency,
    open_analysis_page,
    run_version,
)
from dashboard.findings import finding_box, show_finding
from dashboard.tables import show_table
from flare_core.view import figures
from flare_core.view.findings import floor_sentence, generalisation_sentence, sufficiency_finding
from flare_core.view.glossary import explain
from flare_core.view.results import ESTIMATOR_NAMES, HEATMAP_ORDERS, estimator_label, is_graph_view

run = open_analysis_page("Information sufficiency")
version = run_version(run)
available = [e for e in ESTIMATOR_NAMES if run.has("sufficiency", e, "scores.parquet")]
if not available:
    explain_missing(
        run,
        ("sufficiency_flow", "sufficiency_gmm"),
        "This run has no information-sufficiency results: they need at least two models that are not "
        "controls, embedded without error (see the Runs page for each model's status).",
    )
    st.stop()
box = finding_box()
estimator = st.radio(
    "Estimator", available, format_func=estimator_label, horizontal=True, help=explain("flow_score")
)
frames = load_sufficiency(run.id, version, estimator)
scores, per_dim, pairs = frames["scores"], frames["is_per_dim"], frames["pairs"]
show_finding(sufficiency_finding(scores, per_dim), box)

st.subheader("Ranking", help=f"{explain('flow_score')} {explain('ci')} {explain('nats')}")
st.plotly_chart(figures.sufficiency_ranking(scores, estimator), key="rank")
download_csv(scores, f"{run.id}-{estimator}-scores")

st.subheader("What each model tells about each other model", help=f"{explain('is')} {explain('is_per_dim')}")
order_by = st.radio("Order", list(HEATMAP_ORDERS), horizontal=True)
threshold = st.slider(
    "Hide links weaker than",
    0.0,
    float(max(per_dim.max().max(), 0.0) or 1.0),
    0.0,
    help=f"In nats per dimension. {explain('is_per_dim')}",
)
resolution = st.slider(
    "Group size (higher = more, smaller groups)", 0.5, 2.0, 1.1, 0.1, help=explain("community")
)
view = is_graph_view(per_dim, scores, threshold=threshold, resolution=resolution, order_by=order_by)
st.plotly_chart(figures.is_heatmap(view.per_dim), key="heatmap")
download_csv(per_dim.reset_index(names="source"), f"{run.id}-{estimator}-is-per-dim")

st.subheader("Groups of models that inform each other", help=explain("community"))
st.plotly_chart(figures.is_graph_figure(view.nodes, view.edges), key="graph")
st.caption(
    f"Which model tells about which: {len(view.edges)} links above {threshold:.3g} (nats per dimension), in "
    f"{view.communities} groups "
    f"(Louvain communities, resolution {resolution}, seed 0). A bigger dot is a higher score, a colour is a "
    "group, a wider arrow is a stronger link."
)
download_csv(view.nodes, f"{run.id}-{estimator}-graph-nodes")

st.subheader("Every pair of models", help=explain("delta_emp"))
columns = [c for c in pairs.columns if c not in ("seconds",)]
show_table(
    pairs[columns],
    columns={
        "source": st.column_config.TextColumn("from model", help="U: the model whose embedding is known."),
        "target": st.column_config.TextColumn(
            "about model", help="V: the model whose embedding is predicted."
        ),
    },
)
download_csv(pairs, f"{run.id}-{estimator}-pairs")
gap = generalisation_sentence(pairs)
if gap:
    st.caption(gap, help=explain("delta_emp"))
held = floor_sentence(pairs)
if held:
    st.caption(held, help=explain("is_raw"))
if not frames["all_scores"].empty:
    with st.expander("Every score variant (mean, median, trimmed mean, unnormalised, conditional-only)"):
        show_table(pd.DataFrame(frames["all_scores"]))
