"""Mean-pooling collapse (SOCM): d_μ/d_Σ per text pair, SOCM distributions and the most-collapsed pairs."""

from __future__ import annotations

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
from flare_core.store.runs import safe_name
from flare_core.view import figures
from flare_core.view.findings import collapse_finding
from flare_core.view.glossary import explain
from flare_core.view.results import most_collapsed_pairs, pair_token_view

run = open_analysis_page("Mean-pooling collapse")
version = run_version(run)
summary = load_frame(run.id, version, "collapse", "summary.parquet")
if summary is None:
    explain_missing(
        run,
        ("collapse",),
        "This run has no collapse figures: they need a transformer model among the candidates (one that "
        "reads token by token, such as all-MiniLM-L6-v2) and the collapse analysis switched on in the New "
        "run page's settings. Runs of uploaded embeddings have no tokens to look at.",
    )
    st.stop()
show_finding(collapse_finding(summary))
st.caption(
    "Averaging the token embeddings of a text (mean pooling) can give two texts nearly the same embedding "
    "although their words are spread very differently; a pair's collapse score is high when that happens.",
    help=explain("socm"),
)
with st.expander("Summary per model (every figure)"):
    show_table(summary)
download_csv(summary, f"{run.id}-collapse-summary")
models = summary["model"].tolist()
corpus = load_corpus_frame(run.id)
pairs_by_model = {m: load_frame(run.id, version, "collapse", f"{safe_name(m)}.parquet") for m in models}

st.subheader("How much collapse, over pairs of texts", help=explain("socm_mean"))
st.plotly_chart(
    figures.socm_distributions({m: f["socm"].to_numpy() for m, f in pairs_by_model.items()}), key="socm-hist"
)

model = st.selectbox("Model", models)
pairs = pairs_by_model[model]
st.subheader(
    f"Each pair of texts: are the means close while the tokens differ? ({len(pairs):,} pairs)",
    help=f"{explain('d_mu')} {explain('d_sigma')} {explain('socm')}",
)
bounds = figures.scatter_points_range(len(pairs))
if bounds is None:
    max_points = len(pairs)
else:
    low, high, default, step = bounds
    max_points = st.slider("Points drawn (seeded sample)", low, high, default, step)
texts = corpus["text"].tolist() if texts_shown(run.id) else None  # None: a "figures only" link
st.plotly_chart(figures.collapse_scatter(pairs, model, max_points=max_points, texts=texts), key="scatter")
download_csv(pairs, f"{run.id}-collapse-{safe_name(model)}")

st.subheader("Most-collapsed pairs")
k = min(len(pairs), 20)
if len(pairs) > 5:
    k = st.slider("How many", 5, min(len(pairs), 100), k)
top = most_collapsed_pairs(pairs, texts, k)
event = show_table(
    top,
    on_select="rerun",
    selection_mode="single-row",
    key="top-pairs",
)
selected = event.selection.rows if event is not None else []
if texts is None:
    st.caption("This link shows figures only: the texts of the pairs and their tokens are left out.")
elif selected:
    pair = top.iloc[selected[0]]
    text_a, text_b = texts[int(pair["row_i"])], texts[int(pair["row_j"])]
    for which, text in (("A", text_a), ("B", text_b)):
        st.markdown(f"**Text {which}**")
        st.text(text[:400])  # as plain text: no markdown, no HTML
    try:
        view = pair_token_view(model, text_a, text_b)
        st.plotly_chart(figures.token_view_figure(view), key="token-view")
    except Exception as exc:  # noqa: BLE001 - the model may be missing on this machine
        st.warning(f"The token view needs the model {escape(model)} on this machine: {escape(exc)}")
else:
    st.caption(
        "Select a row to see both texts' token embeddings (uncentred PCA, as in the SOCM paper's Figure 1)."
    )
