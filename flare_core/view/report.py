"""A self-contained HTML report of one run: one file that opens offline in any browser.

plotly.js is inlined once in the page head; every figure is a ``<div>`` drawn by it. The content comes
from :func:`flare_core.view.results.run_results` and the run's artefacts: the recommendation, the ranking,
the information-sufficiency heatmaps and graphs, the mean-pooling collapse scatter, the layer-wise
concentration curves, baselines, downstream scores and correlations, and the parameters, versions,
timings and seeds that make the run reproducible. Sections a run did not compute say so.

Every corpus text and model name is HTML-escaped wherever it appears (tables, axis labels, hovers,
titles). ``include_texts=False`` leaves every corpus text out of the page.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES, estimator_label
from flare_core.checks import check_bool, check_int
from flare_core.errors import ReportError
from flare_core.store import atomic
from flare_core.store.runs import MANIFEST, Run, utc_now

MAX_TABLE_ROWS = 200
MOST_COLLAPSED = 10
HOVER_TEXT_CHARS = 160
TABLE_TEXT_CHARS = 300
_SCATTER_SVG_LIMIT = 5000
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1.5rem 2rem 4rem; color: #1f2933; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #d9dee3; padding-bottom: 0.25rem; margin-top: 2.4rem; }
h3 { margin-top: 1.6rem; }
.meta { color: #52606d; margin-top: 0; }
.status { display: inline-block; padding: 0.1rem 0.55rem; border-radius: 0.8rem; font-weight: 600; font-size: 0.9rem; }
.status-done { background: #e3f9e5; color: #1f7a37; } .status-failed { background: #ffe3e3; color: #a61b1b; }
.status-running, .status-queued { background: #e6f0ff; color: #1c4fa0; } .status-cancelled { background: #fff3c4; color: #8d6708; }
.recommendation { background: #f0f7ff; border-left: 4px solid #2f6fde; padding: 0.8rem 1rem; font-size: 1.05rem; }
.missing { color: #7b8794; font-style: italic; }
.error { background: #fff0f0; border-left: 4px solid #d64545; padding: 0.6rem 1rem; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.86rem; }
th, td { border: 1px solid #d9dee3; padding: 0.22rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f5f7fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; } nav ul { columns: 2; } .note { color: #52606d; font-size: 0.9rem; }
"""


# -- small HTML helpers ---------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and math.isnan(float(value)))


def _cell(value: Any) -> tuple[str, bool]:
    """Escaped cell text and whether it is a number."""
    if _is_missing(value):
        return "", False
    if isinstance(value, bool | np.bool_):
        return ("yes" if value else "no"), False
    if isinstance(value, int | np.integer):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value)), True
    if isinstance(value, float | np.floating):
        return f"{float(value):.4g}", True
    if isinstance(value, dict | list | tuple | np.ndarray):
        return _e(atomic.to_json(value, indent=None)), False
    return _e(value), False


def _table(frame: pd.DataFrame, max_rows: int = MAX_TABLE_ROWS) -> str:
    """An HTML table of ``frame`` (headers and cells escaped, floats to 4 significant digits)."""
    if frame is None or frame.empty:
        return '<p class="missing">(empty table)</p>'
    shown = frame.head(max_rows)
    head = "".join(f"<th>{_e(c)}</th>" for c in shown.columns)
    rows = []
    for record in shown.itertuples(index=False, name=None):
        cells = []
        for value in record:
            text, numeric = _cell(value)
            cells.append(f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = f'<p class="note">Showing {max_rows} of {len(frame):,} rows.</p>' if len(frame) > max_rows else ""
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>{more}'


def _kv_table(mapping: Mapping[str, Any]) -> str:
    if not mapping:
        return '<p class="missing">(none recorded)</p>'
    frame = pd.DataFrame({"name": list(mapping.keys()), "value": list(mapping.values())})
    frame["value"] = frame["value"].astype(object)
    return _table(frame, max_rows=10_000)


def _missing(what: str) -> str:
    return f'<p class="missing">{_e(what)}: not computed in this run.</p>'


def _frame(records: Any) -> pd.DataFrame:
    """Records (possibly with nested objects, e.g. collapse statistics) as a flat DataFrame."""
    if not records:
        return pd.DataFrame()
    return pd.json_normalize(records, sep=".")


def _figure(fig: Any, div_id: str) -> str:
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )


