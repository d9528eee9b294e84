"""The ``flare`` command end to end, as a user runs it (real models, real files): every run that computes
in a real subprocess; the other commands (``show``, ``runs``, ``models``, ``collapse``, runs refused before
any work) by the command's own ``main`` in this process (``flare_here``): the process would add only its
start (its exit statuses are ``tests/cli/test_process_exit.py``'s)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from flare_core.store.runs import RunStore, safe_name
from tests.support import flare_here


def test_models_lists_the_registry(tmp_path):
    rows = json.loads(flare_here("models", "--json", runs_dir=tmp_path).stdout)
    by_id = {r["id"]: r for r in rows}
    assert by_id["all-MiniLM-L6-v2"]["dim"] == 384 and by_id["all-MiniLM-L6-v2"]["layers"] == 6
    assert by_id["glove-6b-50d"]["dim"] == 50
    assert (
        by_id["random-minilm-l6"]["role"] == "control"
        and by_id["all-MiniLM-L6-v2-layer3"]["role"] == "partial"
    )
    assert all(by_id[m]["available"] for m in ("all-MiniLM-L6-v2", "glove-6b-50d", "tokenlearn-static-64d"))
    text = flare_here("models", runs_dir=tmp_path).stdout
    assert "all-mpnet-base-v2" in text and "available" in text


@pytest.mark.slow
def test_run_show_runs_end_to_end(tmp_path, small_corpus_path):
    extra = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    np.save(tmp_path / "extra.npy", extra)
    proc = flare_here(  # in this process: `flare run` as a process is tests/run/test_run_shapes.py's
        "run", str(small_corpus_path), "--models", "glove-6b-50d,tokenlearn-static-64d",
        "--embeddings", f"noise={tmp_path / 'extra.npy'}", "--estimator", "gmm", "--label-col", "label",
        "--text-col", "text", runs_dir=tmp_path / "runs",
    )  # fmt: skip
    run_id = proc.stdout.strip().splitlines()[-1]
    # the run line counts the three models chosen, not the two controls every run adds
    assert f"run {run_id}: 50 texts, 3 models" in proc.stderr.splitlines()
    shown = json.loads(flare_here("show", run_id, "--json", runs_dir=tmp_path / "runs").stdout)
    assert shown["status"] == "done"
    scores = {row["model"]: row for row in shown["sufficiency"]["gmm"]["scores"]}
    assert set(scores) == {"glove-6b-50d", "tokenlearn-static-64d", "noise"}
    # random noise carries no information about the real models: the mixtures hold it at the floor of 0,
    # so it is never ranked above either of them (on 50 texts they may find nothing in one of them either)
    assert scores["noise"]["score"] == 0.0
    assert scores["noise"]["rank"] >= max(
        scores[m]["rank"] for m in ("glove-6b-50d", "tokenlearn-static-64d")
    )
    matrix = shown["sufficiency"]["gmm"]["is_matrix"]
    # the default controls are sources (rows) only, never targets (columns) or ranked
    controls = {"random-minilm-l6", "shuffled-glove-6b-50d"}
    assert set(matrix["sources"]) == set(scores) | controls and set(matrix["targets"]) == set(scores)
    assert matrix["nats"][0][0] is None  # no self-pairs
    placed = {row["model"]: row for row in shown["sufficiency"]["gmm"]["controls"]}
    assert set(placed) == controls and all(
        1 <= row["would_rank"] <= 4 and row["of"] == 3 for row in placed.values()
    )
    assert {row["model"] for row in shown["downstream"]} == set(scores) | controls
    listed = json.loads(flare_here("runs", "--json", runs_dir=tmp_path / "runs").stdout)
    assert [r["id"] for r in listed] == [run_id]
    text = flare_here("show", run_id, runs_dir=tmp_path / "runs").stdout
    assert "ranking by information sufficiency (gmm" in text


def test_bad_inputs_give_clear_errors_and_create_nothing(tmp_path):
    runs = tmp_path / "runs"
    missing = flare_here(
        "run", str(tmp_path / "nope.csv"), "--models", "glove-6b-50d", runs_dir=runs, check=False
    )
    assert missing.returncode == 2 and "error:" in missing.stderr
    csv = tmp_path / "c.csv"
    csv.write_text("text\nhello world\nanother text\nthird one\n")
    wrong_col = flare_here(
        "run", str(csv), "--models", "glove-6b-50d", "--text-col", "body", runs_dir=runs, check=False
    )
    assert wrong_col.returncode == 2 and "body" in wrong_col.stderr
    bad_emb = tmp_path / "bad.npy"
    np.save(bad_emb, np.zeros((2, 4), dtype=np.float32))
    rows = flare_here("run", str(csv), "--embeddings", f"x={bad_emb}", runs_dir=runs, check=False)
    assert rows.returncode == 2 and "rows" in rows.stderr
    unsafe = flare_here("show", "../../etc", runs_dir=runs, check=False)
    assert unsafe.returncode == 2 and "invalid run id" in unsafe.stderr
    assert not runs.exists() or list(runs.iterdir()) == []


@pytest.mark.slow
def test_collapse_command_recomputes_socm_with_other_texts(tmp_path, labelled_run):
    runs = tmp_path / "runs"
    shutil.copytree(labelled_run.path, runs / labelled_run.id)  # MiniLM, static models and controls
    run_id = labelled_run.id
    first = json.loads(flare_here("show", run_id, "--json", runs_dir=runs).stdout)
    # 12 texts → 66 pairs, MiniLM only: the random-init control serves the ranking and has no collapse
    assert [(row["model"], row["n_pairs"]) for row in first["collapse"]] == [("all-MiniLM-L6-v2", 66)]
    out = json.loads(flare_here("collapse", run_id, "--texts", "8", "--json", runs_dir=runs).stdout)
    (summary,) = out["summary"]
    assert summary["model"] == "all-MiniLM-L6-v2" and summary["n_pairs"] == 28 and summary["n_texts"] == 8
    # the summary is the stored per-pair table, and each pair's SOCM is (1 - d_mu) * d_sigma (paper Eq. 4)
    run = RunStore(runs).get(run_id)
    pairs = run.load_frame("collapse", f"{safe_name('all-MiniLM-L6-v2')}.parquet")
    sample = run.load_array("collapse", "sample_rows.npy")
    assert len(pairs) == 28 and set(pairs["row_i"]) | set(pairs["row_j"]) == set(sample.tolist())
    np.testing.assert_allclose(
        pairs["socm"], (1 - pairs["d_mu"]).clip(lower=0) * pairs["d_sigma"], rtol=1e-12
    )
    labels = run.corpus_frame()["label"].to_numpy()
    same = labels[pairs["row_i"]] == labels[pairs["row_j"]]
    assert 0 < same.sum() < 28  # 8 texts of 5 topics: some pairs share a topic, most do not
    assert summary["socm_mean"] == pytest.approx(pairs["socm"].mean()) and summary["socm_mean"] > 0
    assert summary["socm_same_label_mean"] == pytest.approx(pairs.loc[same, "socm"].mean())
    assert summary["socm_different_label_mean"] == pytest.approx(pairs.loc[~same, "socm"].mean())
    assert sorted({row["layer"] for row in out["layers"]}) == [1, 2, 3, 4, 5, 6]
    top = out["most_collapsed"]["all-MiniLM-L6-v2"]
    assert [t["socm"] for t in top] == pytest.approx(sorted(pairs["socm"], reverse=True)[:10])
    texts = run.corpus_frame()["text"].tolist()
    assert all(t["text_a"] in texts and t["text_b"] in texts for t in top)
    refused = flare_here("collapse", run_id, "--model", "glove-6b-50d", runs_dir=runs, check=False)
    assert refused.returncode == 2 and "transformer" in refused.stderr


def test_run_options_for_scale_are_parsed_and_checked():
    from flare_core.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(
        [
            "run",
            "c.csv",
            "--max-texts-sufficiency",
            "all",
            "--workers",
            "3",
            "--autocast",
            "--batch-conditionals",
            "5",
        ]
    )
    assert args.max_texts_sufficiency is None and args.workers == 3 and args.autocast
    assert args.batch_conditionals == 5
    assert parser.parse_args(["run", "c.csv", "--max-texts-sufficiency", "500"]).max_texts_sufficiency == 500
    for bad in ("1", "many"):
        with pytest.raises(SystemExit):
            parser.parse_args(["run", "c.csv", "--max-texts-sufficiency", bad])
    # without --max-dims a run takes its preset's whitened width; with it, the number asked for
    from flare_core.cli.commands import PRESET_WIDTH

    assert parser.parse_args(["run", "c.csv", "--flow-preset", "paper"]).max_dims is PRESET_WIDTH
    assert parser.parse_args(["run", "c.csv", "--max-dims", "all"]).max_dims is None
    assert parser.parse_args(["run", "c.csv", "--max-dims", "64"]).max_dims == 64


@pytest.mark.slow
def test_a_run_of_uploaded_embeddings_only_ranks_them(tmp_path, small_corpus_path):
    runs = tmp_path / "runs"
    n = len(pd.read_csv(small_corpus_path))
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(n, 4))
    args = []
    for k, name in enumerate(["api-a", "api-b", "api-c"]):
        x = np.hstack([shared * (1.0 - 0.3 * k), rng.normal(size=(n, 4))]).astype(np.float32)
        np.save(tmp_path / f"{name}.npy", x)
        args += ["--embeddings", f"{name}={tmp_path / f'{name}.npy'}"]
    proc = flare_here(
        "run", str(small_corpus_path), *args, "--controls", "none", "--estimator", "gmm", "--no-collapse",
        "--json", runs_dir=runs,
    )  # fmt: skip
    run_id = json.loads(proc.stdout)["run_id"]
    shown = json.loads(flare_here("show", run_id, "--json", runs_dir=runs).stdout)
    ranked = {row["model"] for row in shown["sufficiency"]["gmm"]["scores"]}
    assert ranked == {"api-a", "api-b", "api-c"}


def test_an_unknown_model_is_refused_before_a_run_is_written(tmp_path, small_corpus_path):
    runs = tmp_path / "runs"
    proc = flare_here(
        "run", str(small_corpus_path), "--models", "glove-6b-50d,mpnet", runs_dir=runs, check=False
    )
    assert proc.returncode == 2 and "did you mean 'all-mpnet-base-v2'" in proc.stderr
    assert not runs.exists() or list(runs.iterdir()) == []
