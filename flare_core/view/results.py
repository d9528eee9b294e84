"""Reading a stored run's results into plain structures and tables (for ``flare show --json``, the report
and the pages), and preparing what each chart shows."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.graph import ORDERS
from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES, estimator_label
from flare_core.answer.stored import load_verdict
from flare_core.store.runs import Run, RunStore, safe_name
from flare_core.view.tables import date_words, number_words

HEATMAP_ORDERS = ORDERS  # the orders the IS heatmap offers (see is_graph_view)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.replace({np.nan: None}).to_dict(orient="records")


def sufficiency_frames(run: Run, estimator: str) -> dict[str, pd.DataFrame] | None:
    """Scores, IS matrices (nats and per target dimension) and per-pair figures of one estimator."""
    if not run.has("sufficiency", estimator, "scores.parquet"):
        return None
    from flare_core.analyses.sufficiency import SufficiencyResult

    result = SufficiencyResult.load(run.artefact("sufficiency", estimator, "result"))
    pairs = result.records
    per_dim = pairs.pivot(index="source", columns="target", values="is_per_dim")
    return {
        "scores": run.load_frame("sufficiency", estimator, "scores.parquet"),
        "all_scores": run.load_frame("sufficiency", estimator, "all_scores.parquet")
        if run.has("sufficiency", estimator, "all_scores.parquet")
        else pd.DataFrame(),
        "controls": run.load_frame("sufficiency", estimator, "controls.parquet")
        if run.has("sufficiency", estimator, "controls.parquet")
        else pd.DataFrame(),
        "is_matrix": result.is_matrix,
        "is_per_dim": per_dim.reindex(index=result.is_matrix.index, columns=result.is_matrix.columns),
        "pairs": pairs,
    }


def labels_words(corpus: dict[str, Any]) -> str:
    """What a run's corpus (its manifest's ``corpus``) holds to judge the models by, in words."""
    if corpus.get("has_labels") and corpus.get("label_column"):
        return str(corpus["label_column"])
    if corpus.get("n_judged_queries"):
        return f"search judgements of {corpus['n_judged_queries']:,} queries"
    if corpus.get("has_pairs"):
        return "pairs of texts"
    return "none"


def run_results(run: Run) -> dict[str, Any]:
    """Everything a run has computed so far, JSON-ready (NaN becomes ``None`` on serialisation)."""
    from flare_core.run.jobs import effective_status
    from flare_core.run.outcomes import problems, status_words

    manifest = run.manifest
    status = effective_status(run)
    out: dict[str, Any] = {
        "run_id": run.id,
        "status": status,
        "status_words": status_words(manifest, status),
        "problems": problems(manifest),
        "manifest": manifest,
    }
    if run.has("summary.parquet"):
        out["summary"] = _records(run.load_frame("summary.parquet"))
    sufficiency: dict[str, Any] = {}
    for estimator in ESTIMATOR_NAMES:
        frames = sufficiency_frames(run, estimator)
        if frames is None:
            continue
        sufficiency[estimator] = {
            "label": estimator_label(estimator),
            "scores": _records(frames["scores"]),
            "all_scores": _records(frames["all_scores"]),
            "controls": _records(frames["controls"]),
            "is_matrix": {
                "sources": list(frames["is_matrix"].index),
                "targets": list(frames["is_matrix"].columns),
                "nats": frames["is_matrix"].to_numpy().tolist(),
                "per_dim": frames["is_per_dim"].to_numpy().tolist(),
            },
            "pairs": _records(frames["pairs"]),
        }
    out["sufficiency"] = sufficiency
    for key, parts in {
        "geometry": ("geometry.parquet",),
        "downstream": ("downstream.parquet",),
        "collapse": ("collapse", "summary.parquet"),
        "concentration": ("concentration.parquet",),
        "correlations": ("correlations.parquet",),
    }.items():
        if run.has(*parts):
            out[key] = _records(run.load_frame(*parts))
    verdict = load_verdict(run)
    if verdict is not None:
        out["verdict"] = verdict
    if run.has("labels", "labels.json"):
        out["labels_given"] = run.load_json("labels", "labels.json")
    search = search_judged(run)
    if search:
        out["search_judged"] = search
    if run.has("validation.json"):
        out["validation"] = run.load_json("validation.json")
    return out


def search_judged(run: Run) -> dict[str, int] | None:
    """The search judgements a person gave the run, in counts (never a query's text): ``queries`` asked,
    ``judged`` (with a judgement), ``counted`` (with a relevant document), ``judgements``, ``relevant``,
    ``batches``; None when none were given."""
    from flare_core.answer.few_judgements import has_search_judgements, load_search_judgements

    if not has_search_judgements(run):
        return None
    judged = load_search_judgements(run)
    latest = judged.latest()
    return {
        "queries": len(judged.ids),
        "judged": len(latest),
        "counted": len(judged.counted),
        "judgements": sum(len(d) for d in latest.values()),
        "relevant": sum(g > 0 for d in latest.values() for g in d.values()),
        "batches": judged.batches,
    }


def search_judged_words(counts: dict[str, int] | None) -> str | None:
    """The search judgements given, in words ("5 queries judged (4 with a relevant document), 87 documents
    judged, 12 relevant"); None without any."""
    if not counts or not counts.get("judged"):
        return None
    return (
        f"{counts['judged']:,} search quer{'y' if counts['judged'] == 1 else 'ies'} judged "
        f"({counts['counted']:,} with a relevant document), {counts['judgements']:,} documents judged, "
        f"{counts['relevant']:,} relevant"
    )


def collapse_pairs(run: Run, model_id: str) -> pd.DataFrame | None:
    """Per-pair d_μ, d_Σ, SOCM of one model (columns i, j, row_i, row_j, d_mu, d_sigma, socm)."""
    parts = ("collapse", f"{safe_name(model_id)}.parquet")
    return run.load_frame(*parts) if run.has(*parts) else None


RANKING_COLUMNS = ["rank", "model", "role", "score", "likely between", "notes"]


def ranking_table(
    summary: pd.DataFrame, verdict: dict[str, Any] | None = None, empty: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """What a reader decides with, one row per model in ranking order: ``rank``, ``model``, ``role``,
    ``score`` (FLARE's when the run has it, else EMIR's), ``likely between`` (its 95% interval in words)
    and ``notes`` on how far to trust the place (ties with the leader, controls, models not scored).
    ``verdict`` (the stored ``verdict.json``) adds the recommendation and where each control would rank;
    ``empty`` (:func:`empty_vectors`) the texts a model gave empty vectors."""
    frame = _ranking_rows(summary, verdict)
    if empty:
        frame["notes"] = [
            "; ".join(n for n in (note, empty_vector_note(int(empty.get(m) or 0))) if n)
            for m, note in zip(frame["model"], frame["notes"], strict=True)
        ]
    return frame


def _ranking_rows(summary: pd.DataFrame, verdict: dict[str, Any] | None) -> pd.DataFrame:
    estimator = next((e for e in ESTIMATOR_NAMES if f"{e}_score" in summary.columns), None)
    if estimator is None:
        frame = summary[["model"]].assign(role=summary.get("role"), rank=None, score=np.nan)
        frame["likely between"], frame["notes"] = "", "not scored"
        return frame[RANKING_COLUMNS].reset_index(drop=True)
    score, low, high = (summary[f"{estimator}_{c}"] for c in ("score", "ci_low", "ci_high"))
    frame = pd.DataFrame(
        {
            "model": summary["model"],
            "role": summary.get("role", "candidate"),
            "score": score.astype(float),
            "low": low.astype(float),
            "high": high.astype(float),
        }
    ).sort_values("score", ascending=False, na_position="last", kind="mergesort")
    ranked = frame["score"].notna()
    frame["rank"] = pd.array([None] * len(frame), dtype="Int64")
    frame.loc[ranked, "rank"] = np.arange(1, int(ranked.sum()) + 1)
    frame["likely between"] = [
        f"{number_words(lo)} to {number_words(hi)}" if np.isfinite([lo, hi]).all() else ""
        for lo, hi in zip(frame["low"], frame["high"], strict=True)
    ]
    verdict = verdict or {}
    controls = {str(c.get("model")): c for c in verdict.get("controls") or []}
    leader = frame[ranked].iloc[0] if ranked.any() else None
    notes = []
    for row in frame.itertuples(index=False):
        note = []
        if row.model == verdict.get("recommended"):
            note.append("the answer" if verdict.get("settled") else "the answer for now")
        if row.role == "control":
            note.append("control, should rank last")
            if row.model in controls and controls[row.model].get("would_rank"):
                c = controls[row.model]
                note.append(f"would rank {_ordinal(int(c['would_rank']))} of {c.get('of')}")
        elif not np.isfinite(row.score):
            note.append("not scored")
        elif leader is not None and row.model == leader["model"]:
            note.append("leads the label-free map")
        elif leader is not None and np.isfinite(row.high) and row.high >= leader["low"]:
            note.append("the map cannot tell it from its leader")
        notes.append("; ".join(note))
    frame["notes"] = notes
    return frame[RANKING_COLUMNS].reset_index(drop=True)


def shown_blank(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` for a table on screen: missing values shown as empty cells instead of "None" (text
    columns get ""; a numeric column with gaps becomes text, ``{:.4g}`` for numbers, "" for the gaps)."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if not values.isna().any():
            continue
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            out[column] = [
                "" if pd.isna(v) else (str(int(v)) if float(v).is_integer() else f"{float(v):.4g}")
                for v in values
            ]
        else:
            out[column] = values.astype(object).where(values.notna(), "")
    return out


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


#: The label-free scores the correlation heatmap shows (the score variants stay in the full table).
HEADLINE_SCORES = (
    "flow_is_median_norm",
    "gmm_is_median_norm",
    "socm_mean",
    "uniformity",
    "isoscore",
    "effective_rank",
    "silhouette",
    "dim",
)


def headline_correlations(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a correlation table whose label-free score is one of :data:`HEADLINE_SCORES`, in that
    order (the whole table when it has none of them)."""
    order = {name: index for index, name in enumerate(HEADLINE_SCORES)}
    rank = table["label_free"].map(order)
    if rank.isna().all():
        return table
    return table[rank.notna()].iloc[np.argsort(rank[rank.notna()].to_numpy(), kind="stable")]


_GENERATED_ID = re.compile(r"\d{8}-\d{6}-([0-9a-f]{6})")


def short_run_id(run_id: str) -> str:
    """What tells a run apart at a glance: the random end of an id made by ``new_run_id`` ("a1b2c3" of
    "20261127-235254-a1b2c3"), an id of another form (the demo's) whole."""
    match = _GENERATED_ID.fullmatch(str(run_id))
    return match[1] if match else str(run_id)


def run_words(manifest: Mapping[str, Any]) -> str:
    """A run as a person tells it from others: its name, short id and when it was created ("reviews
    (a1b2c3, 27 Nov 2026, 23:52 UTC)")."""
    name = manifest.get("name") or manifest.get("id")
    return f"{name} ({short_run_id(manifest.get('id', ''))}, {date_words(manifest.get('created'))})"


def runs_table(store: RunStore) -> list[dict[str, Any]]:
    """One row per stored run, newest first: id, short id, name, status in words ("done, with problems"
    when a stage failed), texts, models, created, stage, progress, problems (one sentence per failed
    stage)."""
    from flare_core.run.jobs import effective_status
    from flare_core.run.outcomes import problem_sentences, status_words

    rows = []
    for manifest in store.list():
        progress = manifest.get("progress") or {}
        rows.append(
            {
                "id": manifest["id"],
                "run": short_run_id(manifest["id"]),
                "name": manifest.get("name"),
                "status": status_words(manifest, effective_status(store.get(manifest["id"]))),
                "texts": manifest.get("corpus", {}).get("n_texts"),
                "models": ",".join(m["id"] for m in manifest.get("models", [])),
                "created": manifest.get("created"),
                "stage": progress.get("stage", ""),
                "progress": f"{progress.get('done', '')}/{progress.get('total', '')}" if progress else "",
                "problems": " ".join(problem_sentences(manifest)),
            }
        )
    return rows


@dataclass(frozen=True)
class ISGraphView:
    """What the IS heatmap and graph show: ``per_dim`` (sources × targets, rows and columns in display
    order), the graph's ``nodes`` and ``edges`` (:func:`flare_core.analyses.graph.graph_frames`) and the
    number of Louvain ``communities``."""

    per_dim: pd.DataFrame
    nodes: pd.DataFrame
    edges: pd.DataFrame
    communities: int


def is_graph_view(
    per_dim: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    threshold: float = 0.0,
    resolution: float = 1.1,
    order_by: str = "score",
    seed: int = 0,
) -> ISGraphView:
    """The IS graph above ``threshold`` with its Louvain communities (``resolution``, ``seed``), a seeded
    layout, and the heatmap's rows and columns ordered ``by`` score, community or name."""
    from flare_core.analyses import graph

    score_series = scores.set_index("model")["score"]
    is_graph = graph.is_graph(per_dim, scores=score_series, threshold=threshold)
    groups = graph.communities(is_graph, resolution=resolution, seed=seed)
    order = graph.model_order(list(per_dim.columns), score_series, groups, order_by)
    rows = [m for m in order if m in per_dim.index]
    shown = per_dim.loc[rows, [c for c in order if c in per_dim.columns]]
    nodes, edges = graph.graph_frames(is_graph, groups, graph.graph_layout(is_graph, seed=seed))
    return ISGraphView(shown, nodes, edges, int(nodes["community"].nunique()) if len(nodes) else 0)


#: A spread of the vectors' lengths below this share of their mean length is float32 rounding of vectors
#: of one length (a model that normalises them): it reads 0, not "4.33e-8".
SAME_LENGTH = 1e-5


def length_spread(mean_norm: float, std_norm: float) -> float:
    """The spread of the vectors' lengths as a table shows it: 0 where it is rounding of one length."""
    return 0.0 if std_norm <= SAME_LENGTH * abs(mean_norm) else float(std_norm)


def embedding_table(run: Run) -> pd.DataFrame:
    """One row per model of the run: status, width and row-norm statistics of its embeddings, or its error."""
    from flare_core.analyses.geometry import norm_statistics

    rows = []
    for model in run.manifest["models"]:
        if model.get("status") != "done":
            rows.append({"model": model["id"], "status": model.get("status"), "error": model.get("error")})
            continue
        x = run.load_embeddings(model["id"], mmap=True)
        norms = norm_statistics(x)
        rows.append(
            {
                "model": model["id"],
                "status": "done",
                "dim": int(x.shape[1]),
                "mean norm": norms["mean_norm"],
                "std norm": length_spread(norms["mean_norm"], norms["std_norm"]),
                "zero rows": norms["zero_rows"],
                "seconds": model.get("seconds"),
            }
        )
    return pd.DataFrame(rows)


def most_collapsed_pairs(
    pairs: pd.DataFrame, texts: Sequence[str] | None, k: int, chars: int = 160
) -> pd.DataFrame:
    """The ``k`` pairs with the highest SOCM (ties by rows), with both texts cut to ``chars`` characters
    when ``texts`` (the corpus, by row) are given: columns ``socm, d_mu, d_sigma, row_i, row_j`` (and
    ``text A``, ``text B``)."""
    from flare_core.analyses.collapse import most_collapsed

    rows = pairs.assign(
        row_i=pairs["row_i"] if "row_i" in pairs else pairs["i"],
        row_j=pairs["row_j"] if "row_j" in pairs else pairs["j"],
    )
    top = most_collapsed(rows, k)
    out = top[["socm", "d_mu", "d_sigma"]].copy()
    if texts is not None:
        out["text A"] = [_cut(texts[int(r)], chars) for r in top["row_i"]]
        out["text B"] = [_cut(texts[int(r)], chars) for r in top["row_j"]]
    out["row_i"], out["row_j"] = top["row_i"].to_numpy(), top["row_j"].to_numpy()
    return out


def _cut(text: str, chars: int) -> str:
    return str(text)[:chars]


#: The layer curves in the order they are shown: the two a reader can picture first, then the mechanisms.
LAYER_METRICS = ("mean_cos", "concentration", "lambda_mean", "z_spread_ratio", "r", "C")
_NOT_CURVES = ("layer", "head", "n_texts")  # n_texts is the same at every layer


def layer_metrics(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The layer-level rows of a concentration table (per-head rows dropped) and the metrics to draw:
    those of :data:`LAYER_METRICS` in that order, then any other numeric column."""
    if "head" in frame.columns and frame["head"].notna().any():
        frame = frame[frame["head"].isna() | (frame["head"] < 0)]
    numeric = [c for c in frame.select_dtypes("number").columns if c not in _NOT_CURVES]
    metrics = [m for m in LAYER_METRICS if m in numeric] + [c for c in numeric if c not in LAYER_METRICS]
    return frame, metrics


@functools.lru_cache(maxsize=2)
def _recent_encoder(model_id: str) -> Any:
    from flare_core.encoders import load_encoder

    return load_encoder(model_id)


def pair_token_view(
    model_id: str, text_a: str, text_b: str, *, load: Callable[[str], Any] | None = None
) -> pd.DataFrame:
    """Both texts' token embeddings and means in 2-D (uncentred PCA, SOCM paper Figure 1) with the model
    ``model_id``, loaded by ``load`` (default: :func:`flare_core.encoders.load_encoder`, the two most
    recent models kept in memory)."""
    from flare_core.analyses.collapse import token_view

    encoder = (load or _recent_encoder)(model_id)
    states = encoder.token_states([text_a, text_b])
    return token_view(states[0], states[1])


#: The columns of a run's model list in words, in the order shown (manifest field -> heading).
MODEL_COLUMNS = {
    "id": "model",
    "role": "role",
    "encoder_kind": "kind",
    "dim": "dimensions",
    "layers": "layers",
    "source": "source",
    "revision": "version",
    "seconds": "seconds to embed",
}


def models_table(models: list[dict[str, Any]], empty: Mapping[str, int] | None = None) -> pd.DataFrame:
    """The run's models (the manifest's ``models`` list) as a table with headings in words; fields a
    run did not record are left out. With ``empty`` (:func:`empty_vectors`) and a model that gave a text
    an empty vector, a ``notes`` column (the second) says so on its row."""
    frame = pd.DataFrame(models)
    present = [c for c in MODEL_COLUMNS if c in frame.columns]
    table = frame[present].rename(columns=MODEL_COLUMNS)
    if empty and any(empty.values()) and "id" in frame.columns:
        notes = [empty_vector_note(int(empty.get(m) or 0)) for m in frame["id"]]
        table.insert(1, "notes", notes)  # beside the model's name, not past its long version
    return table


def empty_vectors(run: Run) -> dict[str, int]:
    """How many texts each embedded model of ``run`` gave an empty (all-zero) vector: a static model, or
    TF-IDF, that knows none of a text's words. Models with none are left out."""
    found = {}
    for model in run.manifest["models"]:
        if model.get("status") != "done" or not run.embedding_path(model["id"]).exists():
            continue
        x = run.load_embeddings(model["id"], mmap=True)
        zero = int(np.count_nonzero(~np.any(np.asarray(x) != 0, axis=1)))
        if zero:
            found[model["id"]] = zero
    return found


def empty_vector_note(n: int) -> str:
    """A ranking or model row's note on ``n`` texts with empty vectors ("" for none)."""
    if n <= 0:
        return ""
    return "1 text got an empty vector" if n == 1 else f"{n:,} texts got empty vectors"


def empty_vector_sentence(model: str, n: int) -> str:
    """``n`` texts with empty vectors from ``model``, in words ("3 texts had no known words for
    tfidf-svd-256: it gave them empty vectors.")."""
    if n <= 0:
        return ""
    them = "it gave it an empty vector" if n == 1 else "it gave them empty vectors"
    had = "1 text had" if n == 1 else f"{n:,} texts had"
    return f"{had} no known words for {model}: {them}."