def _layout(fig: Any, title: str, height: int = 480) -> Any:
    fig.update_layout(
        title={"text": title},
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 30, "t": 60, "b": 60},
    )
    return fig


def _truncate(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- text scrubbing -------------------------------------------------------------------------------------------


class _Texts:
    """The run's corpus texts, and the means to keep them out of a report that must not show them."""

    def __init__(self, texts: Sequence[str], include: bool) -> None:
        self.texts = [str(t) for t in texts]
        self.include = include and any(self.texts)
        self._exact = {t for t in self.texts if t}
        self._haystack = "\x00".join(self.texts)

    def get(self, row: int, limit: int) -> str | None:
        if not self.include or not 0 <= row < len(self.texts):
            return None
        return _truncate(self.texts[row], limit)

    def _is_text(self, value: str) -> bool:
        if value in self._exact:
            return True
        cleaned = value.rstrip("…").strip()
        return len(cleaned) >= 24 and cleaned in self._haystack

    def scrub(self, obj: Any) -> Any:
        """``obj`` with any string that is (part of) a corpus text replaced, unless texts are included."""
        if self.include or not self._exact:
            return obj
        if isinstance(obj, str):
            return "[corpus text removed]" if self._is_text(obj) else obj
        if isinstance(obj, dict):
            return {k: self.scrub(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.scrub(v) for v in obj]
        return obj


# -- sections -------------------------------------------------------------------------------------------------


def _header(run: Run, results: dict[str, Any], texts: _Texts) -> str:
    manifest = results["manifest"]
    status = str(results.get("status", manifest.get("status", "")))
    corpus = manifest.get("corpus") or {}
    name = manifest.get("name") or run.id
    labels = corpus.get("label_column") if corpus.get("has_labels") else None
    facts = {
        "run id": run.id,
        "created": manifest.get("created", ""),
        "finished": manifest.get("finished", ""),
        "corpus": corpus.get("source_name", ""),
        "texts": corpus.get("n_texts"),
        "labels": labels or "none",
        "models": ", ".join(str(m.get("id")) for m in manifest.get("models", [])),
    }
    if manifest.get("imported"):
        facts["imported from run"] = manifest["imported"].get("from_id", "")
    parts = [
        f"<h1>FLARE Studio report: {_e(name)}</h1>",
        f'<p class="meta">run <code>{_e(run.id)}</code> · {_e(str(manifest.get("created", ""))[:19])} · '
        f'<span class="status status-{_e(status)}">{_e(status)}</span></p>',
        _kv_table({k: v for k, v in facts.items() if not _is_missing(v) and v != ""}),
    ]
    if status == "failed":
        error = manifest.get("error") or "its worker stopped unexpectedly"
        parts.append(f'<div class="error">This run failed: {_e(texts.scrub(str(error)))}</div>')
    elif status in ("queued", "running"):
        parts.append('<p class="note">This run was not finished when the report was made.</p>')
    if manifest.get("texts_stripped"):
        parts.append('<p class="note">The texts of this run were removed before it was shared.</p>')
    elif not texts.include:
        parts.append('<p class="note">This report leaves out the corpus texts.</p>')
    return "\n".join(parts)


def _best(scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ranked = [s for s in scores if not _is_missing(s.get("score"))]
    return sorted(ranked, key=lambda s: -float(s["score"]))


def _recommendation(results: dict[str, Any], texts: _Texts) -> str:
    verdict = results.get("verdict")
    if isinstance(verdict, dict) and verdict.get("text"):
        return f'<p class="recommendation">{_e(texts.scrub(str(verdict["text"])))}</p>'
    for estimator in ESTIMATOR_NAMES:
        block = results.get("sufficiency", {}).get(estimator)
        ranked = _best(block.get("scores", [])) if block else []
        if not ranked:
            continue
        top = ranked[0]
        sentence = (
            f"Recommended model: <strong>{_e(top['model'])}</strong>. It has the highest information-sufficiency "
            f"score with {_e(estimator_label(estimator))}: median IS/d<sub>target</sub> = {float(top['score']):.4g}"
        )
        low, high = top.get("ci_low"), top.get("ci_high")
        if not _is_missing(low) and not _is_missing(high):
            sentence += f" (95% bootstrap interval {float(low):.4g} to {float(high):.4g})"
        sentence += "."
        if len(ranked) > 1:
            second = ranked[1]
            s_high = second.get("ci_high")
            if not _is_missing(low) and not _is_missing(s_high) and float(s_high) >= float(low):
                sentence += (
                    f" Its interval overlaps that of <strong>{_e(second['model'])}</strong> "
                    f"({float(second['score']):.4g}): the order of these two is uncertain."
                )
            else:
                sentence += f" Runner-up: {_e(second['model'])} ({float(second['score']):.4g})."
        return f'<p class="recommendation">{sentence}</p>'
    return _missing("A recommendation (information sufficiency)")


def _ranking(results: dict[str, Any]) -> str:
    parts = []
    summary = _frame(results.get("summary"))
    if summary.empty:
        parts.append(_missing("The per-model summary"))
    else:
        for column in ("flow_rank", "gmm_rank"):
            if column in summary.columns:
                summary = summary.sort_values(column, na_position="last", kind="mergesort")
                break
        parts.append(_table(summary))
    for estimator in ESTIMATOR_NAMES:
        block = results.get("sufficiency", {}).get(estimator)
        if block and block.get("scores"):
            parts.append(f"<h3>Scores: {_e(estimator_label(estimator))}</h3>")
            parts.append(
                '<p class="note">Median over targets of IS(source → target) / d<sub>target</sub>, '
                "with a 95% bootstrap interval.</p>"
            )
            parts.append(_table(_frame(block["scores"])))
    models = results["manifest"].get("models", [])
    if models:
        parts.append("<h3>Models</h3>")
        columns = ["id", "role", "kind", "encoder_kind", "status", "dim", "seconds", "error"]
        frame = _frame(models)
        parts.append(_table(frame[[c for c in columns if c in frame.columns]]))
    return "\n".join(parts)


def _is_frames(block: dict[str, Any]) -> tuple[pd.DataFrame, pd.Series]:
    matrix = block["is_matrix"]
    per_dim = pd.DataFrame(
        np.array(matrix["per_dim"], dtype=np.float64).reshape(len(matrix["sources"]), len(matrix["targets"])),
        index=[str(s) for s in matrix["sources"]],
        columns=[str(t) for t in matrix["targets"]],
    )
    scores = pd.Series(
        {
            str(s["model"]): (np.nan if _is_missing(s.get("score")) else float(s["score"]))
            for s in block["scores"]
        },
        dtype=np.float64,
    )
    return per_dim, scores


def _heatmap(per_dim: pd.DataFrame, estimator: str) -> str:
    import plotly.graph_objects as go

    z = np.round(per_dim.to_numpy(dtype=np.float64), 4)
    small = z.size <= 400
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[_e(t) for t in per_dim.columns],
            y=[_e(s) for s in per_dim.index],
            colorscale="Viridis",
            colorbar={"title": {"text": "IS/d"}},
            texttemplate="%{z:.3f}" if small else None,
            hovertemplate="%{y} → %{x}<br>IS/d<sub>target</sub> = %{z:.4f}<extra></extra>",
        )
    )
    fig.update_xaxes(type="category", title_text="target")
    fig.update_yaxes(type="category", title_text="source", autorange="reversed")
    height = max(360, min(900, 120 + 34 * len(per_dim.index)))
    _layout(fig, f"IS(source → target) / d<sub>target</sub>: {_e(estimator_label(estimator))}", height)
    return _figure(fig, f"is-heatmap-{estimator}")


def _graph(per_dim: pd.DataFrame, scores: pd.Series, estimator: str, seed: int) -> str:
    import plotly.graph_objects as go

    from flare_core.analyses.graph import communities, graph_frames, graph_layout, is_graph

    graph = is_graph(per_dim, scores)
    groups = communities(graph, seed=seed)
    nodes, edges = graph_frames(graph, groups, graph_layout(graph, seed=seed))
    fig = go.Figure()
    w_max = float(edges["weight"].max()) if len(edges) and edges["weight"].max() > 0 else 1.0
    mids_x, mids_y, mids_text = [], [], []
    for edge in edges.itertuples(index=False):
        dx, dy = edge.x1 - edge.x0, edge.y1 - edge.y0
        length = math.hypot(dx, dy) or 1.0
        ox, oy = -dy / length * 0.012, dx / length * 0.012  # the two directions of a pair side by side
        xs, ys = [edge.x0 + ox, edge.x1 + ox], [edge.y0 + oy, edge.y1 + oy]
        fig.add_trace(
            go.Scatter(
                x=np.round(xs, 4),
                y=np.round(ys, 4),
                mode="lines",
                line={"width": 0.5 + 5.0 * edge.weight / w_max, "color": "rgba(90, 100, 120, 0.45)"},
                hoverinfo="skip",
                showlegend=False,
            )
        )
        mids_x.append(round(xs[0] + 0.6 * (xs[1] - xs[0]), 4))
        mids_y.append(round(ys[0] + 0.6 * (ys[1] - ys[0]), 4))
        mids_text.append(f"{_e(edge.source)} → {_e(edge.target)}<br>IS/d = {edge.weight:.4f}")
    if mids_x:
        fig.add_trace(
            go.Scatter(
                x=mids_x,
                y=mids_y,
                mode="markers",
                marker={"size": 5, "color": "rgba(90, 100, 120, 0.6)"},
                hovertext=mids_text,
                hoverinfo="text",
                name="edges (source → target)",
            )
        )
    finite = nodes["score"].dropna()
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    for community, members in nodes.groupby("community", sort=True):
        sizes = [
            14.0 if math.isnan(s) else 16.0 + 30.0 * ((s - lo) / (hi - lo) if hi > lo else 0.5)
            for s in members["score"]
        ]
        hover = [
            f"{_e(n)}<br>score {'' if math.isnan(s) else f'{s:.4f}'}<br>community {community}"
            for n, s in zip(members["name"], members["score"], strict=True)
        ]
        fig.add_trace(
            go.Scatter(
                x=members["x"].round(4),
                y=members["y"].round(4),
                mode="markers+text",
                marker={
                    "size": sizes,
                    "color": _PALETTE[int(community) % len(_PALETTE)],
                    "line": {"width": 1},
                },
                text=[_e(n) for n in members["name"]],
                textposition="top center",
                hovertext=hover,
                hoverinfo="text",
                name=f"community {community}",
            )
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, scaleanchor="x")
    _layout(fig, f"IS graph: {_e(estimator_label(estimator))} (size = score, colour = community)", 560)
    return _figure(fig, f"is-graph-{estimator}")


def _sufficiency(results: dict[str, Any], seed: int) -> str:
    blocks = results.get("sufficiency") or {}
    if not blocks:
        return _missing("Information sufficiency")
    parts = []
    for estimator in ESTIMATOR_NAMES:
        block = blocks.get(estimator)
        if not block:
            parts.append(f"<h3>{_e(estimator_label(estimator))}</h3>" + _missing(estimator_label(estimator)))
            continue
        per_dim, scores = _is_frames(block)
        parts.append(f"<h3>{_e(estimator_label(estimator))}</h3>")
        parts.append(_heatmap(per_dim, estimator))
        try:
            parts.append(_graph(per_dim, scores, estimator, seed))
        except ValueError as exc:
            parts.append(f'<p class="missing">The IS graph cannot be drawn: {_e(exc)}</p>')
    return "\n".join(parts)


def _collapse_models(run: Run, results: dict[str, Any]) -> list[str]:
    found = [str(r["model"]) for r in results.get("collapse") or [] if r.get("model") is not None]
    if found:
        return list(dict.fromkeys(found))
    kinds = ("transformer", "control-transformer")
    return [str(m["id"]) for m in results["manifest"].get("models", []) if m.get("encoder_kind") in kinds]


def _collapse_scatter(
    frame: pd.DataFrame, model: str, index: int, texts: _Texts, max_points: int, seed: int
) -> str:
    import plotly.graph_objects as go

    row_i = frame["row_i"] if "row_i" in frame.columns else frame["i"]
    row_j = frame["row_j"] if "row_j" in frame.columns else frame["j"]
    n = len(frame)
    keep = np.arange(n)
    if n > max_points:
        keep = np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))
    d_mu = frame["d_mu"].to_numpy(dtype=np.float64)
    d_sigma = frame["d_sigma"].to_numpy(dtype=np.float64)
    socm = frame["socm"].to_numpy(dtype=np.float64)
    rows = np.stack([row_i.to_numpy(dtype=np.int64), row_j.to_numpy(dtype=np.int64)], axis=1)
    scatter = go.Scattergl if len(keep) > _SCATTER_SVG_LIMIT else go.Scatter
    fig = go.Figure(
        scatter(
            x=d_mu[keep].astype(np.float32),
            y=d_sigma[keep].astype(np.float32),
            mode="markers",
            marker={
                "size": 4,
                "color": socm[keep].astype(np.float32),
                "colorscale": "Viridis",
                "colorbar": {"title": {"text": "SOCM"}},
                "opacity": 0.7,
            },
            customdata=rows[keep].astype(np.int32),
            hovertemplate=(
                "texts %{customdata[0]} and %{customdata[1]}<br>d<sub>μ</sub> = %{x:.4f}<br>"
                "d<sub>Σ</sub> = %{y:.4f}<br>SOCM = %{marker.color:.4f}<extra></extra>"
            ),
            name=f"pairs ({len(keep):,} of {n:,})",
        )
    )
    finite = np.isfinite(socm)
    if finite.any():
        lo = max(float(np.nanmin(d_mu)), 0.0)
        hi = min(float(np.nanmax(d_mu)), 0.995)
        grid = np.linspace(lo, hi, 60) if hi > lo else np.array([])
        for q in (0.5, 0.95):
            level = float(np.quantile(socm[finite], q))
            if level <= 0 or not grid.size:
                continue
            fig.add_trace(
                go.Scatter(
                    x=np.round(grid, 4),
                    y=np.round(level / (1.0 - grid), 5),
                    mode="lines",
                    line={"dash": "dash", "width": 1.2, "color": "#d64545" if q > 0.5 else "#7b8794"},
                    name=f"SOCM = {level:.4g} ({int(q * 100)}th percentile)",
                    hoverinfo="skip",
                )
            )
        top = np.argsort(-np.nan_to_num(socm, nan=-np.inf), kind="stable")[:MOST_COLLAPSED]
        hover = []
        for k in top:
            line = f"SOCM = {socm[k]:.4f}<br>texts {rows[k, 0]} and {rows[k, 1]}"
            a, b = texts.get(int(rows[k, 0]), 80), texts.get(int(rows[k, 1]), 80)
            if a is not None and b is not None:
                line += f"<br>{_e(a)}<br>{_e(b)}"
            hover.append(line)
        fig.add_trace(
            go.Scatter(
                x=np.round(d_mu[top], 5),
                y=np.round(d_sigma[top], 5),
                mode="markers",
                marker={"size": 9, "color": "rgba(0,0,0,0)", "line": {"width": 2, "color": "#d64545"}},
                hovertext=hover,
                hoverinfo="text",
                name=f"{len(top)} most collapsed pairs",
            )
        )
    fig.update_xaxes(title_text="d<sub>μ</sub> (difference of the mean-pooled embeddings)")
    fig.update_yaxes(title_text="d<sub>Σ</sub> (difference of the token distributions)")
    _layout(fig, f"Mean-pooling collapse: {_e(model)}", 560)
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0})
    return _figure(fig, f"collapse-scatter-{index}")


