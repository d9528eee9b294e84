"""Reading a stored run into tables and what each chart shows (a small hand-built run with a real IS matrix)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from flare_core.analyses.collapse import token_view
from flare_core.analyses.sufficiency import GMMConfig, model_scores, sufficiency_matrix
from flare_core.run import jobs
from flare_core.store import atomic
from flare_core.store.runs import Run, RunStore, safe_name
from flare_core.view import results
from tests.encoders._helpers import tiny_bert

MODELS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    """A finished run: embeddings of three models (``c`` nearly copies ``a``), a GMM IS matrix with its
    scores, a collapse table and a concentration table with per-head rows."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((120, 3)).astype(np.float32)
    embeddings = {
        "a": a,
        "b": rng.standard_normal((120, 2)).astype(np.float32),
        "c": a + 0.05 * rng.standard_normal((120, 3)).astype(np.float32),
    }
    embeddings["b"][:5] = 0.0  # five all-zero rows
    manifest = {
        "name": "hand",
        "status": "done",
        "corpus": {"n_texts": 120, "has_labels": False},
        "models": [
            {"id": m, "status": "done", "dim": e.shape[1], "seconds": 1.5} for m, e in embeddings.items()
        ]
        + [{"id": "broken", "status": "failed", "error": "ModelUnavailable: not here"}],
        "params": {"models": MODELS, "seed": 0},
    }
    run = RunStore(tmp_path_factory.mktemp("runs")).create(manifest, run_id="hand")
    for model, x in embeddings.items():
        run.save_embeddings(model, x)
    cfg = GMMConfig(max_epochs=3, max_epochs_conditional=3, patience=2)
    result = sufficiency_matrix(embeddings, estimator="gmm", config=cfg, device="cpu", seed=0)
    result.save(run.artefact("sufficiency", "gmm", "result"))
    run.save_frame(model_scores(result, n_boot=50, seed=0), "sufficiency", "gmm", "scores.parquet")
    i, j = np.triu_indices(6, k=1)
    socm = np.linspace(0.0, 1.0, len(i))
    frame = pd.DataFrame({"i": i, "j": j, "d_mu": 1 - socm, "d_sigma": socm, "socm": socm})
    frame["row_i"], frame["row_j"] = i + 10, j + 10
    run.save_frame(frame, "collapse", f"{safe_name('a')}.parquet")
    layers = pd.DataFrame(
        {
            "model": ["a"] * 4,
            "layer": [1, 1, 2, 2],
            "head": [np.nan, 0, np.nan, 0],
            "r": [1.0, 9.0, 2.0, 9.0],
            "C": [0.5, 9.0, 0.4, 9.0],
        }
    )
    run.save_frame(layers, "concentration.parquet")
    return run


def test_sufficiency_frames_are_the_stored_result(run):
    frames = results.sufficiency_frames(run, "gmm")
    assert results.sufficiency_frames(run, "flow") is None
    is_matrix, per_dim = frames["is_matrix"], frames["is_per_dim"]
    assert list(is_matrix.index) == MODELS and list(per_dim.columns) == MODELS
    dims = {"a": 3, "b": 2, "c": 3}
    for source in MODELS:
        for target in MODELS:
            if source == target:
                assert np.isnan(per_dim.loc[source, target])
            else:
                assert per_dim.loc[source, target] == pytest.approx(
                    is_matrix.loc[source, target] / dims[target]
                )
    assert set(frames["scores"]["model"]) == set(MODELS) and len(frames["pairs"]) == 6


def test_run_results_is_json_ready_with_nan_as_null(run):
    out = results.run_results(run)
    assert out["run_id"] == "hand" and out["status"] == "done"
    block = out["sufficiency"]["gmm"]
    assert block["label"] == "EMIR (Gaussian mixtures)"
    assert block["is_matrix"]["sources"] == MODELS
    text = atomic.to_json(out)
    assert "NaN" not in text
    assert json.loads(text)["sufficiency"]["gmm"]["is_matrix"]["per_dim"][0][0] is None
    assert "collapse" not in out and "concentration" in out


def test_is_graph_view_orders_thresholds_and_groups(run):
    frames = results.sufficiency_frames(run, "gmm")
    per_dim, scores = frames["is_per_dim"], frames["scores"]
    view = results.is_graph_view(per_dim, scores)
    best_first = list(scores.sort_values("score", ascending=False)["model"])
    assert list(view.per_dim.index) == best_first and list(view.per_dim.columns) == best_first
    assert view.communities == view.nodes["community"].nunique()
    by_name = results.is_graph_view(per_dim, scores, order_by="name")
    assert list(by_name.per_dim.columns) == sorted(MODELS)
    positive = int((per_dim.fillna(0).to_numpy() > 0).sum())
    assert len(view.edges) == positive
    top = float(np.nanmax(per_dim.to_numpy()))
    assert results.is_graph_view(per_dim, scores, threshold=top).edges.empty
    with pytest.raises(ValueError, match="by must be one of"):
        results.is_graph_view(per_dim, scores, order_by="size")


