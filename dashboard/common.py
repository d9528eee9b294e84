"""Shared pieces of the dashboard pages: the run store, the run picker and cached artefact loaders."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard.session import access_fragment, current_access, store
from flare_core.answer.stored import load_verdict
from flare_core.run.jobs import effective_status
from flare_core.run.outcomes import problem_sentences
from flare_core.run.progress import progress_sentence, stage_words
from flare_core.store.runs import Run, RunNotFound, validate_run_id
from flare_core.view.plain import markdown_text
from flare_core.view.run_labels import run_labels
from flare_core.view.tables import shown_frame
from flare_core.view.verdict import (
    chance_columns,
    chance_percents,
    next_step_words,
    still_embedding_words,
    trust_sentence,
    verdict_view,
    without_asking,
)

#: Material icons (drawn by Streamlit's own font, unlike emoji, which need an emoji font on the viewer's
#: side).
STATUS_ICONS = {
    "queued": ":material/hourglass_top:",
    "running": ":material/autorenew:",
    "done": ":material/check_circle:",
    "done, with problems": ":material/warning:",
    "failed": ":material/error:",
    "cancelled": ":material/cancel:",
}


def escape(text: Any) -> str:
    """Untrusted text (a run's, model's or category's name, a corpus text, a query, a file name, an error
    that may quote one) as markdown that shows exactly that text: for ``st.markdown``, captions, alerts,
    labels, toasts and help texts (:func:`flare_core.view.plain.markdown_text`). Never
    ``unsafe_allow_html``."""
    return markdown_text(text)


def run_picker() -> None:
    """Sidebar selector of the current run, shared by all pages and mirrored in ``?run=<id>``; a share
    link's session gets its one run, whatever the address says."""
    access = current_access()
    if not access.allows("list"):
        st.session_state["run_id"] = access.run_id
        if access.run_id and st.query_params.get("run") != access.run_id:
            st.query_params["run"] = access.run_id
        return
    runs = store().list()
    ids = [m["id"] for m in runs]
    followed = st.session_state.pop(_FOLLOW, None)
    if followed in ids:  # a run just started on this page: the picker moves to it
        st.session_state["run_picker"] = followed
        st.query_params["run"] = followed
    wanted = st.query_params.get("run") or st.session_state.get("run_id")
    instead = "; showing the newest run instead" if runs else ""
    if wanted is not None:  # a link is judged whether or not the store holds runs
        try:
            validate_run_id(wanted)
        except ValueError:
            st.error(f"The link names an invalid run id ({escape(wanted[:80])}){instead}.")
            wanted = None
        else:
            if wanted not in ids:
                st.warning(f"No run `{wanted}` in this store{instead}.")
                wanted = None
    if not runs:
        st.info("No runs yet. Start one on **New run**.")
        st.session_state["run_id"] = None
        return
    index = ids.index(wanted) if wanted in ids else 0
    if st.session_state.get("run_picker") not in ids:
        st.session_state.pop("run_picker", None)  # its run was deleted: start again from the link
    elif "run_picker" in st.session_state:
        index = 0  # the widget keeps its own value; a second default would only raise a warning
    statuses = {m["id"]: effective_status(store().get(m["id"])) for m in runs}
    labels = run_labels(runs, statuses)  # unique: the browser answers with the label
    shown = st.session_state.get("run_picker")
    if shown in ids and st.session_state.get(_SHOWN_LABEL, labels[shown]) != labels[shown]:
        # the browser keeps the label it was given: set the choice again so that it gets the new one
        st.session_state["run_picker"] = shown
    chosen = st.selectbox("Run", ids, index=index, format_func=labels.get, key="run_picker")
    st.session_state[_SHOWN_LABEL] = labels[chosen]
    st.session_state["run_id"] = chosen
    if st.query_params.get("run") != chosen:
        st.query_params["run"] = chosen
    live = tuple(sorted((i, s) for i, s in statuses.items() if s in ("queued", "running")))
    if live:
        _watch_live_runs(live)


@access_fragment(run_every=3.0)
def _watch_live_runs(live: tuple[tuple[str, str], ...]) -> None:
    """While runs in the picker are queued or running: redraw the whole app (the picker's statuses with it)
    as soon as one of them changes status, whichever page is open."""
    for run_id, status in live:
        try:
            now = effective_status(store().get(run_id))
        except (RunNotFound, ValueError):
            now = "deleted"
        if now != status:
            st.rerun()


_FOLLOW = "follow-run"
_SHOWN_LABEL = "run-picker-label"
_STARTED = "started-message"


