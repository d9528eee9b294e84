"""New run: upload a corpus, choose columns and models, start the analysis in the background."""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

import streamlit as st

from dashboard.common import escape, follow_run, store
from dashboard.session import current_access
from flare_core.answer.label_free import USE_WORDS
from flare_core.errors import CorpusError, RunNotFound
from flare_core.run import jobs
from flare_core.run.create import check_embedding_names, create_run
from flare_core.run.eta import cached_for_corpus, describe_duration, expected_embedding_seconds
from flare_core.run.inputs import available_models, max_upload_mb, preview_table
from flare_core.run.params import (
    DEFAULT_CONTROLS,
    ESTIMATOR_CHOICES,
    FLOW_PRESETS,
    TOLERANCES,
    RunParams,
    build_params,
)
from flare_core.run.precheck import (
    CorpusPrecheck,
    FieldCheck,
    id_column,
    precheck_corpus,
    precheck_embeddings,
    precheck_judgements,
    precheck_model_ids,
)
from flare_core.view.results import run_words

MAX_UPLOAD_MB = max_upload_mb()
MAX_ROWS = int(os.environ.get("FLARE_MAX_ROWS", "200000"))
#: The estimator choices in words (the names stay in the help).
ESTIMATOR_WORDS = {
    "both": "both (surest)",
    "flow": "flows (slower, finer)",
    "gmm": "mixtures (fast, rougher)",
}
#: The runs this session started from the page: what was started (:func:`start_signature`) -> run id.
STARTED = "new-run-started"
#: The run this session started last, shown at the top of the page until another is started.
LAST_STARTED = "new-run-last-started"


@st.cache_data(show_spinner=False, max_entries=64)
def file_digest(file_id: str, _content: bytes) -> str:
    """The sha256 of an uploaded file's bytes, once per upload."""
    return hashlib.sha256(_content).hexdigest()


def start_signature(files: list[Any], settings: dict[str, Any]) -> str:
    """What a Start would start: the bytes of the uploaded ``files`` (the corpus, judgements, queries,
    embeddings) and every setting of the form, as one digest; the run's name is left out."""
    digests = [file_digest(f.file_id, f.getvalue()) for f in files if f is not None]
    return hashlib.sha256(json.dumps([digests, settings], default=str).encode("utf-8")).hexdigest()


def started_before(signature: str) -> dict | None:
    """The manifest of the run this session already started with ``signature``, None when none (or it was
    deleted since)."""
    run_id = st.session_state.get(STARTED, {}).get(signature)
    try:
        return store().get(run_id).manifest if run_id else None
    except (RunNotFound, ValueError):
        return None


def started_panel() -> None:
    """The run this session started last, for as long as the session lasts (a rerun, a run changing
    status, another page and back): its name, short id and time, where it is, and a link to it."""
    run_id = st.session_state.get(LAST_STARTED)
    if not run_id:
        return
    try:
        run = store().get(run_id)
    except (RunNotFound, ValueError):
        return
    status = jobs.effective_status(run)
    where = {
        "queued": "It waits for a free slot and starts by itself.",
        "running": "It runs in the background: you can leave this page.",
        "done": "It has finished.",
    }.get(status, f"It is {status}.")
    n_texts = run.manifest.get("corpus", {}).get("n_texts") or 0
    st.success(
        f"Started: **{escape(run_words(run.manifest))}** with {n_texts:,} texts. {where}",
        icon=":material/rocket_launch:",
    )
    left, right = st.columns(2)
    left.page_link(
        "dashboard/overview.py", label="Open it", icon=":material/insights:", query_params={"run": run_id}
    )
    right.page_link("dashboard/runs.py", label="Open Runs", icon=":material/history:")


def show_check(slot, check: FieldCheck | None) -> None:
    """A field's check under it: errors and warnings as alerts, a passed check as a quiet caption."""
    if check is None:
        return
    text = escape(check.message)
    if check.level == "error":
        slot.error(text, icon=":material/block:")
    elif check.level == "warning":
        slot.warning(text, icon=":material/warning:")
    else:
        slot.caption(f":material/check_circle: {text}")


@st.cache_data(show_spinner=False, max_entries=32)
def precheck_upload(file_id: str, _frame, _info, **choices) -> CorpusPrecheck:
    """:func:`precheck_corpus` of the uploaded table, once per file and choice of columns and sample."""
    return precheck_corpus(_frame, _info, **choices)


@st.cache_data(show_spinner=False, max_entries=32)
def precheck_embeddings_file(file_id: str, _data: bytes, file_name: str, n_rows: int | None):
    """:func:`precheck_embeddings` of one uploaded file, once per file and corpus length."""
    return precheck_embeddings(_data, name=file_name, n_rows=n_rows)


