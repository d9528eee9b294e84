"""Overview: the recommendation, the ranking table and the run's parameters."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.common import current_run, download_csv, load_frame, run_version, status_banner

st.title("Overview")
run = current_run()
if run is None:
    st.stop()
status_banner(run)
manifest = run.manifest
version = run_version(run)
corpus = manifest["corpus"]
st.markdown(
    f"**{manifest.get('name')}** · {corpus['n_texts']} texts · "
    f"labels: {corpus.get('label_column') or 'none'} · {len(manifest['models'])} models"
)
if run.has("verdict.json"):
    st.success(run.load_json("verdict.json")["text"])

summary = load_frame(run.id, version, "summary.parquet")
if summary is None:
    st.info("The ranking appears when the run has finished its analyses.")
else:
    st.subheader("Ranking")
    sort_by = (
        "flow_score" if "flow_score" in summary else ("gmm_score" if "gmm_score" in summary else "model")
    )
    table = summary.sort_values(sort_by, ascending=sort_by == "model")
    st.dataframe(table, hide_index=True)
    download_csv(table, f"{run.id}-ranking")

st.subheader("Models")
models = pd.DataFrame(manifest["models"])
st.dataframe(models, hide_index=True)
with st.expander("Parameters, versions and timings"):
    st.json(
        {
            "params": manifest.get("params"),
            "versions": manifest.get("versions"),
            "timings": manifest.get("timings"),
        }
    )
