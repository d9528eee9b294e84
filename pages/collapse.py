"""Mean-pooling collapse (SOCM): d_μ/d_Σ per text pair, SOCM distributions and the most-collapsed pairs."""

from __future__ import annotations

import streamlit as st

from flare_core.store.runs import safe_name
from flare_core.view import figures
from flare_core.view.glossary import explain
from flare_core.view.results import most_collapsed_pairs, pair_token_view
from pages.common import (
    current_run,
    download_csv,
    escape,
    explain_missing,
    load_corpus_frame,
    load_frame,
    run_version,
    status_banner,
)

st.title("Mean-pooling collapse")
st.caption(explain("socm"))
run = current_run()
if run is None:
    st.stop()
status_banner(run)
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
st.dataframe(summary, hide_index=True)
download_csv(summary, f"{run.id}-collapse-summary")
models = summary["model"].tolist()
corpus = load_corpus_frame(run.id)
pairs_by_model = {m: load_frame(run.id, version, "collapse", f"{safe_name(m)}.parquet") for m in models}

st.subheader("SOCM distribution", help=explain("socm_mean"))
st.plotly_chart(
    figures.distributions(
        {m: f["socm"].to_numpy() for m, f in pairs_by_model.items()}, "SOCM per text pair", "SOCM"
    ),
    key="socm-hist",
)

model = st.selectbox("Model", models)
pairs = pairs_by_model[model]
st.subheader(f"d_μ vs d_Σ ({len(pairs):,} pairs)", help=f"{explain('d_mu')} {explain('d_sigma')}")
max_points = st.select_slider(
    "Points drawn (seeded sample)", [10_000, 50_000, 100_000, 500_000], value=100_000
)
texts = corpus["text"].tolist()
st.plotly_chart(figures.collapse_scatter(pairs, model, max_points=max_points, texts=texts), key="scatter")
download_csv(pairs, f"{run.id}-collapse-{safe_name(model)}")

st.subheader("Most-collapsed pairs")
k = st.slider("How many", 5, 100, 20)
top = most_collapsed_pairs(pairs, texts, k)
event = st.dataframe(
    top,
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    key="top-pairs",
)
selected = event.selection.rows if event is not None else []
if selected:
    pair = top.iloc[selected[0]]
    text_a, text_b = texts[int(pair["row_i"])], texts[int(pair["row_j"])]
    st.markdown(f"**Text A:** {escape(text_a[:400])}", unsafe_allow_html=True)
    st.markdown(f"**Text B:** {escape(text_b[:400])}", unsafe_allow_html=True)
    try:
        view = pair_token_view(model, text_a, text_b)
        st.plotly_chart(figures.token_view_figure(view), key="token-view")
    except Exception as exc:  # noqa: BLE001 - the model may be missing on this machine
        st.warning(f"The token view needs the model {model!r} on this machine: {exc}")
else:
    st.caption(
        "Select a row to see both texts' token embeddings (uncentred PCA, as in the SOCM paper's Figure 1)."
    )