def show_expected_time(models: list[str], corpus) -> None:
    """The time the chosen models should take to embed the corpus here, from the speeds measured on this
    machine (by earlier runs and ``flare models --measure``); models whose embeddings of this corpus are
    cached only load."""
    texts = corpus.texts
    cached = cached_for_corpus(models, corpus.content_hash, RunParams(models=models).max_length)
    seconds, unmeasured = expected_embedding_seconds(models, texts, cached=cached)
    reused = (
        f" {len(cached)} of them already embedded these texts here: "
        f"{'it is' if len(cached) == 1 else 'they are'} read back in seconds."
        if cached
        else ""
    )
    if seconds:
        slowest = max(seconds, key=seconds.get)
        st.caption(
            f":material/timer: Embedding {len(texts):,} texts should take "
            f"{describe_duration(sum(seconds.values()))} with the "
            f"{'model' if len(seconds) == 1 else f'{len(seconds)} models'} whose speed was measured on this "
            f"machine (slowest: {escape(slowest)}, {describe_duration(seconds[slowest])}).{reused}"
            + (f" Not measured here yet: {escape(', '.join(unmeasured))}." if unmeasured else "")
        )
    elif unmeasured:
        st.caption(
            "How long embedding will take is not known yet: these models have not run on this machine. "
            "The first run measures them.",
            help="Or measure them once, in a terminal, with `flare models --measure` (a few minutes); this "
            "page then shows the expected embedding time.",
        )


st.title("New run")
if not current_access().allows("start"):
    st.info("Runs cannot be started from a shared link.")
    st.stop()
started_panel()

st.markdown(
    "Upload a corpus (CSV, TSV, Parquet or JSONL) with one text per row. Labels are optional: "
    "the answer needs none, and with labels it also checks the models on your own categories. Words you "
    "meet here are explained in the Glossary (under Help)."
)
st.page_link("dashboard/glossary.py", label="Glossary: the terms in plain words", icon=":material/menu_book:")
upload = st.file_uploader("Corpus file", type=["csv", "tsv", "txt", "parquet", "jsonl"], key="corpus-upload")
if upload is None:
    st.stop()
if upload.size > MAX_UPLOAD_MB * 1024 * 1024:
    st.error(
        f"{escape(upload.name)} is {upload.size / 2**20:.0f} MB; the limit is {MAX_UPLOAD_MB} MB "
        "(FLARE_MAX_UPLOAD_MB)."
    )
    st.stop()
data = upload.getvalue()
try:
    frame, info, detected = preview_table(data, name=upload.name, max_bytes=MAX_UPLOAD_MB * 1024 * 1024)
except CorpusError as exc:
    st.error(f"{escape(upload.name)} cannot be read: {escape(exc)}")
    st.stop()
if info.get("encoding_warning"):
    st.warning(escape(info["encoding_warning"]))
st.caption(f"{len(frame):,} rows · {len(frame.columns)} columns · format {info.get('format')}")
st.dataframe(frame.head(20), hide_index=True)

columns = list(frame.columns)
left, right = st.columns(2)
text_column = left.selectbox(
    "Text column", columns, index=columns.index(detected["text"]) if detected.get("text") in columns else 0
)
text_status = left.empty()
label_choices = ["(none)"] + columns
label_default = label_choices.index(detected["label"]) if detected.get("label") in columns else 0
label_column = right.selectbox("Label column (optional)", label_choices, index=label_default)
label_status = right.empty()
pair_columns = None
if detected.get("pairs") and st.checkbox(
    f"Use pair columns {escape(', '.join(c for c in detected['pairs'] if c))} for "
    + ("similarity scores (STS)" if detected["pairs"][2] else "search (retrieval)"),
    value=True,
):
    pair_columns = tuple(detected["pairs"])
pair_status = st.empty()
with st.expander("Search judgements (optional): which of these documents answer which queries"):
    st.caption(
        "Each row of the corpus is a document. A judgements file has the columns query_id, doc_id and "
        "relevance (0 = not relevant, 1 = relevant, 2 and up = more relevant; a TREC qrels file works too), "
        "with the query texts in a query column or in a queries file. With judgements, the answer ranks the "
        "models by how well each puts the relevant documents first in its top 10 for your queries (the "
        "search score nDCG@10, in the Glossary)."
    )
    qrels_upload = st.file_uploader(
        "Judgements file", type=["csv", "tsv", "txt", "qrels", "parquet", "jsonl"], key="qrels-upload"
    )
    queries_upload = st.file_uploader(
        "Queries file (query_id, query), when the judgements name queries by id only",
        type=["csv", "tsv", "txt", "parquet", "jsonl"],
        key="queries-upload",
    )
    id_default = id_column(columns)
    doc_id_column = st.selectbox(
        "Document id column", columns, index=columns.index(id_default) if id_default in columns else 0
    )
    judgements_status = st.empty()

