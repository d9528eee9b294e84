"""The map stage from kept vectors: hand-made kept corpora on disk (a few tiny models' vectors and a
control), the flows and mixtures estimated from them without embedding, and the judgement checked by hand
(scipy's Spearman, the points lost from the oracle, the mean over corpora inside its interval)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from flare_core.benchmark.map_judge import is_rule_table, without_fitted
from flare_core.benchmark.map_kept import estimate_kept, read_stage
from flare_core.benchmark.map_suite import markdown_tables, run_kept_map, update_docs
from flare_core.cli.parser import main

#: Hand-made models: the noise each adds to the shared signal (more noise, less information), the width,
#: and the oracle's accuracy (not in the order of the noise: the correlations are not all 1).
MODELS = {
    "tiny-clear": (0.1, 8, 0.81),
    "tiny-blurred": (0.6, 8, 0.86),
    "tiny-noisy": (1.5, 6, 0.62),
    "tiny-lost": (4.0, 6, 0.40),
    "tiny-worse": (6.0, 6, 0.45),
}
CONTROL = "random-minilm-l6"  # a control of the pool: a source of information only
N_TEXTS = 60


def _keep(root: Path, name: str, seed: int) -> None:
    """A kept classification corpus ``name`` under ``root``: texts, 3 classes, each model's vectors."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(["a", "b", "c"], N_TEXTS // 3)
    signal = rng.normal(size=(N_TEXTS, 4)) + 2.0 * (labels[:, None] == np.array(["a", "b", "c", "a"]))
    folder = root / name
    folder.mkdir(parents=True)
    frame = pd.DataFrame({"text": [f"text number {i} of {name}" for i in range(N_TEXTS)], "label": labels})
    frame.to_csv(folder / "frame.csv", index=False)
    meta = {
        "name": name,
        "task": "three classes",
        "description": "made by hand",
        "source": "this test",
        "licence": "none",
        "oracle": "classification",
        "seed": seed,
        "n_texts": N_TEXTS,
        "cleaning": {},
    }
    (folder / "corpus.json").write_text(json.dumps(meta), encoding="utf-8")
    rows = []
    for model, (noise, width, accuracy) in {**MODELS, CONTROL: (0.0, 5, 0.3)}.items():
        mixing = rng.normal(size=(4, width))
        vectors = signal @ mixing + noise * rng.normal(size=(N_TEXTS, width))
        if model == CONTROL:
            vectors = rng.normal(size=(N_TEXTS, width))
        np.save(folder / f"{model}.npy", vectors.astype(np.float32))
        sidecar = {"model": model, "dim": width, "seconds": 0.1, "revision": None, "max_length": None}
        (folder / f"{model}.json").write_text(json.dumps(sidecar), encoding="utf-8")
        shift = 0.01 * seed  # the answer stage's record: its oracle columns and geometric scores
        rows.append(
            {
                "model": model,
                "oracle": accuracy + shift,
                "oracle_knn": accuracy - shift,
                "oracle_vmeasure": accuracy / 2,
                "dim": float(width),
                "effective_rank": width - noise / 2,
                "role": "control" if model == CONTROL else "candidate",
            }
        )
    record = {
        "corpus": name,
        "task": meta["task"],
        "oracle": "accuracy",
        "n_texts": N_TEXTS,
        "candidates": list(MODELS),
        "controls": [CONTROL],
        "best": "tiny-blurred",
        "table": rows,
    }
    (folder / "record.json").write_text(json.dumps(record), encoding="utf-8")


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    root = runs / "benchmark" / "embeddings"
    for seed, name in enumerate(("made-one", "made-two")):
        _keep(root, name, seed)
    return runs