def follow_run(run_id: str, message: str) -> None:
    """After a run is started: the next rerun selects it in the sidebar and shows ``message`` once."""
    st.session_state[_FOLLOW] = run_id
    st.session_state[_STARTED] = message
    st.session_state["run_id"] = run_id


def show_started() -> None:
    """The message of the run started by the previous rerun (see :func:`follow_run`), with a link to it."""
    message = st.session_state.pop(_STARTED, None)
    if message:
        st.success(message, icon=":material/rocket_launch:")
        st.page_link("dashboard/runs.py", label="Open Runs", icon=":material/history:")
        st.page_link("dashboard/overview.py", label="Open its Overview", icon=":material/insights:")


def current_run() -> Run | None:
    """The run chosen in the sidebar, or None (with a message) when there is none."""
    run_id = st.session_state.get("run_id")
    if not run_id:
        st.info("No run selected. Start one on **New run** or open the demo run.")
        return None
    if not current_access().allows("read", run_id):
        st.error("This run cannot be opened here.")
        return None
    try:
        return store().get(run_id)
    except (RunNotFound, ValueError) as exc:
        st.error(escape(exc))
        return None


def reopen_run(run_id: str) -> Run:
    """``run_id`` opened again through the store of this session's access (inside a fragment, whose page
    opened it before); a run gone since then makes the whole page run again, which says so."""
    try:
        return store().get(run_id)
    except RunNotFound:
        st.rerun(scope="app")  # raises: nothing after it runs


def run_version(run: Run) -> str:
    """Cache key part that changes whenever the run's manifest is rewritten."""
    return run.manifest.get("updated", "")


def _scope(run_id: str) -> str:
    """The key of what this session sees of ``run_id`` (the caches below are shared by every session: a
    "figures only" link must never get an entry made for the owner); AccessDenied when it sees nothing."""
    access = current_access()
    access.require("read", run_id)
    return access.scope


def load_frame(run_id: str, version: str, *parts: str) -> pd.DataFrame | None:
    """A run artefact as a DataFrame (cached per run id, manifest version and access); None when missing."""
    return _load_frame(_scope(run_id), run_id, version, *parts)


@st.cache_data(show_spinner=False, max_entries=64)
def _load_frame(scope: str, run_id: str, version: str, *parts: str) -> pd.DataFrame | None:
    run = store().get(run_id)
    return run.load_frame(*parts) if run.has(*parts) else None


def load_corpus_frame(run_id: str) -> pd.DataFrame:
    """The run's corpus (``id``, ``text``, ``label``; "figures only": ``text`` blank, ``n_chars`` its
    length)."""
    return _load_corpus_frame(_scope(run_id), run_id)


@st.cache_data(show_spinner=False, max_entries=16)
def _load_corpus_frame(scope: str, run_id: str) -> pd.DataFrame:
    return store().get(run_id).corpus_frame()


def open_analysis_page(title: str) -> Run:
    """An analysis page's opening: its title, the run chosen in the sidebar (the page stops, with a
    message, when there is none) and the run's status banner."""
    st.title(title)
    run = current_run()
    if run is None:
        st.stop()
    status_banner(run)
    return run


def status_banner(run: Run) -> str:
    """Show the run's status; return it."""
    status = effective_status(run)
    manifest = run.manifest
    show_problems(manifest)
    if status == "failed":
        st.error(
            f"This run failed: {escape(manifest.get('error') or 'its worker stopped unexpectedly')}. "
            "Results computed before the failure are shown; `flare resume` finishes it."
        )
    elif status in ("queued", "running"):
        pending = still_embedding_words(manifest, status)
        st.info(
            f"This run is {status}: {escape(progress_sentence(manifest))}. Each page fills in as its stage "
            "finishes; the verdict first." + (f" {escape(pending)}" if pending else ""),
            icon=":material/hourglass_top:",
        )
    elif status == "cancelled":
        st.warning("This run was cancelled; results computed before that are shown.")
    if status in ("queued", "running"):
        _follow(run.id, _finished_stages(manifest))
    return status


def show_problems(manifest: dict[str, Any]) -> None:
    """A warning per stage that failed in a run that is otherwise complete: which, why, what to do."""
    sentences = problem_sentences(manifest)
    if sentences:
        st.warning(
            "**Done, with problems.** The other analyses are complete.  \n"
            + "  \n".join(escape(s) for s in sentences),
            icon=":material/warning:",
        )


def _finished_stages(manifest: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(n for n, e in (manifest.get("stages") or {}).items() if e.get("finished")))


@access_fragment(run_every=3.0)
def _follow(run_id: str, seen: tuple[str, ...]) -> None:
    """While a run works: redraw the whole page when one of its stages lands or the run ends."""
    run = reopen_run(run_id)
    if _finished_stages(run.manifest) != seen or effective_status(run) not in ("queued", "running"):
        st.rerun()