st.subheader("Models")
available, missing = available_models()
models = st.multiselect(
    "Built-in models",
    available,
    default=[
        m
        for m in ("all-MiniLM-L6-v2", "glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256")
        if m in available
    ],
    help="The models to compare. tfidf-svd-256 is a simple candidate that only counts words (TF-IDF "
    "compressed by SVD): a model that understands text should beat it. Two controls built to know nothing "
    "are added to every run (random-minilm-l6, a transformer with random weights; shuffled-glove-6b-50d, "
    "GloVe with its rows shuffled): they show where no knowledge lands and are never recommended. Untick "
    "every model here to rank only your own embeddings.",
)
if missing:
    st.caption(f"Not installed here: {', '.join(missing)}")
extra = st.text_input("Other models (Hugging Face ids or local folders, comma-separated)", "")
extra_models = [m.strip() for m in extra.split(",") if m.strip()]
extra_status = st.empty()
models += extra_models
uploads = st.file_uploader(
    "Precomputed embeddings (.npy or .parquet, one row per text, in the corpus's order)",
    type=["npy", "parquet"],
    accept_multiple_files=True,
    help="Each file is ranked as one model, under the name you give it. A .npy file holds one numeric "
    "array (never a pickle); a Parquet file holds numeric columns or one column of equal-length vectors.",
)
embedding_rows = []
for upload_file in uploads or []:
    name_field, status_field = st.columns([1, 2])
    # a label is markdown and also the field's accessible name: a plain file name goes in as it is (so a
    # screen reader and a person read the same name), any other is escaped
    plain = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9 .-]*", upload_file.name) is not None
    embedding_name = name_field.text_input(
        f"Name of {upload_file.name if plain else escape(upload_file.name)}",
        os.path.splitext(upload_file.name)[0],
        key=f"embedding-name-{upload_file.file_id}",
    )
    embedding_rows.append((upload_file, embedding_name, status_field.empty()))
names_status = st.empty()

use = st.radio(
    "What will the embeddings be used for?",
    list(USE_WORDS),
    index=list(USE_WORDS).index("unsure"),
    format_func=lambda u: USE_WORDS[u][0].upper() + USE_WORDS[u][1:],
    horizontal=True,
    help="Without labels, the answer follows the label-free rule that the benchmark measured best for this "
    "use (search: nearest neighbours; grouping: k-means clusters; a classifier: logistic regression).",
)

tolerance = st.radio(
    "A model is good enough when it is within",
    list(TOLERANCES),
    index=list(TOLERANCES).index(2.0),
    format_func=lambda t: f"{t:g} point" + ("" if t == 1 else "s") + " of the best",
    horizontal=True,
    help="How close to the best model (in points of accuracy, or of search quality, nDCG@10) you would "
    "accept. The answer says how sure it is that its choice is this close, and when a few labels have "
    "settled it.",
)

with st.expander("Analysis settings"):
    estimator = st.radio(
        "How to measure what the models know about each other",
        list(ESTIMATOR_CHOICES),
        format_func=lambda e: ESTIMATOR_WORDS.get(e, e),
        horizontal=True,
        help="How much one model's embedding of a text tells about another's (information sufficiency, "
        "IS(U→V)), estimated in one of two ways or both: flows are small neural networks (FLARE's "
        "normalizing flows: slower, finer), mixtures are sums of bell curves (EMIR's Gaussian mixtures: "
        "fast, rougher); with both, each checks the other.",
    )
    flow_preset = st.radio(
        "Estimator settings",
        list(FLOW_PRESETS),
        index=list(FLOW_PRESETS).index("default"),
        horizontal=True,
        help="default: the settings the validity benchmark ranked best (embeddings whitened to 32 "
        "dimensions); fast: smaller flows and fewer epochs, for a first look; paper: FLARE's flow at 128 "
        "dimensions with KNIFE's mixtures, as the papers describe them (it ranked models less well on the "
        "benchmark). The docs' Methods page, 'Estimator presets'.",
    )
    references = st.multiselect(
        "Models to compare against, not ranked",
        [m for m in available if m not in models],
        help="Reference models: only targets V of IS(U→V), what the candidates are asked to predict; they "
        "are never ranked or recommended.",
    )
    collapse = st.checkbox(
        "Check what averaging the words of a text hides, and how each layer packs them",
        value=True,
        help="Mean-pooling collapse (SOCM: second-order collapse by mean pooling) and layer-wise "
        "concentration, for the transformer models.",
    )
    collapse_texts = st.number_input(
        "Texts compared two by two for that check",
        2,
        2000,
        200,
        help="SOCM is computed for every pair among this many texts (200 texts: 19,900 pairs).",
    )
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