def test_the_map_is_estimated_from_the_kept_vectors_and_judged_as_by_hand(kept):
    root, out = kept / "benchmark" / "embeddings", kept / "benchmark" / "map"
    result = run_kept_map(root, out, preset="fast")
    assert [r["corpus"] for r in result["corpora"]] == ["made-one", "made-two"]
    assert json.loads((kept / "benchmark" / "map_kept.json").read_text()) == result
    per = pd.DataFrame(result["summary"]["per_corpus"])
    summary = pd.DataFrame(result["summary"]["scores"]).set_index(["use", "score"])
    for record in result["corpora"]:
        table = pd.DataFrame(record["table"]).set_index("model")
        candidates = record["candidates"]
        assert sorted(candidates) == sorted(MODELS) and record["controls"] == [CONTROL]
        assert set(record["stages"]) == {"flow", "gmm"} and record["stages"]["flow"]["n_rows"] == N_TEXTS
        for stage in record["stages"].values():  # the units' seconds, within the stage's
            assert 0 < stage["unit_seconds"] <= stage["seconds"] + 0.1
        for score in ("flow", "gmm", "flow:cond_only_median_norm", "gmm:is_median_raw", "effective_rank"):
            want = spearmanr(table.loc[candidates, score], table.loc[candidates, "oracle"]).statistic
            got = per[
                (per["corpus"] == record["corpus"]) & (per["use"] == "classifier") & (per["score"] == score)
            ]
            assert got["rho"].item() == pytest.approx(want, abs=1e-12)
            top = table.loc[candidates, score].idxmax()
            lost = 100 * (table.loc[candidates, "oracle"].max() - table.loc[top, "oracle"])
            assert got["lost"].item() == pytest.approx(lost, abs=1e-9)
        for estimator in ("flow", "gmm"):  # the control is scored beside the candidates, not among them
            beaten = int((table.loc[candidates, estimator] < table.loc[CONTROL, estimator]).sum())
            assert record["controls_outrank"][estimator] == {CONTROL: beaten}
    for score in ("flow", "gmm"):
        rhos = per[(per["use"] == "classifier") & (per["score"] == score)]["rho"]
        row = summary.loc[("classifier", score)]
        assert row["mean_rho"] == pytest.approx(rhos.mean()) and row["corpora"] == 2
        assert row["rho_low"] <= row["mean_rho"] <= row["rho_high"]
        assert row["rho_low"] >= rhos.min() - 1e-12 and row["rho_high"] <= rhos.max() + 1e-12
        # pooled as the papers pool their datasets: the neighbours (a proxy) left out, so the classifier's alone
        assert summary.loc[("all", score), "mean_rho"] == pytest.approx(rhos.mean())
    assert set(result["summary"]["uses"]) == {"classifier", "neighbours"}  # no grouping, search, similarity
    assert "| classifier | flow | 2 |" in markdown_tables(result)


def test_a_finished_stage_is_read_back_and_a_corpus_added(kept):
    root, out = kept / "benchmark" / "embeddings", kept / "benchmark" / "map"
    run_kept_map(root, out, ["made-one"], preset="fast")
    stage = out / "made-one" / "flow" / "stage.json"
    before = stage.stat().st_mtime_ns
    again = estimate_kept(root, "made-one", out, "flow", preset="fast")
    assert again == read_stage(out, "made-one", "flow") and stage.stat().st_mtime_ns == before
    only = run_kept_map(root, out, ["made-one"], preset="fast", estimate=False)
    assert [r["corpus"] for r in only["corpora"]] == ["made-one"]
    both = run_kept_map(root, out, ["made-two"], preset="fast", estimate=False, add=True)
    assert [r["corpus"] for r in both["corpora"]] == ["made-one", "made-two"]
    assert stage.stat().st_mtime_ns == before  # nothing estimated again
    with pytest.raises(ValueError, match="holds the 'fast' preset"):
        run_kept_map(root, out, ["made-two"], estimate=False, add=True)


def test_a_stage_estimated_on_another_machine_is_judged_and_costed_by_its_wall_seconds(kept):
    root, out = kept / "benchmark" / "embeddings", kept / "benchmark" / "map"
    first = run_kept_map(root, out, ["made-one"], preset="fast")
    shutil.rmtree(out / "made-one" / "flow" / "pairs")  # only the matrix and stage.json came back
    stage = out / "made-one" / "flow" / "stage.json"
    stage.write_text(json.dumps({**json.loads(stage.read_text()), "seconds": 12.3, "machine": "an H200 GPU"}))
    again = run_kept_map(root, out, ["made-one"], preset="fast")  # read back, not estimated again
    assert again["corpora"][0]["table"] == first["corpora"][0]["table"]
    assert again["corpora"][0]["stages"]["flow"]["unit_seconds"] is None
    assert again["corpora"][0]["stages"]["gmm"]["unit_seconds"] > 0
    assert "| 12 wall, an H200 GPU |" in markdown_tables(again)