def test_embedding_table_norms(run):
    table = results.embedding_table(run).set_index("model")
    x = run.load_embeddings("b")
    norms = np.linalg.norm(x, axis=1)
    assert table.loc["b", "mean norm"] == pytest.approx(norms.mean())
    assert table.loc["b", "std norm"] == pytest.approx(norms.std())
    assert table.loc["b", "zero rows"] == 5 and table.loc["a", "zero rows"] == 0
    assert table.loc["b", "dim"] == 2 and table.loc["broken", "status"] == "failed"
    assert "not here" in table.loc["broken", "error"]


def test_vectors_of_one_length_read_a_spread_of_zero_not_rounding_noise(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 8)).astype(np.float32)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)  # float32: lengths 1 give or take 1e-7
    assert 0 < np.linalg.norm(unit, axis=1).std() < 1e-6
    manifest = {"name": "unit", "status": "done", "corpus": {"n_texts": 50, "has_labels": False},
                "models": [{"id": m, "status": "done", "dim": 8} for m in ("unit", "raw")],
                "params": {"models": ["unit", "raw"], "seed": 0}}  # fmt: skip
    run = RunStore(tmp_path).create(manifest, run_id="unit")
    run.save_embeddings("unit", unit)
    run.save_embeddings("raw", x)
    table = results.embedding_table(run).set_index("model")
    assert table.loc["unit", "std norm"] == 0.0 and table.loc["unit", "mean norm"] == pytest.approx(1.0)
    assert table.loc["raw", "std norm"] == pytest.approx(np.linalg.norm(x, axis=1).std())


def test_most_collapsed_pairs_and_collapse_pairs(run):
    pairs = results.collapse_pairs(run, "a")
    assert results.collapse_pairs(run, "b") is None
    texts = [f"text number {k} " * 20 for k in range(20)]
    top = results.most_collapsed_pairs(pairs, texts, 3, chars=12)
    assert list(top["socm"]) == sorted(pairs["socm"], reverse=True)[:3]
    assert list(top.columns) == ["socm", "d_mu", "d_sigma", "text A", "text B", "row_i", "row_j"]
    first = pairs.loc[pairs["socm"].idxmax()]
    assert top.iloc[0]["row_i"] == first["row_i"] and top.iloc[0]["text A"] == texts[int(first["row_i"])][:12]
    assert "text A" not in results.most_collapsed_pairs(pairs, None, 3).columns


def test_layer_metrics_drop_per_head_rows(run):
    frame, metrics = results.layer_metrics(run.load_frame("concentration.parquet"))
    assert metrics == ["r", "C"] and list(frame["r"]) == [1.0, 2.0]


def test_layer_metrics_order_and_no_flat_count_of_texts():
    frame = pd.DataFrame(
        {
            "model": ["m"],
            "layer": [1],
            "C": [1.0],
            "n_texts": [4],
            "mean_cos": [0.2],
            "extra": [0.0],
            "r": [1.0],
        }
    )
    assert results.layer_metrics(frame)[1] == ["mean_cos", "r", "C", "extra"]


def _summary() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["b", "a", "c", "ctrl", "gone"],
            "role": ["candidate", "candidate", "candidate", "control", "candidate"],
            "flow_score": [0.20, 0.30, 0.05, np.nan, np.nan],
            "flow_ci_low": [0.15, 0.25, 0.01, np.nan, np.nan],
            "flow_ci_high": [0.26, 0.35, 0.08, np.nan, np.nan],
            "flow_rank": [2.0, 1.0, 3.0, np.nan, np.nan],
            "gmm_rank": [1.0, 2.0, 3.0, np.nan, np.nan],
        }
    )


def test_ranking_table_keeps_what_a_reader_decides_with():
    verdict = {"recommended": None, "controls": [{"model": "ctrl", "would_rank": 2, "of": 4}]}
    table = results.ranking_table(_summary(), verdict)
    assert list(table.columns) == ["rank", "model", "role", "score", "likely between", "notes"]
    assert list(table["model"]) == ["a", "b", "c", "ctrl", "gone"]
    assert list(table["rank"][:3]) == [1, 2, 3] and table["rank"][3:].isna().all()
    assert list(table["likely between"][:3]) == ["0.25 to 0.35", "0.15 to 0.26", "0.01 to 0.08"]
    assert list(table["notes"]) == [
        "leads the label-free map",
        "the map cannot tell it from its leader",  # b's interval reaches 0.26, above a's lower end 0.25
        "",
        "control, should rank last; would rank 2nd of 4",
        "not scored",
    ]
    recommended = results.ranking_table(_summary(), {"recommended": "a"})
    assert recommended["notes"][0] == "the answer for now; leads the label-free map"
    settled = results.ranking_table(_summary(), {"recommended": "c", "settled": True})
    assert settled["notes"].tolist()[:3] == [
        "leads the label-free map",
        "the map cannot tell it from its leader",
        "the answer",
    ]


