"""A self-contained HTML report of one run: one file that opens offline in any browser.

plotly.js is inlined once in the page head; every figure is a ``<div>`` drawn by it, with the same
functions and choices as the dashboard pages (:mod:`flare_core.view.figures`). The content comes from
:func:`flare_core.view.results.run_results` and the run's artefacts: the recommendation, the ranking,
the information-sufficiency rankings, heatmaps and graphs, the SOCM distributions and scatters, the
layer-wise concentration curves, baselines, downstream scores and correlations, and the parameters,
versions, timings and seeds that make the run reproducible. Sections a run did not compute say so.

Every corpus text and model name is HTML-escaped wherever it appears (tables, axis labels, hovers,
titles). ``include_texts=False`` leaves every corpus text out of the page.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES, estimator_label
from flare_core.answer.stored import has_trust
from flare_core.checks import check_bool, check_int
from flare_core.errors import ReportError
from flare_core.store import atomic
from flare_core.store.manifest import transformer_models
from flare_core.store.runs import MANIFEST, Run, utc_now
from flare_core.view import answer_figures, figures
from flare_core.view import results as run_results
from flare_core.view.findings import floor_sentence
from flare_core.view.html import (
    CSS,
    CorpusTexts,
    escape,
    figure_div,
    is_missing,
    kv_table,
    missing,
    records_frame,
    table,
)
from flare_core.view.verdict import (
    chances_in_words,
    grounds_heading,
    labels_given_words,
    labels_table,
    trust_sentence,
    verdict_view,
)

MOST_COLLAPSED = 10
TABLE_TEXT_CHARS = 300


def _header(run: Run, results: dict[str, Any], texts: CorpusTexts) -> str:
    manifest = results["manifest"]
    status = str(results.get("status", manifest.get("status", "")))
    corpus = manifest.get("corpus") or {}
    name = manifest.get("name") or run.id
    given = (results.get("labels_given") or {}).get("entries") or []
    facts = {
        "run id": run.id,
        "created": manifest.get("created", ""),
        "finished": manifest.get("finished", ""),
        "corpus": corpus.get("source_name", ""),
        "texts": corpus.get("n_texts"),
        "labels": labels_given_words(corpus, given, results.get("search_judged")),
        "models": ", ".join(str(m.get("id")) for m in manifest.get("models", [])),
    }
    if manifest.get("imported"):
        facts["imported from run"] = manifest["imported"].get("from_id", "")
    parts = [
        f"<h1>FLARE Studio report: {escape(name)}</h1>",
        f'<p class="meta">run <code>{escape(run.id)}</code> · '
        f'{escape(str(manifest.get("created", ""))[:19])} · <span class="status '
        f'status-{escape(status)}">{escape(status)}</span></p>',
        kv_table({k: v for k, v in facts.items() if not is_missing(v) and v != ""}),
    ]
    if status == "failed":
        error = manifest.get("error") or "its worker stopped unexpectedly"
        parts.append(f'<div class="error">This run failed: {escape(texts.scrub(str(error)))}</div>')
    elif status in ("queued", "running"):
        parts.append('<p class="note">This run was not finished when the report was made.</p>')
    if manifest.get("texts_stripped"):
        parts.append('<p class="note">The texts of this run were removed before it was shared.</p>')
    elif not texts.include:
        parts.append('<p class="note">This report leaves out the corpus texts.</p>')
    return "\n".join(parts)


def _best(scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ranked = [s for s in scores if not is_missing(s.get("score"))]
    return sorted(ranked, key=lambda s: -float(s["score"]))


def _recommendation(results: dict[str, Any], texts: CorpusTexts) -> str:
    verdict = results.get("verdict")
    if isinstance(verdict, dict) and has_trust(verdict):
        view = verdict_view(verdict)
        parts = [f'<p class="note">{escape(view.basis_words)}</p>'] if view.basis_words else []
        parts += [
            f'<p class="recommendation {view.tone}"><strong>{escape(texts.scrub(view.headline))}</strong> '
            f"{escape(texts.scrub(view.summary))}</p>",
        ]
        for sentence in (view.next_step, view.cost_sentence):
            if sentence:
                parts.append(f"<p>{escape(texts.scrub(sentence))}</p>")
        if view.details:
            parts.append(
                f"<details><summary>Details</summary><p>{escape(texts.scrub(view.details))}</p></details>"
            )
        said = labels_table(verdict)
        if not said.empty:
            parts += [f"<h3>{escape(grounds_heading(verdict))}</h3>", table(chances_in_words(said))]
        parts += _labels_given(results)
        if view.map_sentence:
            parts += [
                "<h3>The label-free ranking (the map)</h3>",
                f"<p>{escape(texts.scrub(view.map_sentence))}</p>",
            ]
        if view.level:
            parts.append(f"<p>{escape(trust_sentence(view.level))}</p>")
        parts += [f'<p class="note">{escape(texts.scrub(line))}</p>' for line in view.controls]
        if not view.checks.empty:
            parts.append(table(view.checks))
        return "\n".join(parts)
    if isinstance(verdict, dict) and verdict.get("text"):
        return f'<p class="recommendation">{escape(texts.scrub(str(verdict["text"])))}</p>'
    for estimator in ESTIMATOR_NAMES:
        block = results.get("sufficiency", {}).get(estimator)
        ranked = _best(block.get("scores", [])) if block else []
        if not ranked:
            continue
        top = ranked[0]
        sentence = (
            f"Recommended model: <strong>{escape(top['model'])}</strong>. It has the highest "
            f"information-sufficiency score with {escape(estimator_label(estimator))}: median "
            f"IS/d<sub>target</sub> = {float(top['score']):.4g}"
        )
        low, high = top.get("ci_low"), top.get("ci_high")
        if not is_missing(low) and not is_missing(high):
            sentence += f" (95% bootstrap interval {float(low):.4g} to {float(high):.4g})"
        sentence += "."
        if len(ranked) > 1:
            second = ranked[1]
            s_high = second.get("ci_high")
            if not is_missing(low) and not is_missing(s_high) and float(s_high) >= float(low):
                sentence += (
                    f" Its interval overlaps that of <strong>{escape(second['model'])}</strong> "
                    f"({float(second['score']):.4g}): the order of these two is uncertain."
                )
            else:
                sentence += f" Runner-up: {escape(second['model'])} ({float(second['score']):.4g})."
        return f'<p class="recommendation">{sentence}</p>'
    return missing("A recommendation (information sufficiency)")


def _labels_given(results: dict[str, Any]) -> list[str]:
    """The labels a person gave the run, as counts per category and batches, and the search judgements, as
    counts (never the texts)."""
    searched = run_results.search_judged_words(results.get("search_judged"))
    judged = [f"<p>Search judgements given to this run: {escape(searched)}.</p>"] if searched else []
    given = results.get("labels_given") or {}
    entries = given.get("entries") or []
    if not entries:
        return judged
    latest = {int(e["row"]): str(e["label"]) for e in entries}
    counts = pd.Series(list(latest.values())).value_counts()
    batches = max(int(e.get("batch", 0)) for e in entries)
    corrected = sum("was" in e for e in entries)
    skipped = len({int(s["row"]) for s in given.get("skipped") or []} - set(latest))
    frame = pd.DataFrame({"category": counts.index.astype(str), "texts labelled": counts.to_numpy()})
    fixed = f", {corrected} label(s) corrected since" if corrected else ""
    return [
        f"<p>Labels given to this run: {len(latest)} texts in {batches} batch(es){fixed}, {skipped} marked "
        "skip / unsure.</p>",
        table(frame),
        *judged,
    ]


def _ranking(results: dict[str, Any]) -> str:
    parts = []
    summary = records_frame(results.get("summary"))
    if summary.empty:
        parts.append(missing("The per-model summary"))
    else:
        for column in ("flow_rank", "gmm_rank"):
            if column in summary.columns:
                summary = summary.sort_values(column, na_position="last", kind="mergesort")
                break
        parts.append(table(summary))
    for estimator in ESTIMATOR_NAMES:
        block = results.get("sufficiency", {}).get(estimator)
        if block and block.get("scores"):
            parts.append(f"<h3>Scores: {escape(estimator_label(estimator))}</h3>")
            parts.append(
                '<p class="note">Median over targets of IS(source → target) / d<sub>target</sub>, '
                "with a 95% bootstrap interval.</p>"
            )
            parts.append(table(records_frame(block["scores"])))
    models = results["manifest"].get("models", [])
    if models:
        parts.append("<h3>Models</h3>")
        columns = ["id", "role", "kind", "encoder_kind", "status", "dim", "seconds", "error"]
        frame = records_frame(models)
        parts.append(table(frame[[c for c in columns if c in frame.columns]]))
    return "\n".join(parts)


def _quality_cost(run: Run) -> str:
    """Quality against speed and against storage, drawn as on the Overview, with the cheapest model that
    is good enough and the costs the run measured."""
    from flare_core.view.tradeoff import cheapest_sentence, cost_table, tradeoff_view

    view = tradeoff_view(run)
    if view is None:
        return missing("Quality against cost (it needs the models' scores and measured costs)")
    parts = []
    for cost, div in (("texts_per_s", "quality-cost-speed"), ("bytes_per_vector", "quality-cost-storage")):
        parts.append(
            figure_div(
                answer_figures.quality_cost(
                    view["quality"], view["costs"], cost, best=view.get("best"), mark=view["suggest"]
                ),
                div,
            )
        )
        sentence = cheapest_sentence(view, cost)
        if sentence:
            parts.append(f"<p>{escape(sentence)}</p>")
    parts.append("<h3>Costs measured in this run</h3>")
    parts.append(table(cost_table(view["costs"])))
    return "\n".join(parts)


def _sufficiency(run: Run, results: dict[str, Any]) -> str:
    """Per estimator: the ranking, the IS heatmap and the IS graph, drawn as on the sufficiency page."""
    if not results.get("sufficiency"):
        return missing("Information sufficiency")
    parts = []
    for estimator in ESTIMATOR_NAMES:
        label = estimator_label(estimator)
        parts.append(f"<h3>{escape(label)}</h3>")
        frames = run_results.sufficiency_frames(run, estimator)
        if frames is None:
            parts.append(missing(label))
            continue
        parts.append(
            figure_div(figures.sufficiency_ranking(frames["scores"], estimator), f"is-ranking-{estimator}")
        )
        try:
            view = run_results.is_graph_view(frames["is_per_dim"], frames["scores"])
        except ValueError as exc:
            parts.append(figure_div(figures.is_heatmap(frames["is_per_dim"]), f"is-heatmap-{estimator}"))
            parts.append(f'<p class="missing">The IS graph cannot be drawn: {escape(exc)}</p>')
            continue
        parts.append(figure_div(figures.is_heatmap(view.per_dim), f"is-heatmap-{estimator}"))
        parts.append(figure_div(figures.is_graph_figure(view.nodes, view.edges), f"is-graph-{estimator}"))
        held = floor_sentence(frames["pairs"])
        if held:
            parts.append(f"<p>{escape(held)}</p>")
    return "\n".join(parts)


def _collapse_models(run: Run, results: dict[str, Any]) -> list[str]:
    found = [str(r["model"]) for r in results.get("collapse") or [] if r.get("model") is not None]
    return list(dict.fromkeys(found)) if found else transformer_models(run)


def _collapse(run: Run, results: dict[str, Any], texts: CorpusTexts, max_points: int) -> str:
    """The SOCM distributions, then per model its d_μ/d_Σ scatter and most collapsed pairs, as on the
    collapse page."""
    models = _collapse_models(run, results)
    summary = records_frame(results.get("collapse"))
    if not models and summary.empty:
        return missing("Mean-pooling collapse (SOCM; it needs a transformer model)")
    parts = [
        '<p class="note">Each point is a pair of texts: d<sub>μ</sub> measures how far apart their '
        "mean-pooled embeddings are, d<sub>Σ</sub> how different their token distributions are. Pairs high "
        "on d<sub>Σ</sub> and low on d<sub>μ</sub> are collapsed by mean pooling (high SOCM); dotted lines "
        "are iso-SOCM curves.</p>"
    ]
    if not summary.empty:
        parts.append(table(summary))
    needed = {"d_mu", "d_sigma", "socm", "i", "j"}
    frames = {m: run_results.collapse_pairs(run, m) for m in models}
    usable = {m: f for m, f in frames.items() if f is not None and not f.empty and needed <= set(f.columns)}
    if usable:
        socm = {m: f["socm"].to_numpy() for m, f in usable.items()}
        parts.append(figure_div(figures.socm_distributions(socm), "socm-distribution"))
    corpus = texts.texts if texts.include else None
    for index, model in enumerate(models):
        parts.append(f"<h3>{escape(model)}</h3>")
        if model not in usable:
            parts.append(missing(f"Per-pair collapse figures of {model}"))
            continue
        scatter = figures.collapse_scatter(usable[model], model, max_points=max_points, texts=corpus)
        parts.append(figure_div(scatter, f"collapse-scatter-{index}"))
        parts.append("<p>Most collapsed pairs:</p>")
        parts.append(
            table(run_results.most_collapsed_pairs(usable[model], corpus, MOST_COLLAPSED, TABLE_TEXT_CHARS))
        )
    return "\n".join(parts)


def _concentration(run: Run) -> str:
    """One curve chart per layer-wise metric, as on the layers page."""
    if not run.has("concentration.parquet"):
        return missing("Layer-wise token concentration (it needs a transformer model)")
    frame, metrics = run_results.layer_metrics(run.load_frame("concentration.parquet"))
    if not {"layer", "model"} <= set(frame.columns):
        return (
            '<p class="missing">The concentration table has no model/layer columns '
            f"({escape(list(frame.columns))}).</p>"
        )
    if not metrics:
        return missing("Numeric layer-wise metrics")
    return "\n".join(
        figure_div(figures.layer_curves(frame, metric), f"concentration-{index}")
        for index, metric in enumerate(metrics)
    )


def _baselines(results: dict[str, Any]) -> str:
    parts = ["<h3>Label-free baselines</h3>"]
    geometry = records_frame(results.get("geometry"))
    parts.append(table(geometry) if not geometry.empty else missing("Label-free baselines"))
    parts.append("<h3>How the models do on your labels</h3>")
    downstream = records_frame(results.get("downstream"))
    parts.append(
        table(downstream)
        if not downstream.empty
        else missing("Downstream scores (they need labels or pairs)")
    )
    return "\n".join(parts)


def _correlations(results: dict[str, Any]) -> str:
    frame = records_frame(results.get("correlations"))
    if frame.empty:
        return missing("Correlations of label-free scores with downstream scores (they need labels)")
    parts = []
    if {"label_free", "downstream", "spearman_rho"} <= set(frame.columns):
        pivot = frame.pivot_table(
            index="label_free", columns="downstream", values="spearman_rho", aggfunc="first"
        )
        n_models = figures.correlation_models(frame)
        parts.append("<h3>Do the label-free scores agree with the labels? (Spearman rank correlation)</h3>")
        if n_models < figures.MIN_CORRELATION_MODELS:
            parts.append(
                f'<p class="missing">These correlations rest on only {n_models} models, and so are '
                "greyed out: "
                f"with fewer than {figures.MIN_CORRELATION_MODELS}, a correlation can take only a few values "
                "and says almost nothing.</p>"
            )
        headline = run_results.headline_correlations(frame)
        parts.append(
            figure_div(figures.correlation_heatmap(headline, "spearman_rho"), "correlations-heatmap")
        )
        parts.append(table(pivot.reset_index()))
    parts.append("<h3>All correlations</h3>")
    parts.append(table(frame))
    return "\n".join(parts)


def _parameters(results: dict[str, Any], texts: CorpusTexts) -> str:
    manifest = texts.scrub(results["manifest"])
    parts = []
    for key, title in (
        ("params", "Parameters"),
        ("seeds", "Seeds"),
        ("versions", "Versions"),
        ("timings", "Timings (seconds)"),
    ):
        parts.append(f"<h3>{title}</h3>")
        value = manifest.get(key)
        parts.append(kv_table(value) if isinstance(value, dict) and value else missing(title))
    corpus = manifest.get("corpus") or {}
    parts.append("<h3>Corpus</h3>")
    parts.append(kv_table({k: v for k, v in corpus.items() if k != "stats"}))
    if isinstance(corpus.get("stats"), dict) and corpus["stats"]:
        parts.append(kv_table(corpus["stats"]))
    validation = results.get("validation")
    if validation:
        parts.append("<h3>Validation</h3>")
        body = texts.scrub(validation)
        parts.append(kv_table(body if isinstance(body, dict) else {"validation": body}))
    return "\n".join(parts)


def _sections(
    run: Run, results: dict[str, Any], texts: CorpusTexts, max_points: int
) -> Iterable[tuple[str, str, str]]:
    yield "recommendation", "Recommendation", _recommendation(results, texts)
    empty = run_results.empty_vectors(run)  # said where the models' results are, as on the Overview
    said = "".join(f"<p>{escape(run_results.empty_vector_sentence(m, n))}</p>" for m, n in empty.items())
    yield "ranking", "Ranking", said + _ranking(results)
    yield "quality-cost", "Quality against cost", _quality_cost(run)
    yield "sufficiency", "Information sufficiency", _sufficiency(run, results)
    yield "collapse", "Mean-pooling collapse (SOCM)", _collapse(run, results, texts, max_points)
    yield "concentration", "Layer-wise concentration", _concentration(run)
    yield "baselines", "Baselines and downstream scores", _baselines(results)
    yield "correlations", "Correlations", _correlations(results)
    yield "parameters", "Parameters, versions, timings and seeds", _parameters(results, texts)


def build_report(
    run: Run, *, include_texts: bool = True, max_scatter_points: int = figures.DEFAULT_SCATTER_POINTS
) -> str:
    """The HTML text of a self-contained report of ``run`` (plotly.js inlined once; works offline).

    ``include_texts=False`` leaves every corpus text out (hovers, most-collapsed pairs, anything in the
    manifest or verdict that quotes a text). ``max_scatter_points`` caps the points drawn per collapse
    scatter (a seeded sample of the pairs).

    Raises ``ReportError`` (a ``ValueError``) for a non-run, a run without a manifest, or invalid options.
    """
    if not isinstance(run, Run):
        raise ReportError(f"build_report expects a Run from a RunStore; got {type(run).__name__}")
    if not (run.path / MANIFEST).is_file():
        raise ReportError(f"run {run.id!r} has no manifest at {run.path / MANIFEST}")
    check_bool(include_texts, "include_texts", error=ReportError)
    check_int(max_scatter_points, "max_scatter_points", min_value=1, error=ReportError)

    import plotly.offline

    results = run_results.run_results(run)
    corpus_texts: list[str] = []
    if run.has("corpus.parquet"):
        corpus = run.corpus_frame()
        if "text" in corpus.columns:
            corpus_texts = corpus["text"].fillna("").astype(str).tolist()
    texts = CorpusTexts(corpus_texts, include_texts)

    name = results["manifest"].get("name") or run.id
    sections = list(_sections(run, results, texts, max_scatter_points))
    nav = "".join(f'<li><a href="#{sid}">{escape(title)}</a></li>' for sid, title, _ in sections)
    body = "\n".join(
        f'<section id="{sid}">\n<h2>{escape(title)}</h2>\n{content}\n</section>'
        for sid, title, content in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>FLARE Studio report: {escape(name)}</title>\n"
        f"<style>{CSS}</style>\n"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>\n'
        "</head>\n<body>\n"
        f"<header>{_header(run, results, texts)}</header>\n"
        f"<nav><ul>{nav}</ul></nav>\n"
        f"{body}\n"
        f'<footer><p class="note">FLARE Studio report of run {escape(run.id)}, made {escape(_now())}.</p>'
        "</footer>\n"
        "</body>\n</html>\n"
    )


def _now() -> str:
    return utc_now()


def write_report(run: Run, out: str | os.PathLike, **kwargs: Any) -> Path:
    """Write :func:`build_report` of ``run`` to ``out`` atomically and return the path.

    ``out`` may be a folder, in which case the report is ``<out>/<run id>-report.html``. Keyword
    arguments go to :func:`build_report`.
    """
    if not isinstance(out, str | os.PathLike):
        raise ReportError(f"out must be a path; got {type(out).__name__}")
    path = Path(out)
    if path.is_dir():
        path = path / f"{run.id}-report.html" if isinstance(run, Run) else path
    text = build_report(run, **kwargs)
    try:
        return atomic.write_text(path, text)
    except OSError as exc:
        raise ReportError(f"cannot write the report to {path}: {exc}") from exc