def test_the_command_reads_the_kept_vectors_and_refuses_an_unknown_corpus(kept, capsys):
    args = ["benchmark", "--runs-dir", str(kept), "--stage", "map", "--kept", "--flow-preset", "fast"]
    page = kept / "page.md"
    page.write_text("<!-- map-kept:start -->\n<!-- map-kept:end -->\n")
    assert main([*args, "--rejudge", "--docs", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "Map from the kept vectors: 2 corpora" in printed and printed.strip() in page.read_text()
    assert main([*args, "--table-only", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["corpora"]) == 2
    before = (kept / "benchmark" / "map_kept.json").read_bytes()
    assert main([*args, "--corpora", "not-kept"]) == 2
    assert "no judged kept vectors of ['not-kept']" in capsys.readouterr().err
    assert (kept / "benchmark" / "map_kept.json").read_bytes() == before


def _rule_record(name: str, oracle: list[float]) -> dict:
    """A map record of four candidates where the mixtures' IS follows the oracle and the width runs
    against it (the effective rank and uniformity say nothing: equal for all)."""
    models = ["m1", "m2", "m3", "m4"]
    rows = [
        {
            "model": m,
            "oracle": o,
            "oracle_knn": o,
            "oracle_vmeasure": o,
            "dim": float(100 - 10 * i),
            "effective_rank": 1.0,
            "uniformity": 1.0,
            "gmm": o,
            "role": "candidate",
        }
        for i, (m, o) in enumerate(zip(models, oracle, strict=True))
    ]
    return {
        "corpus": name,
        "oracle": "accuracy",
        "candidates": models,
        "table": rows,
        "groups_by_class": True,
    }


def test_information_sufficiency_as_a_rule_is_judged_leave_one_corpus_out():
    records = [_rule_record(f"c{i}", [0.5, 0.6, 0.7, 0.8 + 0.01 * i]) for i in range(3)]
    rows = {(r["use"], r["rules"]): r for r in is_rule_table(records)}
    row = rows[("classifier", "geometric + mixtures")]
    assert row["cases"] == 3 and row["final"] == "gmm" and row["mean_lost"] == 0.0
    # alone, the widest model is picked (m1): 30 + i points below the best, by hand
    assert row["alone_final"] == "dim"
    assert row["alone_mean_lost"] == pytest.approx(np.mean([100 * (0.8 + 0.01 * i - 0.5) for i in range(3)]))
    assert not any(r["rules"] == "geometric + flows" for r in rows.values())  # no flows in these records


def test_the_docs_page_gets_the_tables_between_its_markers(kept, tmp_path):
    result = json.loads((kept / "benchmark" / "map_kept.json").read_text())
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n<!-- map-kept:start -->\nold\n<!-- map-kept:end -->\n\nAfter.\n")
    update_docs(page, result)
    text = page.read_text()
    assert "old" not in text and text.startswith("# Title") and text.endswith("After.\n")
    assert markdown_tables(result) in text
    bare = tmp_path / "bare.md"
    bare.write_text("# No markers\n")
    with pytest.raises(ValueError, match="no <!-- map-kept:start -->"):
        update_docs(bare, result)
    assert bare.read_text() == "# No markers\n"


def test_the_pretrained_judgement_leaves_out_the_models_fitted_on_the_corpus():
    record = {"corpus": "c", "candidates": ["all-MiniLM-L6-v2", "tfidf-svd-256", "doc2vec-corpus-100", "m1"]}
    assert without_fitted([record])[0]["candidates"] == ["all-MiniLM-L6-v2", "m1"]
    assert record["candidates"][1] == "tfidf-svd-256"  # the record itself is left as it was


def test_the_replication_page_shows_the_shipped_record(tmp_path, capsys):
    root = Path(__file__).resolve().parents[2]
    committed = (root / "docs" / "is-replication.md").read_text(encoding="utf-8")
    runs = tmp_path / "runs"
    (runs / "benchmark").mkdir(parents=True)
    shipped = root / "flare_core" / "benchmark" / "map_kept.json"
    (runs / "benchmark" / "map_kept.json").write_bytes(shipped.read_bytes())
    page = tmp_path / "is-replication.md"
    start, end = "<!-- map-kept:start -->", "<!-- map-kept:end -->"
    page.write_text(committed.split(start)[0] + start + "\nstale\n" + end + committed.split(end, 1)[1])
    args = [
        "benchmark",
        "--runs-dir",
        str(runs),
        "--stage",
        "map",
        "--kept",
        "--table-only",
        "--docs",
        str(page),
    ]
    assert main(args) == 0
    assert page.read_text(encoding="utf-8") == committed
    corpora = json.loads(shipped.read_text())["corpora"]
    assert f"A replication on {len(corpora)} corpora" in committed
