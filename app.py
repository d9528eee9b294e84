"""FLARE Studio dashboard: ``streamlit run app.py`` (or ``flare app``)."""

from __future__ import annotations

import streamlit as st

from dashboard.common import run_picker
from dashboard.page_list import PAGES
from dashboard.session import refusal_page, session_access
from dashboard.sharing import shared_run_panel

st.set_page_config(page_title="FLARE Studio", page_icon=":material/flare:", layout="wide")
access = session_access()
if access.role == "none":
    refusal_page(access)
    st.stop()

# each page with the action it needs: a share link's session never labels, starts or lists runs
sections: dict[str, list[st.Page]] = {}
for spec in PAGES:
    if spec.needs is None or access.allows(spec.needs):
        page = st.Page(spec.path, title=spec.title, icon=spec.icon, default=spec.default)
        sections.setdefault(spec.section, []).append(page)

navigation = st.navigation(sections)
with st.sidebar:
    st.markdown("### FLARE Studio")
    st.caption("Choose a text-embedding model for your documents: from your labels, a few, or none.")
    run_picker()
    if access.role == "viewer":
        shared_run_panel(access)
navigation.run()