def test_headline_correlations_keep_the_named_scores_in_order():
    table = pd.DataFrame(
        {"label_free": ["uniformity", "flow_is_mean_raw", "flow_is_median_norm"], "downstream": ["f1"] * 3}
    )
    assert list(results.headline_correlations(table)["label_free"]) == ["flow_is_median_norm", "uniformity"]
    other = pd.DataFrame({"label_free": ["x", "y"], "downstream": ["f1", "f1"]})
    assert results.headline_correlations(other).equals(other)


def test_runs_table_reads_progress_and_effective_status(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "busy", "models": [{"id": "a"}, {"id": "b"}], "corpus": {"n_texts": 7}})
    run.update(status="running", pid=123, progress={"stage": "sufficiency_gmm", "done": 2, "total": 9})
    (run.path / jobs.HEARTBEAT).write_text(repr(time.time() - 3600))
    done = store.create({"name": "finished", "status": "done", "models": []})
    rows = {row["id"]: row for row in results.runs_table(store)}
    busy = rows[run.id]
    assert busy["status"] == "failed"  # its worker stopped beating
    assert busy["stage"] == "sufficiency_gmm" and busy["progress"] == "2/9"
    assert busy["models"] == "a,b" and busy["texts"] == 7
    assert rows[done.id]["status"] == "done" and rows[done.id]["progress"] == ""


def test_pair_token_view_loads_the_model_and_projects_both_texts():
    encoder = tiny_bert()
    view = results.pair_token_view("tiny", "a short text", "another text here", load=lambda model_id: encoder)
    states = encoder.token_states(["a short text", "another text here"])
    expected = token_view(states[0], states[1])
    pd.testing.assert_frame_equal(view, expected)
    assert (view["kind"] == "mean").sum() == 2


def test_models_table_names_the_columns_in_words_and_skips_what_was_not_recorded():
    models = [
        {
            "id": "a",
            "role": "candidate",
            "encoder_kind": "static",
            "dim": 50,
            "status": "done",
            "seconds": 0.4,
        },
        {
            "id": "b",
            "role": "control",
            "encoder_kind": "transformer",
            "dim": 384,
            "status": "done",
            "seconds": 4.6,
        },
    ]
    table = results.models_table(models)
    assert list(table.columns) == ["model", "role", "kind", "dimensions", "seconds to embed"]
    assert table["model"].tolist() == ["a", "b"] and table["dimensions"].tolist() == [50, 384]


def test_empty_vectors_are_said_on_the_models_rows_and_in_words(run):
    """Issue 52: a model that gave texts empty vectors is named where its results are (only the Corpus
    page's 'zero rows' column said it)."""
    assert results.empty_vectors(run) == {"b": 5}
    assert results.empty_vector_sentence("tfidf-svd-256", 3) == (
        "3 texts had no known words for tfidf-svd-256: it gave them empty vectors."
    )
    assert (
        results.empty_vector_sentence("m", 1)
        == "1 text had no known words for m: it gave it an empty vector."
    )
    assert results.empty_vector_sentence("m", 0) == ""
    summary = _summary()
    table = results.ranking_table(summary, {}, {"b": 5, "ctrl": 1})
    notes = dict(zip(table["model"], table["notes"], strict=True))
    assert notes["b"] == "the map cannot tell it from its leader; 5 texts got empty vectors"
    assert notes["ctrl"] == "control, should rank last; 1 text got an empty vector" and notes["c"] == ""
    models = results.models_table(run.manifest["models"], results.empty_vectors(run))
    assert dict(zip(models["model"], models["notes"], strict=True))["b"] == "5 texts got empty vectors"
    assert "notes" not in results.models_table(run.manifest["models"], {})


def test_a_run_reads_as_its_name_short_id_and_time():
    manifest = {"id": "20261127-235254-a1b2c3", "name": "reviews", "created": "2026-11-27T23:52:54+00:00"}
    assert results.run_words(manifest) == "reviews (a1b2c3, 27 Nov 2026, 23:52 UTC)"
    assert results.short_run_id("demo-bbc-openings") == "demo-bbc-openings"