def _most_collapsed_table(frame: pd.DataFrame, texts: _Texts) -> str:
    ranked = frame.sort_values("socm", ascending=False, kind="mergesort").head(MOST_COLLAPSED)
    row_i = ranked["row_i"] if "row_i" in ranked.columns else ranked["i"]
    row_j = ranked["row_j"] if "row_j" in ranked.columns else ranked["j"]
    table = pd.DataFrame(
        {
            "text A (row)": row_i.to_numpy(),
            "text B (row)": row_j.to_numpy(),
            "d_mu": ranked["d_mu"].to_numpy(),
            "d_sigma": ranked["d_sigma"].to_numpy(),
            "socm": ranked["socm"].to_numpy(),
        }
    )
    if texts.include:
        table["text A"] = [texts.get(int(r), TABLE_TEXT_CHARS) for r in table["text A (row)"]]
        table["text B"] = [texts.get(int(r), TABLE_TEXT_CHARS) for r in table["text B (row)"]]
    return _table(table)


def _collapse(run: Run, results: dict[str, Any], texts: _Texts, max_points: int, seed: int) -> str:
    from flare_core.view.results import collapse_pairs

    models = _collapse_models(run, results)
    summary = _frame(results.get("collapse"))
    if not models and summary.empty:
        return _missing("Mean-pooling collapse (SOCM; it needs a transformer model)")
    parts = [
        '<p class="note">Each point is a pair of texts: d<sub>μ</sub> measures how far apart their mean-pooled '
        "embeddings are, d<sub>Σ</sub> how different their token distributions are. Pairs high on d<sub>Σ</sub> "
        "and low on d<sub>μ</sub> are collapsed by mean pooling (high SOCM); dashed lines are iso-SOCM curves.</p>"
    ]
    if not summary.empty:
        parts.append(_table(summary))
    for index, model in enumerate(models):
        frame = collapse_pairs(run, model)
        parts.append(f"<h3>{_e(model)}</h3>")
        needed = {"d_mu", "d_sigma", "socm", "i", "j"}
        if frame is None or frame.empty or not needed <= set(frame.columns):
            parts.append(_missing(f"Per-pair collapse figures of {model}"))
            continue
        parts.append(_collapse_scatter(frame, model, index, texts, max_points, seed))
        parts.append("<p>Most collapsed pairs:</p>")
        parts.append(_most_collapsed_table(frame, texts))
    return "\n".join(parts)


