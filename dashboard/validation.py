"""Validation: how far to trust the ranking — correlation tables and stability studies."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.common import (
    download_csv,
    escape,
    explain_missing,
    load_frame,
    open_analysis_page,
    run_version,
    show_verdict,
)
from dashboard.findings import show_finding
from dashboard.tables import show_table
from flare_core.answer.labels import load_labels
from flare_core.answer.shipped import shipped_results
from flare_core.answer.stored import load_verdict
from flare_core.benchmark.report import results_frame
from flare_core.view import figures
from flare_core.view.findings import MIN_CHECK_LABELS, few_labels_check, validation_finding
from flare_core.view.glossary import explain, label
from flare_core.view.results import ESTIMATOR_NAMES, estimator_label, headline_correlations, search_judged
from flare_core.view.verdict import labels_given_words

#: How a score combines its targets, in words.
AGGREGATION_WORDS = {"median": "median", "mean": "mean", "trim10": "trimmed mean (10%)"}

run = open_analysis_page("Validation")
version = run_version(run)
correlations = load_frame(run.id, version, "correlations.parquet")
studied = [e for e in ESTIMATOR_NAMES if run.has("validation", f"{e}_subsampling.parquet")]
verdict = load_verdict(run) or {}
few_check = few_labels_check(verdict)
if studied or correlations is not None or few_check:
    ranked_by = verdict.get("estimator")
    main = ranked_by if ranked_by in studied else (studied or list(ESTIMATOR_NAMES))[0]
    subsampling = (
        load_frame(run.id, version, "validation", f"{main}_subsampling.parquet") if studied else None
    )
    show_finding(validation_finding(subsampling, correlations, main, verdict))
st.caption(
    "Labels: "
    f"{escape(labels_given_words(run.manifest['corpus'], load_labels(run).entries, search_judged(run)))}."
)
show_verdict(run, checks_expanded=True, container_key=None)  # the page's own verdict box is above

shipped = shipped_results()
if shipped:
    with st.expander("How often this ranking matches labelled truth on public corpora"):
        means = shipped["summary"]["mean_spearman"]
        st.markdown(
            f"FLARE Studio was run with these defaults on {len(shipped['corpora'])} public corpora whose "
            "labels it never saw, and each ranking was compared with how well every model actually does on "
            f"those labels. The ranking agreed with the labels at ρ = {means['flow']:.2f} on average (1 is "
            "a perfect order, 0 is no better than chance); simply preferring the model with the widest "
            f"embedding agreed at ρ = {means['dim']:.2f}. Where the checks above fail, treat the ranking as "
            "a first sort."
        )
        show_table(results_frame(shipped))

st.subheader("Do the label-free scores agree with the labels?")
few = verdict.get("few_labels") or {}
if correlations is None and few_check and int(few.get("n_labels") or 0) >= MIN_CHECK_LABELS:
    st.markdown(escape(few_check))
    scores = {r["model"]: r.get("score") for r in verdict.get("ranking") or []}
    show_table(
        pd.DataFrame(
            [
                {
                    "model": r["model"],
                    "label-free score": scores.get(r["model"]),
                    f"estimated accuracy from {few['n_labels']} labels": f"{100 * r['estimate']:.0f}%",
                }
                for r in sorted(few.get("estimates") or [], key=lambda r: -(scores.get(r["model"]) or -1e9))
            ]
        )
    )
elif correlations is None:
    if few_check:
        st.caption(escape(few_check))
    st.info(
        "Correlation tables need labels (or STS pairs) in the corpus and at least three models: the oracle "
        "scores the embeddings with the labels, then every label-free score is compared with it."
    )
else:
    n_models = figures.correlation_models(correlations)
    if n_models < figures.MIN_CORRELATION_MODELS:
        st.warning(
            f"These correlations rest on only {n_models} models, and so are greyed out: with fewer than "
            f"{figures.MIN_CORRELATION_MODELS}, a correlation can take only a few values (with 3 models, "
            "only ±0.5 and ±1) and says almost nothing. Add candidates to read them."
        )
    else:
        st.caption(f"Each cell compares the order of the same {n_models} models under two scores.")
    statistic = st.radio(
        "Statistic", ["spearman_rho", "pearson_r", "kendall_tau"], horizontal=True, format_func=label
    )
    st.plotly_chart(figures.correlation_heatmap(headline_correlations(correlations), statistic), key="corr")
    with st.expander("All correlations, every score variant"):
        show_table(
            correlations.assign(**{c: correlations[c].map(label) for c in ("label_free", "downstream")})
        )
    download_csv(correlations, f"{run.id}-correlations")
    summary = load_frame(run.id, version, "summary.parquet")
    if summary is not None:
        numeric = [
            c for c in summary.select_dtypes("number").columns if not c.endswith(("_low", "_high", "_rank"))
        ]
        left, right = st.columns(2)
        x = left.selectbox(
            "Label-free score",
            numeric,
            index=numeric.index("flow_score") if "flow_score" in numeric else 0,
            format_func=label,
        )
        downstream = [
            c for c in ("accuracy", "f1", "v_measure", "cosine_spearman") if c in numeric
        ] or numeric
        y = right.selectbox("Score on the labels", downstream, format_func=label)
        st.plotly_chart(figures.score_scatter(summary, x, y), key="score-scatter")
        st.caption(f"{explain(x)} {explain(y)}")

st.subheader("Stability of the ranking")
estimators = studied
if not estimators and not run.has("validation", "shuffle.parquet"):
    explain_missing(
        run,
        ("validation",),
        "This run was made without the stability studies (they need the information-sufficiency results).",
    )
    st.stop()
if estimators:
    estimator = st.radio("Estimator", estimators, horizontal=True, key="val-est", format_func=estimator_label)
    columns = st.columns(2)
    sub = load_frame(run.id, version, "validation", f"{estimator}_subsampling.parquet")
    with columns[0]:
        st.plotly_chart(
            figures.study_curve(
                sub,
                "alpha",
                "rank_agreement",
                "Subsampling stability",
                "fraction of validation texts",
                "rank agreement",
            ),
            key="sub",
        )
        st.caption(explain("rank_agreement"))
        download_csv(sub, f"{run.id}-{estimator}-subsampling")
    pool = load_frame(run.id, version, "validation", f"{estimator}_pool_size.parquet")
    if pool is not None:
        with columns[1]:
            st.plotly_chart(
                figures.study_curve(
                    pool, "pool_size", "rank_agreement", "Pool size", "models in the pool", "rank agreement"
                ),
                key="pool",
            )
            download_csv(pool, f"{run.id}-{estimator}-pool-size")
    aggregation = load_frame(run.id, version, "validation", f"{estimator}_aggregation.parquet")
    if aggregation is not None:
        st.markdown("**Aggregation** (median is the default)")
        show_table(
            aggregation.assign(
                aggregation=aggregation["aggregation"].map(lambda a: AGGREGATION_WORDS.get(a, a))
            )
        )
shuffle = load_frame(run.id, version, "validation", "shuffle.parquet")
if shuffle is not None:
    st.plotly_chart(
        figures.study_curve(
            shuffle, "p", "mean_is_per_dim", "Shuffled pairing", "fraction of pairs shuffled", "mean IS/d"
        ),
        key="shuffle",
    )
    st.caption(
        "With the pairing of texts shuffled, the models share no information: IS must fall to about 0 "
        "at p = 1."
    )
    download_csv(shuffle, f"{run.id}-shuffle")
