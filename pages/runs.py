"""Runs: every stored run with live progress, cancel and delete."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from flare_core import jobs
from flare_core.cli import run_rows
from pages.common import STATUS_ICONS, store, viewer_only

st.title("Runs")
st.caption("Runs execute in a background process: you can close this tab and come back later.")


@st.fragment(run_every=2.0)
def live_runs() -> None:
    rows = run_rows(store())
    if not rows:
        st.info("No runs yet.")
        return
    active = [r for r in rows if r["status"] in ("queued", "running")]
    for row in active:
        run = store().get(row["id"])
        manifest = run.manifest
        with st.container(border=True):
            st.markdown(f"**{STATUS_ICONS[row['status']]} {row['name']}** · `{row['id']}`")
            for stage, info in (manifest.get("stages") or {}).items():
                total = max(int(info.get("total") or 1), 1)
                done = min(int(info.get("done") or 0), total)
                st.progress(done / total, text=f"{stage}: {done}/{total} · {info.get('message', '')}")
            models = pd.DataFrame(manifest.get("models", []))
            if not models.empty:
                st.dataframe(
                    models[[c for c in ("id", "role", "status", "dim", "error") if c in models]],
                    hide_index=True,
                )
            if not viewer_only() and st.button("Cancel", key=f"cancel-{row['id']}"):
                jobs.cancel(store(), row["id"])
                st.toast(f"Cancellation requested for {row['id']}")
    frame = pd.DataFrame(rows)
    frame.insert(0, "", frame["status"].map(STATUS_ICONS))
    frame["link"] = "?run=" + frame["id"]
    st.dataframe(
        frame[["", "name", "status", "texts", "models", "created", "stage", "progress", "link", "id"]],
        hide_index=True,
        column_config={"link": st.column_config.LinkColumn("link", display_text="open")},
    )


live_runs()

if not viewer_only():
    with st.expander("Delete a run"):
        ids = [m["id"] for m in store().list()]
        victim = st.selectbox("Run to delete", ids, index=None, key="delete-run")
        if victim and st.button("Delete permanently", type="primary"):
            store().delete(victim)
            st.success(f"Deleted {victim}")
            st.rerun()