def _concentration(results: dict[str, Any]) -> str:
    import plotly.graph_objects as go

    frame = _frame(results.get("concentration"))
    if frame.empty:
        return _missing("Layer-wise token concentration (it needs a transformer model)")
    if "layer" not in frame.columns or "model" not in frame.columns:
        return f'<p class="missing">The concentration table has no model/layer columns ({_e(list(frame.columns))}).</p>'
    metrics = [
        c
        for c in frame.columns
        if c not in ("model", "layer") and pd.api.types.is_numeric_dtype(frame[c]) and frame[c].notna().any()
    ]
    if not metrics:
        return _missing("Numeric layer-wise metrics")
    parts = []
    for index, metric in enumerate(metrics):
        fig = go.Figure()
        for model, rows in frame.groupby("model", sort=False):
            rows = rows.sort_values("layer")
            fig.add_trace(
                go.Scatter(
                    x=rows["layer"].to_numpy(),
                    y=np.round(rows[metric].to_numpy(dtype=np.float64), 5),
                    mode="lines+markers",
                    name=_e(model),
                )
            )
        fig.update_xaxes(title_text="layer")
        fig.update_yaxes(title_text=_e(metric))
        _layout(fig, f"{_e(metric)} by layer", 380)
        parts.append(_figure(fig, f"concentration-{index}"))
    return "\n".join(parts)


