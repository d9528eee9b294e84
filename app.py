"""FLARE Studio dashboard: ``streamlit run app.py`` (or ``flare app``)."""

from __future__ import annotations

import streamlit as st

from dashboard.common import run_picker, viewer_only

st.set_page_config(page_title="FLARE Studio", page_icon=":material/flare:", layout="wide")

analyse = [
    st.Page("dashboard/overview.py", title="Overview", icon=":material/insights:", default=True),
    st.Page("dashboard/labels.py", title="Check with a few labels", icon=":material/label:"),
    st.Page("dashboard/sufficiency.py", title="Information sufficiency", icon=":material/hub:"),
    st.Page("dashboard/corpus.py", title="Corpus & embedding map", icon=":material/scatter_plot:"),
    st.Page("dashboard/collapse.py", title="Mean-pooling collapse", icon=":material/compress:"),
    st.Page("dashboard/layers.py", title="Layer-wise concentration", icon=":material/stacked_line_chart:"),
    st.Page("dashboard/validation.py", title="Validation", icon=":material/fact_check:"),
]
runs = [st.Page("dashboard/runs.py", title="Runs", icon=":material/history:")]
if not viewer_only():
    runs.insert(0, st.Page("dashboard/new_run.py", title="New run", icon=":material/add_circle:"))

navigation = st.navigation({"Analyse": analyse, "Runs": runs})
with st.sidebar:
    st.markdown("### FLARE Studio")
    st.caption("Choose a text-embedding model for your documents, without labels.")
    run_picker()
navigation.run()
