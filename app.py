"""FLARE Studio dashboard: ``streamlit run app.py`` (or ``flare app``)."""

from __future__ import annotations

import streamlit as st

from dashboard.common import run_picker
from dashboard.session import refusal_page, session_access
from dashboard.sharing import shared_run_panel

st.set_page_config(page_title="FLARE Studio", page_icon=":material/flare:", layout="wide")
access = session_access()
if access.role == "none":
    refusal_page(access)
    st.stop()

analyse = [
    st.Page("dashboard/overview.py", title="Overview", icon=":material/insights:", default=True),
    st.Page("dashboard/sufficiency.py", title="Information sufficiency", icon=":material/hub:"),
    st.Page("dashboard/corpus.py", title="Corpus & embedding map", icon=":material/scatter_plot:"),
    st.Page("dashboard/collapse.py", title="Mean-pooling collapse", icon=":material/compress:"),
    st.Page("dashboard/layers.py", title="Layer-wise concentration", icon=":material/stacked_line_chart:"),
    st.Page("dashboard/validation.py", title="Validation", icon=":material/fact_check:"),
]
if access.allows("label"):  # a share link's session never labels
    analyse.insert(
        1, st.Page("dashboard/labels.py", title="Check with a few labels", icon=":material/label:")
    )
# each page of the Runs section with the action it needs: a share link's session gets neither
runs = [
    page
    for page, action in (
        (st.Page("dashboard/new_run.py", title="New run", icon=":material/add_circle:"), "start"),
        (st.Page("dashboard/runs.py", title="Runs", icon=":material/history:"), "list"),
    )
    if access.allows(action)
]

navigation = st.navigation({"Analyse": analyse, "Runs": runs} if runs else {"Analyse": analyse})
with st.sidebar:
    st.markdown("### FLARE Studio")
    st.caption("Choose a text-embedding model for your documents: from your labels, a few, or none.")
    run_picker()
    if access.role == "viewer":
        shared_run_panel(access)
navigation.run()