def _baselines(results: dict[str, Any]) -> str:
    parts = ["<h3>Label-free baselines</h3>"]
    geometry = _frame(results.get("geometry"))
    parts.append(_table(geometry) if not geometry.empty else _missing("Label-free baselines"))
    parts.append("<h3>Downstream (supervised oracle)</h3>")
    downstream = _frame(results.get("downstream"))
    parts.append(
        _table(downstream)
        if not downstream.empty
        else _missing("Downstream scores (they need labels or pairs)")
    )
    return "\n".join(parts)


def _correlations(results: dict[str, Any]) -> str:
    frame = _frame(results.get("correlations"))
    if frame.empty:
        return _missing("Correlations of label-free scores with downstream scores (they need labels)")
    parts = []
    if {"label_free", "downstream", "spearman_rho"} <= set(frame.columns):
        pivot = frame.pivot_table(
            index="label_free", columns="downstream", values="spearman_rho", aggfunc="first"
        )
        parts.append("<h3>Spearman ρ (rows: label-free score, columns: downstream score)</h3>")
        parts.append(_table(pivot.reset_index()))
    parts.append("<h3>All correlations</h3>")
    parts.append(_table(frame))
    return "\n".join(parts)


def _parameters(results: dict[str, Any], texts: _Texts) -> str:
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
        parts.append(_kv_table(value) if isinstance(value, dict) and value else _missing(title))
    corpus = manifest.get("corpus") or {}
    parts.append("<h3>Corpus</h3>")
    parts.append(_kv_table({k: v for k, v in corpus.items() if k != "stats"}))
    if isinstance(corpus.get("stats"), dict) and corpus["stats"]:
        parts.append(_kv_table(corpus["stats"]))
    validation = results.get("validation")
    if validation:
        parts.append("<h3>Validation</h3>")
        body = texts.scrub(validation)
        parts.append(_kv_table(body) if isinstance(body, dict) else f"<pre>{_e(atomic.to_json(body))}</pre>")
    return "\n".join(parts)