# -- the checks the run would make, shown under each field before Start ------------------------------------
blocked: list[str] = []
if len(frame) > MAX_ROWS and not (0 < max_rows <= MAX_ROWS):
    show_check(
        text_status,
        FieldCheck(
            "error",
            f"The file has {len(frame):,} rows; this dashboard analyses at most {MAX_ROWS:,} "
            f"(FLARE_MAX_ROWS). Set 'Use at most this many texts' to {MAX_ROWS:,} or fewer to analyse a "
            "seeded sample.",
        ),
    )
    blocked.append("too many rows")
    corpus = None
else:
    checked = precheck_upload(
        upload.file_id,
        frame,
        info,
        text_column=text_column,
        label_column=None if label_column == "(none)" else label_column,
        pair_columns=pair_columns,
        max_rows=int(max_rows) or None,
        seed=int(seed),
    )
    show_check(text_status, checked.text)
    show_check(label_status, checked.label)
    show_check(pair_status, checked.pairs)
    if checked.blocks:
        blocked.append("the corpus columns")
    corpus = checked.corpus
judgements = None
if qrels_upload is not None and corpus is not None:
    check, judgements = precheck_judgements(
        frame,
        corpus,
        doc_id_column=doc_id_column,
        qrels=(qrels_upload.name, qrels_upload.getvalue()),
        queries=None if queries_upload is None else (queries_upload.name, queries_upload.getvalue()),
        pair_columns=pair_columns,
        source_name=upload.name,
    )
    show_check(judgements_status, check)
    if check.blocks:
        blocked.append("the judgements")
if extra_models:
    models_check = precheck_model_ids(extra_models)
    if models_check.blocks:
        show_check(extra_status, models_check)
        blocked.append("an unknown model")
precomputed = {}
for upload_file, embedding_name, status in embedding_rows:
    check, array = precheck_embeddings_file(
        upload_file.file_id, upload_file.getvalue(), upload_file.name, None if corpus is None else len(corpus)
    )
    show_check(status, check)
    if check.blocks:
        blocked.append(upload_file.name)
    elif array is not None:
        precomputed[embedding_name.strip()] = array
try:
    check_embedding_names([n for _, n, _ in embedding_rows], models=[*models, *DEFAULT_CONTROLS, *references])
except ValueError as exc:
    show_check(names_status, FieldCheck("error", str(exc)))
    blocked.append("the embeddings' names")
if corpus is not None and models:
    show_expected_time(models, corpus)
if not (models or embedding_rows):
    blocked.append("no model")
    st.caption("Tick a model or add an embeddings file to start.")
elif blocked:
    st.caption("Start is available once the problems marked above are fixed.")

signature = start_signature(
    [upload, qrels_upload, queries_upload, *(f for f, _, _ in embedding_rows)],
    {
        "text": text_column,
        "label": label_column,
        "pairs": pair_columns,
        "max_rows": max_rows,
        "seed": seed,
        "models": models,
        "estimator": estimator,
        "preset": flow_preset,
        "references": references,
        "collapse": collapse,
        "collapse_texts": collapse_texts,
        "workers": workers,
        "use": use,
        "tolerance": tolerance,
        "doc_id": doc_id_column,
        "embeddings": [n for _, n, _ in embedding_rows],
    },
)
again = started_before(signature)
if again is not None:
    st.caption(
        f":material/block: You already started this file with these settings: {escape(run_words(again))}. "
        "Change the file or a setting to start another run."
    )
if jobs.background_runs(store()):
    st.caption(
        ":material/pause_circle: The demo run gives way to yours: when you start a run it pauses, and it "
        "carries on once your runs have finished."
    )
if st.button("Start run", type="primary", disabled=bool(blocked) or again is not None):
    if corpus is None:
        st.stop()
    current_access().require("start")
    try:
        params = build_params(
            models=models,
            estimator=estimator,
            references=references,
            collapse=collapse,
            flow_preset=flow_preset,
            collapse_texts=int(collapse_texts),
            seed=int(seed),
            workers=int(workers) or None,
            use=use,
            tolerance_points=float(tolerance),
        )
        run = create_run(store(), corpus, params, name=name, precomputed=precomputed, judgements=judgements)
        submitted = jobs.submit(store(), run.id)
    except (CorpusError, ValueError, RuntimeError) as exc:
        st.error(escape(exc))
        st.stop()
    if submitted["status"] == "started":
        message = f"Run `{run.id}` started with {len(corpus):,} texts. Follow it on the Runs page."
    else:
        message = (
            f"Run `{run.id}` is queued, position {submitted['position']}: it starts when a running "
            "one finishes."
        )
    follow_run(run.id, message)
    st.session_state.setdefault(STARTED, {})[signature] = run.id
    st.session_state[LAST_STARTED] = run.id
    st.rerun()