def explain_missing(run: Run, stages: tuple[str, ...], reason: str) -> None:
    """An empty section: "being computed" with the time left while one of ``stages`` is still to come in
    an active run, otherwise ``reason`` (why this run has no such result, in words)."""
    manifest = run.manifest
    planned = {row["name"] for row in manifest.get("plan") or []}
    pending = [s for s in stages if s in planned and s not in _finished_stages(manifest)]
    if effective_status(run) in ("queued", "running") and pending:
        st.info(
            f"Being computed: {stage_words(pending[0])}. This section fills in by itself "
            f"({escape(progress_sentence(manifest))} for the whole run).",
            icon=":material/hourglass_top:",
        )
    else:
        st.info(reason)


def download_csv(frame: pd.DataFrame, name: str, label: str = "Download CSV") -> None:
    """A download button for a chart's or table's data (cells that look like formulas are escaped)."""
    from flare_core.store.export import safe_csv

    st.download_button(label, safe_csv(frame), file_name=f"{name}.csv", mime="text/csv", key=f"dl-{name}")


def load_sufficiency(run_id: str, version: str, estimator: str) -> dict[str, pd.DataFrame] | None:
    """Scores, IS matrices and per-pair figures of one estimator (cached per run version and access)."""
    return _load_sufficiency(_scope(run_id), run_id, version, estimator)


@st.cache_data(show_spinner=False, max_entries=16)
def _load_sufficiency(
    scope: str, run_id: str, version: str, estimator: str
) -> dict[str, pd.DataFrame] | None:
    from flare_core.view.results import sufficiency_frames

    return sufficiency_frames(store().get(run_id), estimator)


#: Key of the container holding a page's plain-language verdict (CSS class ``st-key-page-verdict``).
VERDICT_KEY = "page-verdict"


def show_verdict(
    run: Run,
    *,
    checks_expanded: bool = False,
    container_key: str | None = VERDICT_KEY,
    link_labels: bool = True,
) -> None:
    """The verdict: its headline in the colour of its trust level, why the labels do or do not settle it,
    then the checks behind that level, in a container keyed ``container_key`` (None: drawn where it is
    called, inside the caller's own verdict). ``link_labels``: a link to *Check with a few labels* while
    labels would help (False on that page itself)."""
    with st.container(key=container_key) if container_key else st.container():
        _verdict(run, checks_expanded=checks_expanded, link_labels=link_labels)


def _verdict(run: Run, *, checks_expanded: bool, link_labels: bool) -> None:
    verdict = load_verdict(run)
    if verdict is None:
        st.info("The answer appears when the models have read your texts.")
        return
    view = verdict_view(verdict)
    alert = getattr(st, view.tone)
    if view.basis_words:
        st.caption(view.basis_words)
    can_label = current_access().allows("label", run.id)
    summary = view.summary if can_label else without_asking(view.summary)  # a viewer is not asked to label
    alert(f"**{escape(view.headline)}**  \n{escape(summary)}", icon=":material/recommend:")
    next_step = next_step_words(verdict, can_label=can_label) if view.basis else view.next_step
    if next_step:
        st.markdown(escape(next_step))
    if view.cost_sentence:
        st.markdown(escape(view.cost_sentence))
    if view.details:
        with st.expander("Details: how this answer was reached"):
            st.markdown(escape(view.details if can_label else without_asking(view.details)))
    if (
        link_labels
        and view.basis in ("label-free", "few labels")
        and not verdict.get("settled")
        and can_label
    ):
        st.page_link(LABELS_PAGE, label="Check with a few labels", icon=":material/label:")
    if view.map_sentence or view.level:
        with st.expander("What the label-free ranking says (the map)", expanded=checks_expanded):
            if view.map_sentence:
                st.markdown(escape(view.map_sentence))
            if view.level:
                st.caption(trust_sentence(view.level))
            for line in view.controls:
                st.caption(escape(line))
            if not view.checks.empty:
                st.dataframe(shown_frame(view.checks), hide_index=True)


#: The page where a person labels a few texts of a run.
LABELS_PAGE = "dashboard/labels.py"


def show_labels_table(table: pd.DataFrame) -> None:
    """What the labels say (:func:`flare_core.view.verdict.labels_table`), each chance drawn as a bar and
    written as a whole percent, as in the report ("95%")."""
    st.dataframe(
        shown_frame(chance_percents(table)),
        hide_index=True,
        column_config={
            column: st.column_config.ProgressColumn(column, min_value=0, max_value=100, format="%d%%")
            for column in chance_columns(table)
        },
    )
