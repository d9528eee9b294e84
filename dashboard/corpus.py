"""Corpus & embeddings: what was analysed, per-model embedding statistics and a 2-D map of each model."""

from __future__ import annotations

import html

import streamlit as st

from dashboard.common import (
    download_csv,
    escape,
    explain_missing,
    load_corpus_frame,
    load_frame,
    open_analysis_page,
    run_version,
)
from dashboard.findings import show_finding
from dashboard.session import texts_shown
from dashboard.tables import show_table
from flare_core.answer.labels import load_labels
from flare_core.store.runs import safe_name
from flare_core.view import figures
from flare_core.view.findings import corpus_finding
from flare_core.view.results import embedding_table, search_judged

run = open_analysis_page("Corpus & embeddings")
manifest = run.manifest
version = run_version(run)
corpus = load_corpus_frame(run.id)
with_texts = texts_shown(run.id)  # a "figures only" link: lengths of the texts, never the texts
lengths = corpus["text"].str.len() if with_texts else corpus["n_chars"]
stats = manifest["corpus"].get("stats", {})
has_labels = manifest["corpus"].get("has_labels")
judged = search_judged(run) or {}
show_finding(
    corpus_finding(
        corpus["text"],
        corpus["label"] if has_labels else None,
        stats,
        manifest["models"],
        lengths=lengths,
        labelled=len({int(e["row"]) for e in load_labels(run).entries}),
        judged=int(judged.get("judged", 0)),
    )
)

st.subheader("Corpus")
cols = st.columns(4)
cols[0].metric("Texts", f"{len(corpus):,}")
cols[1].metric("Median length", f"{int(lengths.median()):,} chars")
cols[2].metric("Dropped (empty)", f"{stats.get('n_empty_dropped', 0):,}")
cols[3].metric("Duplicates", f"{stats.get('n_duplicates', 0):,}")
if stats.get("encoding_warning"):
    st.warning(escape(stats["encoding_warning"]))
if stats.get("truncation_note"):
    st.warning(escape(stats["truncation_note"]))
if has_labels:
    st.plotly_chart(figures.label_counts_bar(corpus["label"]), key="label-counts")

st.subheader("Embeddings")
embedding_stats = embedding_table(run)
show_table(embedding_stats)
download_csv(embedding_stats, f"{run.id}-embedding-stats")

st.subheader("Embedding map (UMAP)")
done = [m["id"] for m in manifest["models"] if m.get("status") == "done"]
mapped = [m for m in done if run.has("maps", f"{safe_name(m)}.parquet")]
if not mapped:
    explain_missing(run, ("maps",), "This run was made without embedding maps.")
    st.stop()
n_points = manifest["params"].get("map_points", 3000)
st.caption(
    f"UMAP (cosine, seeded) of each model's embeddings; above {n_points:,} texts a seeded sample of "
    f"{n_points:,} is drawn. "
    + (
        "Hover shows the text; select points with the lasso to list them."
        if with_texts
        else "This link shows figures only: a point names its text's row, not the text."
    )
)
chosen = st.multiselect("Models side by side", mapped, default=mapped[:2], max_selections=2)
colour_options = ["label"] if has_labels else []
colour = st.radio("Colour by", colour_options + ["none"], horizontal=True) if colour_options else "none"
for column, model_id in zip(st.columns(max(len(chosen), 1)), chosen, strict=False):
    points = load_frame(run.id, version, "maps", f"{safe_name(model_id)}.parquet").copy()
    if with_texts:  # the CSV holds the texts as they are; the map's hover their first 200 characters
        points["text"] = corpus["text"].iloc[points["row"]].to_numpy()
    else:
        points["text"] = [f"text {int(r) + 1}" for r in points["row"]]
    if has_labels:
        points["label"] = corpus["label"].iloc[points["row"]].astype(str).to_numpy()
    hover = points.assign(text=points["text"].map(lambda t: html.escape(t[:200])))
    fig = figures.embedding_map(hover, model_id, colour="label" if colour == "label" else None)
    with column:
        event = st.plotly_chart(
            fig, key=f"map-{model_id}", on_select="rerun", selection_mode=("lasso", "box")
        )
        download_csv(points, f"{run.id}-map-{safe_name(model_id)}")
        selected = [
            int(p["customdata"][0]) for p in (event.selection.points if event else []) if p.get("customdata")
        ]
        if selected:
            st.caption(f"{len(selected)} selected texts")
            show_table(
                corpus.iloc[selected][
                    ["id"] + (["text"] if with_texts else []) + (["label"] if has_labels else [])
                ]
            )
