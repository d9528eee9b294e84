"""Layer-wise token concentration: λ, r, C, S(X)/‖μ‖² and within-text cosine per layer, models overlaid."""

from __future__ import annotations

import streamlit as st

from dashboard.common import (
    download_csv,
    escape,
    explain_missing,
    load_frame,
    open_analysis_page,
    run_version,
)
from dashboard.findings import show_finding
from flare_core.view import figures
from flare_core.view.findings import layers_finding
from flare_core.view.glossary import explain
from flare_core.view.results import layer_metrics

run = open_analysis_page("Layer-wise concentration")
frame = load_frame(run.id, run_version(run), "concentration.parquet")
if frame is None:
    explain_missing(
        run,
        ("concentration",),
        "This run has no layer-by-layer figures: they need a transformer model among the candidates and the "
        "collapse analysis switched on in the New run page's settings.",
    )
    st.stop()
frame, metrics = layer_metrics(frame)
show_finding(layers_finding(frame))
st.caption(
    "How each transformer layer pulls the tokens of a text towards their mean (the SOCM paper, section 6). "
    "Strong concentration in the last layers makes mean pooling lose the token distribution."
)
if run.has("concentration.json"):
    info = run.load_json("concentration.json")
    st.caption(f"Averaged over {info.get('texts')} sampled texts.")
    for model, reason in (info.get("skipped") or {}).items():
        st.warning(f"{escape(model)}: {escape(reason)}")
models = frame["model"].unique().tolist()
chosen = st.multiselect("Models", models, default=models)
shown = frame[frame["model"].isin(chosen)]
columns = st.columns(2)
for index, metric in enumerate(metrics):
    with columns[index % 2]:
        st.plotly_chart(figures.layer_curves(shown, metric), key=f"curve-{metric}")
        note = explain(metric)
        if note:
            st.caption(note)
download_csv(shown, f"{run.id}-layers")
