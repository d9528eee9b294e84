"""Overview: the recommendation in one sentence, the ranking table and the run's parameters."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.common import (
    current_run,
    download_csv,
    escape,
    load_frame,
    reopen_run,
    run_version,
    show_labels_table,
    show_verdict,
    status_banner,
)
from dashboard.session import access_fragment
from dashboard.tables import show_table
from dashboard.tradeoff import show_quality_cost
from flare_core.answer.labels import load_labels
from flare_core.answer.stored import VERDICT_FILE, has_grounds, load_verdict
from flare_core.run.jobs import effective_status
from flare_core.view import figures
from flare_core.view.glossary import explain
from flare_core.view.results import (
    empty_vector_sentence,
    empty_vectors,
    models_table,
    ranking_table,
    search_judged,
)
from flare_core.view.tables import NUMBER_FORMAT, settings_frame, shown_frame
from flare_core.view.verdict import (
    grounds_heading,
    labels_given_words,
    labels_table,
    map_drawing_words,
    models_chosen_words,
)

st.title("Overview")
st.page_link("dashboard/how_to_read.py", label="How to read this", icon=":material/help:")
run = current_run()
if run is None:
    st.stop()
status = effective_status(run)
live = status in ("queued", "running")


@st.cache_data(show_spinner=False, max_entries=16)
def empty_counts(run_id: str, version: str) -> dict[str, int]:
    """The texts each model of the run gave an empty vector (once per version of its manifest)."""
    return empty_vectors(reopen_run(run_id))


@access_fragment(run_every=3.0 if live else None)
def answer(run_id: str) -> None:
    """The status and the verdict; while the run works, redrawn every 3 s (a provisional verdict first).
    The run is opened again in each of its runs, through the store of the access checked then."""
    run = reopen_run(run_id)
    now = effective_status(run)
    if live and now not in ("queued", "running"):
        st.rerun()  # the run has ended: draw the whole page with its final results
    status_banner(run)
    show_verdict(run)
    for model, n in empty_counts(run.id, run_version(run)).items():
        st.caption(f":material/warning: {escape(empty_vector_sentence(model, n))}")
    drawing = map_drawing_words(run.manifest, now, answered=run.has(VERDICT_FILE))
    if drawing:
        st.caption(escape(drawing))


answer(run.id)
verdict = load_verdict(run)
said = labels_table(verdict) if verdict and has_grounds(verdict) else None
if said is not None and not said.empty:
    st.subheader(grounds_heading(verdict))
    show_labels_table(said)
manifest = run.manifest
version = run_version(run)
corpus = manifest["corpus"]
st.markdown(
    f"**{escape(manifest.get('name'))}** · {corpus['n_texts']:,} texts · labels: "
    f"{escape(labels_given_words(corpus, load_labels(run).entries, search_judged(run)))} · "
    f"{models_chosen_words(manifest)} · run `{run.id}`"
)

summary = load_frame(run.id, version, "summary.parquet")
if summary is None:
    st.info("The ranking table appears when the run has finished its analyses.")
else:
    st.subheader("The label-free ranking: how much each model tells about the others", help=explain("nats"))
    sort_by = next((c for c in ("flow_score", "gmm_score") if c in summary), "model")
    ranking = ranking_table(summary, verdict, empty_counts(run.id, version))
    shown_ranking = shown_frame(ranking)  # a control without a score reads "—"
    score_help = f"{explain(sort_by)} In nats per dimension."
    show_table(
        ranking,
        columns={
            "score": st.column_config.NumberColumn("score", help=score_help, format=NUMBER_FORMAT)
            if pd.api.types.is_numeric_dtype(shown_ranking["score"])
            else st.column_config.TextColumn("score", help=score_help),
            "likely between": st.column_config.TextColumn("likely between", help=explain("ci")),
            "notes": st.column_config.TextColumn("notes", width="large"),
        },
    )
    table = summary.sort_values(sort_by, ascending=sort_by == "model").reset_index(drop=True)
    with st.expander("All columns"):
        show_table(table)  # headings in words, the stored names in their help; a gap reads "—"
    download_csv(table, f"{run.id}-ranking")
    if sort_by != "model":
        estimator = sort_by.split("_")[0]
        bars = table[table["role"] == "candidate"].rename(
            columns={sort_by: "score", f"{estimator}_ci_low": "ci_low", f"{estimator}_ci_high": "ci_high"}
        )
        st.plotly_chart(
            figures.ranking_bar(bars[["model", "score", "ci_low", "ci_high"]], "Ranking"), key="bars"
        )
        st.caption(explain(sort_by) + " " + explain("ci"))

show_quality_cost(run)

st.subheader("Models")
show_table(models_table(manifest["models"], empty_counts(run.id, version)))
left, right = st.columns(2)
with left.expander("Parameters and seeds"):
    show_table(settings_frame({"parameters": manifest.get("params"), "seeds": manifest.get("seeds")}))
with right.expander("Versions and timings (seconds)"):
    show_table(settings_frame({"versions": manifest.get("versions"), "timings": manifest.get("timings")}))
