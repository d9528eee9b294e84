"""The dashboard as ``flare app`` serves it: ``app.py`` behind the checks at the server's edge.

``flare app`` runs ``streamlit run app_server.py``: Streamlit finds the ASGI app below and serves it, with
:class:`flare_core.edge.EdgeGuard` in front of every request. The guard refuses (403) what does not come
from the server's own names and origin, and on a server others can reach, any upload that does not come
from the owner's session (see "Sharing safely" in the README). ``streamlit run app.py`` serves the
pages without it, for development on this machine only.
"""

from __future__ import annotations

import streamlit as st
from starlette.middleware import Middleware

from dashboard.session import owner_mode
from flare_core.edge import EdgeGuard, Names

app = st.App(
    "app.py",
    middleware=[
        Middleware(
            EdgeGuard,
            names=Names.from_env(st.get_option("server.address") or ""),
            owner_writes=lambda: owner_mode() != "open",
        )
    ],
)
