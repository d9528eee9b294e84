"""Runs: every stored run with live progress, cancel and delete; share links, report and bundle of a run.
Only the owner opens it (app.py); every action asks the session's access again before it acts."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.common import STATUS_ICONS, escape, store
from dashboard.session import access_fragment, credential_query, current_access
from dashboard.sharing import build_and_offer, bundle_bytes, report_bytes, share_links_panel
from dashboard.tables import show_table
from flare_core.run import jobs
from flare_core.run.progress import WORKER_COLUMNS, progress_sentence, stage_words, worker_table
from flare_core.store.access import Access
from flare_core.view.results import run_words, runs_table
from flare_core.view.tables import date_words

access = current_access()
st.title("Runs")
if not access.allows("list"):
    st.info("This page is not part of a shared link.")
    st.stop()
st.caption("Runs execute in a background process: you can close this tab and come back later.")


def stages_in_order(manifest: dict) -> list[tuple[str, dict]]:
    """The run's stages in the order they run (its plan), stages outside the plan after them."""
    stages = manifest.get("stages") or {}
    planned = [row["name"] for row in manifest.get("plan") or [] if row.get("name") in stages]
    return [(name, stages[name]) for name in planned] + [
        (name, info) for name, info in stages.items() if name not in planned
    ]


def _live_run_box(row: dict, access: Access) -> None:
    """One working run: its name, progress per stage, models, workers, and Cancel for who may."""
    run = store().get(row["id"])
    manifest = run.manifest
    with st.container(border=True):
        st.markdown(f"**{STATUS_ICONS[row['status']]} {escape(row['name'])}** · `{row['id']}`")
        st.caption(f"Started {date_words(row['created'])}. {escape(progress_sentence(manifest))}")
        for stage, info in stages_in_order(manifest):
            total = max(int(info.get("total") or 1), 1)
            done = min(int(info.get("done") or 0), total)
            st.progress(done / total, text=escape(stage_words(stage, done, total)))
        models = pd.DataFrame(manifest.get("models", []))
        if not models.empty:
            shown = models[[c for c in ("id", "role", "status", "dim", "error") if c in models]]
            show_table(shown.rename(columns={"id": "model"}))
        workers = manifest.get("workers") or {}
        if workers:
            st.caption("Worker processes: units each one finished, and the last one")
            show_table(
                worker_table(workers),
                columns={k: st.column_config.Column(v) for k, v in WORKER_COLUMNS.items()},
            )
        if access.allows("cancel", row["id"]) and st.button("Cancel", key=f"cancel-{row['id']}"):
            access.require("cancel", row["id"])
            jobs.cancel(store(), row["id"])
            st.toast(f"Cancellation requested for {row['id']}")


@access_fragment(run_every=2.0)
def live_runs() -> None:
    access = current_access()  # as checked for this run of the fragment, not as the page began
    if access.allows("start"):
        jobs.dispatch(store())  # start runs waiting in the queue when a slot is free
    rows = runs_table(store())
    for _, message in store().unreadable():  # damaged runs are left out of the table: say which and why
        st.warning(escape(message))
    waiting = jobs.waiting_runs(store())
    giving_way = set(jobs.background_runs(store()))  # the demo: it waits while a run of yours works
    for row in rows:
        if row["id"] in waiting:
            row["stage"] = (
                "paused: carries on when your runs have finished"
                if row["id"] in giving_way
                else f"queued, position {waiting.index(row['id']) + 1}"
            )
    if not rows:
        st.info("No runs yet.")
        return
    active = [r for r in rows if r["status"] in ("queued", "running")]
    for row in active:
        _live_run_box(row, access)
    frame = pd.DataFrame(rows)
    frame["stage"] = [
        stage_words(s) if s and row["id"] not in waiting else s
        for s, row in zip(frame["stage"], rows, strict=True)
    ]
    frame["link"] = "/?run=" + frame["id"] + credential_query()
    frame["started"] = frame["created"]  # when the run was made: runs of one name told apart by it
    show_table(
        frame[
            [
                "name",
                "started",
                "run",
                "status",
                "problems",
                "texts",
                "models",
                "stage",
                "progress",
                "link",
                "id",
            ]
        ],
        columns={
            "link": st.column_config.LinkColumn("open", display_text="open"),
            "problems": st.column_config.TextColumn("problems", width="large"),
        },
    )
    for row in rows:
        if row["problems"]:
            with st.container(border=True):
                st.markdown(f"{STATUS_ICONS[row['status']]} **{escape(row['name'])}** · `{row['id']}`")
                st.caption(escape(row["problems"]))
                if access.allows("resume", row["id"]) and st.button(
                    "Try the failed stages again", key=f"retry-{row['id']}"
                ):
                    access.require("resume", row["id"])
                    submitted = jobs.submit(store(), row["id"])
                    st.toast(escape(submitted["message"]))


live_runs()


def share_panel() -> None:
    """Share links, HTML report and bundle of the run chosen in the sidebar."""
    run_id = st.session_state.get("run_id")
    if not run_id:
        return
    run = store().get(run_id)
    st.subheader(f"Share {escape(run.manifest.get('name') or run.id)}")
    st.caption(
        f"The run {escape(run_words(run.manifest))}, chosen in the sidebar: choose another there to share it "
        "instead. Links, the report and the bundle below are of this run only."
    )
    share_links_panel(run)
    strip = st.checkbox("Leave the corpus texts out of the report and bundle", value=False)
    left, right = st.columns(2)
    build_and_offer(
        left,
        "report",
        "Build HTML report",
        "One self-contained file that opens offline in any browser.",
        lambda: report_bytes(run, strip),
        run.id,
        strip,
        f"{run.id}-report.html",
        "text/html",
    )
    build_and_offer(
        right,
        "bundle",
        "Build run bundle (zip)",
        "Open the run on another machine with `flare import`.",
        lambda: bundle_bytes(run, strip),
        run.id,
        strip,
        f"{run.id}.zip",
        "application/zip",
    )


share_panel()

if access.allows("import"):
    with st.expander("Import a run bundle"):
        from flare_core.errors import BundleError
        from flare_core.run.create import import_bundle

        upload = st.file_uploader(
            "Run bundle (.zip made by `flare export` or the button above)", type=["zip"]
        )
        if upload is not None and st.button("Import"):
            access.require("import")
            try:
                imported = import_bundle(store(), upload.getvalue())
            except BundleError as exc:
                st.error(f"{escape(upload.name)} was not imported: {escape(exc)}")
            else:
                st.success(f"Imported run `{imported.id}`.")

if access.allows("delete"):
    with st.expander("Delete a run"):
        ids = [m["id"] for m in store().list()]
        victim = st.selectbox("Run to delete", ids, index=None, key="delete-run")
        if victim and st.button("Delete permanently", type="primary"):
            access.require("delete", victim)
            store().delete(victim)
            st.success(f"Deleted {victim}")
            st.rerun()