# -- public API -----------------------------------------------------------------------------------------------


def _sections(
    run: Run, results: dict[str, Any], texts: _Texts, max_points: int
) -> Iterable[tuple[str, str, str]]:
    params = results["manifest"].get("params") or {}
    seed = params.get("seed", 0)
    seed = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else 0
    yield "recommendation", "Recommendation", _recommendation(results, texts)
    yield "ranking", "Ranking", _ranking(results)
    yield "sufficiency", "Information sufficiency", _sufficiency(results, seed)
    yield "collapse", "Mean-pooling collapse (SOCM)", _collapse(run, results, texts, max_points, seed)
    yield "concentration", "Layer-wise concentration", _concentration(results)
    yield "baselines", "Baselines and downstream scores", _baselines(results)
    yield "correlations", "Correlations", _correlations(results)
    yield "parameters", "Parameters, versions, timings and seeds", _parameters(results, texts)


def build_report(run: Run, *, include_texts: bool = True, max_scatter_points: int = 20_000) -> str:
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

    from flare_core.view.results import run_results

    results = run_results(run)
    corpus_texts: list[str] = []
    if run.has("corpus.parquet"):
        corpus = run.corpus_frame()
        if "text" in corpus.columns:
            corpus_texts = corpus["text"].fillna("").astype(str).tolist()
    texts = _Texts(corpus_texts, include_texts)

    name = results["manifest"].get("name") or run.id
    sections = list(_sections(run, results, texts, max_scatter_points))
    nav = "".join(f'<li><a href="#{sid}">{_e(title)}</a></li>' for sid, title, _ in sections)
    body = "\n".join(
        f'<section id="{sid}">\n<h2>{_e(title)}</h2>\n{content}\n</section>'
        for sid, title, content in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>FLARE Studio report: {_e(name)}</title>\n"
        f"<style>{_CSS}</style>\n"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>\n'
        "</head>\n<body>\n"
        f"<header>{_header(run, results, texts)}</header>\n"
        f"<nav><ul>{nav}</ul></nav>\n"
        f"{body}\n"
        f'<footer><p class="note">FLARE Studio report of run {_e(run.id)}, made {_e(_now())}.</p></footer>\n'
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
