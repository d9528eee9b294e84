"""Sharing a run from the dashboard: the owner's share links (create, list, revoke), the files of a run
(HTML report, bundle), and the sidebar of a session opened with a share link."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.common import escape
from dashboard.session import SHARE_PARAM, current_access, store
from dashboard.tables import show_table
from flare_core.errors import AccessDenied
from flare_core.store import shares
from flare_core.store.access import Access
from flare_core.store.runs import Run

#: The expiry choices of a new link, in days (None: until revoked).
EXPIRY_DAYS = {"never (until revoked)": None, "1 day": 1, "7 days": 7, "30 days": 30}
_NEW_LINK = "new-share-link"


def dashboard_url() -> str:
    """The dashboard's address as this browser reached it, without page or query."""
    base = (st.context.url or "").split("?")[0].rstrip("/")
    page = base.rsplit("/", 1)[-1]
    if page in ("runs", "new_run", "sufficiency", "corpus", "collapse", "layers", "validation", "overview"):
        base = base[: -len(page) - 1]
    return base


def share_links_panel(run: Run) -> None:
    """The owner's share links of ``run``: create one (with texts or figures only, optional expiry), see
    every link with its state, revoke one."""
    access = current_access()
    if not access.allows("share", run.id):
        return
    st.caption(
        "A share link opens this run only, read-only: no other run, no New run, no Runs page, nothing that "
        "changes anything. It works until it expires or you revoke it."
    )
    left, middle, right = st.columns([2, 2, 1])
    shows = left.radio(
        "The link shows", ["texts and figures", "figures only"], horizontal=True, key="share-texts"
    )
    expiry = middle.selectbox("Expires after", list(EXPIRY_DAYS), key="share-expiry")
    if right.button("Create link", key="share-create", type="primary"):
        access.require("share", run.id)
        days = EXPIRY_DAYS[expiry]
        until = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=days) if days else None
        token, link = shares.create_link(store(), run.id, texts=shows == "texts and figures", expires=until)
        st.session_state[_NEW_LINK] = (run.id, f"{dashboard_url()}/?{SHARE_PARAM}={token}", link.prefix)
    links = shares.list_links(store(), run.id)
    active = [link.prefix for link in links if link.state() == "active"]
    new = st.session_state.get(_NEW_LINK)
    if new and new[0] == run.id and new[2] in active:
        st.success(f"Link `{new[2]}` created. Copy it now: it is shown only once.", icon=":material/link:")
        st.code(new[1], language=None)
    elif new and new[0] == run.id:  # revoked or expired since (here, or by `flare share --revoke`)
        st.session_state.pop(_NEW_LINK, None)
    if not links:
        return
    table = pd.DataFrame([link.public() for link in links])
    table["shows"] = table.pop("texts").map({True: "texts and figures", False: "figures only"})
    table["expires"] = table["expires"].fillna("never")
    show_table(table[["prefix", "shows", "created", "expires", "state"]])  # dates as dates
    if active:
        left, right = st.columns([3, 1])
        victim = left.selectbox("Revoke a link", active, index=None, key="share-revoke")
        if victim and right.button("Revoke", key="share-revoke-button"):
            access.require("share", run.id)
            shares.revoke_links(store(), run.id, victim)
            st.toast(f"Link {victim} revoked: it no longer opens the run.")
            st.rerun()


def shared_run_panel(access: Access) -> None:
    """The sidebar of a share link's session: which run it shows, and its HTML report to download."""
    try:
        run = store().get(access.run_id or "")
        name = run.manifest.get("name") or run.id
    except (AccessDenied, KeyError, ValueError):
        return
    what = "read-only" if access.texts else "read-only, figures only (no corpus text)"
    st.caption(f"Shared with you: one run, {what}.")
    st.markdown(f"**{escape(name)}**")
    build_and_offer(
        st,
        "report",
        "Build HTML report",
        "One self-contained file that opens offline in any browser.",
        lambda: report_bytes(run, not access.texts),
        run.id,
        not access.texts,
        f"{run.id}-report.html",
        "text/html",
    )


def build_and_offer(
    column: Any,
    kind: str,
    label: str,
    help: str,
    build: Callable[[], bytes],
    run_id: str,
    strip: bool,
    file_name: str,
    mime: str,
) -> None:
    """A button that builds a file of the run (kept in the session for this run and choice of texts) and,
    once built, its download button with the file's size."""
    current_access().require("read", run_id)
    if column.button(label, help=help, key=f"build-{kind}"):
        with st.spinner(f"Building the {kind}…"):
            st.session_state[kind] = (run_id, strip, build())
    built = st.session_state.get(kind)
    if built and built[0] == run_id and built[1] == strip:
        column.download_button(
            f"Download {kind} ({len(built[2]) / 2**20:.1f} MB)",
            built[2],
            file_name,
            mime,
            key=f"download-{kind}",
        )


def report_bytes(run: Run, strip: bool) -> bytes:
    """The run's HTML report (``strip``: without corpus texts)."""
    from flare_core.view.report import build_report

    return build_report(run, include_texts=not strip).encode("utf-8")


def bundle_bytes(run: Run, strip: bool) -> bytes:
    """The run's bundle (``strip``: without corpus texts), for ``flare import`` elsewhere."""
    import tempfile
    from pathlib import Path

    from flare_core.store.bundle import export_run

    with tempfile.TemporaryDirectory() as tmp:
        return export_run(run, Path(tmp) / f"{run.id}.zip", include_texts=not strip).read_bytes()
