"""FLARE Studio dashboard: ``streamlit run app.py`` (or ``flare app``).

An uncaught error of the sidebar or of a page is shown as one plain sentence with an id; its traceback goes
to the server's log with that id (:func:`dashboard.session.errors_shown_plainly`)."""

from __future__ import annotations

import streamlit as st

from dashboard.common import run_picker
from dashboard.page_list import HELP_PAGES, PAGES
from dashboard.session import errors_shown_plainly, refusal_page, session_access
from dashboard.sharing import shared_run_panel
from flare_core.store.access import Access


def dashboard(access: Access) -> None:
    """The menu of the pages ``access`` may open, the sidebar, and the page chosen."""
    # each page with the action it needs: a share link's session never labels, starts or lists runs
    sections: dict[str, list[st.Page]] = {}
    for spec in PAGES:
        if spec.needs is None or access.allows(spec.needs):
            page = st.Page(spec.path, title=spec.title, icon=spec.icon, default=spec.default)
            sections.setdefault(spec.section, []).append(page)
    for spec in HELP_PAGES:  # the docs' plain pages, shown to every session: they hold no run's data
        sections.setdefault(spec.section, []).append(st.Page(spec.path, title=spec.title, icon=spec.icon))
    navigation = st.navigation(sections)
    with st.sidebar, errors_shown_plainly("the sidebar"):
        st.markdown("### FLARE Studio")
        st.caption("Choose a text-embedding model for your documents: from your labels, a few, or none.")
        run_picker()
        if access.role == "viewer":
            shared_run_panel(access)
    with errors_shown_plainly(f"the page {navigation.title!r}"):
        navigation.run()


st.set_page_config(page_title="FLARE Studio", page_icon=":material/flare:", layout="wide")
access = session_access()
if access.role == "none":
    # the run ends here without st.stop(): Streamlit then forgets the fragments of the page drawn before
    # (a stopped run keeps them), so a rerun of one of them, replayed by a client, runs nothing
    refusal_page(access)
else:
    dashboard(access)
