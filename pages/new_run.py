"""New run: upload a corpus, choose columns and models, start the analysis in the background."""

from __future__ import annotations

import os

import streamlit as st

from flare_core.errors import CorpusError
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.inputs import available_models, load_corpus, load_precomputed, preview_table
from flare_core.run.params import ESTIMATOR_CHOICES, FLOW_PRESETS, build_params
from pages.common import store, viewer_only

MAX_UPLOAD_MB = int(os.environ.get("FLARE_MAX_UPLOAD_MB", "200"))
MAX_ROWS = int(os.environ.get("FLARE_MAX_ROWS", "200000"))

st.title("New run")
if viewer_only():
    st.info("This dashboard is in viewer-only mode: runs cannot be started here.")
    st.stop()

st.markdown(
    "Upload a corpus (CSV, TSV, Parquet or JSONL) with one text per row. Labels are optional: "
    "the ranking needs none, but with labels the dashboard also checks it against a supervised oracle."
)
upload = st.file_uploader("Corpus file", type=["csv", "tsv", "txt", "parquet", "jsonl"], key="corpus-upload")
if upload is None:
    st.stop()
if upload.size > MAX_UPLOAD_MB * 1024 * 1024:
    st.error(
        f"{upload.name} is {upload.size / 2**20:.0f} MB; the limit is {MAX_UPLOAD_MB} MB (FLARE_MAX_UPLOAD_MB)."
    )
    st.stop()
data = upload.getvalue()
try:
    frame, info, detected = preview_table(data, name=upload.name, max_bytes=MAX_UPLOAD_MB * 1024 * 1024)
except CorpusError as exc:
    st.error(f"{upload.name} cannot be read: {exc}")
    st.stop()
if info.get("encoding_warning"):
    st.warning(info["encoding_warning"])
st.caption(f"{len(frame):,} rows · {len(frame.columns)} columns · format {info.get('format')}")
st.dataframe(frame.head(20), hide_index=True)

columns = list(frame.columns)
left, right = st.columns(2)
text_column = left.selectbox(
    "Text column", columns, index=columns.index(detected["text"]) if detected.get("text") in columns else 0
)
label_choices = ["(none)"] + columns
label_default = label_choices.index(detected["label"]) if detected.get("label") in columns else 0
label_column = right.selectbox("Label column (optional)", label_choices, index=label_default)
pair_columns = None
if detected.get("pairs") and st.checkbox(
    f"Use pair columns {', '.join(c for c in detected['pairs'] if c)} for "
    + ("STS" if detected["pairs"][2] else "retrieval"),
    value=True,
):
    pair_columns = tuple(detected["pairs"])

st.subheader("Models")
available, missing = available_models()
models = st.multiselect(
    "Built-in models and controls",
    available,
    default=[
        m
        for m in ("all-MiniLM-L6-v2", "glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256")
        if m in available
    ],
    help="Controls (TF-IDF + SVD, a random-init transformer) show what 'no semantic knowledge' scores.",
)
if missing:
    st.caption(f"Not installed here: {', '.join(missing)}")
extra = st.text_input("Other models (Hugging Face ids or local folders, comma-separated)", "")
models += [m.strip() for m in extra.split(",") if m.strip()]
uploads = st.file_uploader(
    "Precomputed embeddings (.npy or .parquet, one row per text; the file name becomes the model name)",
    type=["npy", "parquet"],
    accept_multiple_files=True,
)

with st.expander("Analysis settings"):
    estimator = st.radio(
        "Information-sufficiency estimator",
        list(ESTIMATOR_CHOICES),
        horizontal=True,
        help="flow: FLARE's normalizing flows (slower, more accurate); gmm: EMIR's Gaussian mixtures (fast).",
    )
    flow_preset = st.radio("Flow size", list(FLOW_PRESETS), horizontal=True)
    references = st.multiselect(
        "Reference models (IS targets only, not ranked)", [m for m in available if m not in models]
    )
    collapse = st.checkbox("Mean-pooling collapse (SOCM) and layer-wise concentration", value=True)
    collapse_texts = st.number_input("Texts for SOCM (all pairs among them)", 2, 2000, 200)
    max_rows = st.number_input("Use at most this many texts (seeded sample; 0 = all)", 0, 1_000_000, 0)
    seed = st.number_input("Seed", 0, 2**31 - 1, 0)
    workers = st.number_input(
        "Worker processes (0 = automatic)",
        0,
        max(1, os.cpu_count() or 1),
        0,
        help="Embedding models and IS pairs run side by side in this many processes on this machine. "
        "Automatic: a large comparison uses two processes, a small one runs in one.",
    )
name = st.text_input("Run name", os.path.splitext(upload.name)[0])

if st.button("Start run", type="primary", disabled=not (models or uploads)):
    if len(frame) > MAX_ROWS and not (0 < max_rows <= MAX_ROWS):
        st.error(
            f"The file has {len(frame):,} rows; this dashboard analyses at most {MAX_ROWS:,} (FLARE_MAX_ROWS). "
            f"Set 'Use at most this many texts' to {MAX_ROWS:,} or fewer to analyse a seeded sample."
        )
        st.stop()
    try:
        corpus = load_corpus(
            data,
            name=upload.name,
            text_column=text_column,
            label_column=None if label_column == "(none)" else label_column,
            pair_columns=pair_columns,
            max_rows=int(max_rows) or None,
            seed=int(seed),
            max_bytes=MAX_UPLOAD_MB * 1024 * 1024,
        )
        precomputed = {
            os.path.splitext(f.name)[0]: load_precomputed(f.getvalue(), n_rows=len(corpus), name=f.name)
            for f in uploads
        }
        params = build_params(
            models=models,
            estimator=estimator,
            references=references,
            collapse=collapse,
            flow_preset=flow_preset,
            collapse_texts=int(collapse_texts),
            seed=int(seed),
            workers=int(workers) or None,
        )
        run = create_run(store(), corpus, params, name=name, precomputed=precomputed)
        submitted = jobs.submit(store(), run.id)
    except (CorpusError, ValueError, RuntimeError) as exc:
        st.error(str(exc))
        st.stop()
    st.session_state["run_id"] = run.id
    st.query_params["run"] = run.id
    if submitted["status"] == "started":
        st.success(f"Run `{run.id}` started with {len(corpus):,} texts. Follow it on the Runs page.")
    else:
        st.info(
            f"Run `{run.id}` is queued, position {submitted['position']}: it starts when a running one finishes."
        )
    st.page_link("pages/runs.py", label="Open Runs", icon=":material/history:")
