"""The validity benchmark end to end on a small slice of one public corpus, with fast static models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from flare_core.answer.shipped import shipped_results
from flare_core.benchmark import report as benchmark_report
from flare_core.benchmark import suite as benchmark
from flare_core.store.runs import RunStore
from tests.benchmark.stored_benchmark import MODELS, stored_benchmark
from tests.support import flare_here


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """A copy of the benchmark of debates-2016 (run once per session with test_retrieval_judgement.py)."""
    return stored_benchmark(tmp_path_factory.mktemp("bench-runs"), "debates-2016")


@pytest.mark.slow
def test_record_reads_the_run_and_judges_it_by_the_labels(result):
    store, out = result
    (record,) = out["corpora"]
    assert record["corpus"] == "debates-2016" and record["n_texts"] == 150 and out["complete"]
    assert record["candidates"] == MODELS and record["controls"] == ["shuffled-glove-6b-50d"]
    table = {row["model"]: row for row in record["table"]}
    assert set(table) == {*MODELS, "shuffled-glove-6b-50d"}
    assert table["shuffled-glove-6b-50d"]["role"] == "control"
    run = store.get(record["run_id"])
    # the run saw the labels; the oracle is the accuracy of its own stored embeddings
    assert run.manifest["corpus"]["has_labels"] and run.manifest["params"]["max_length"] == 128
    oracle = np.array([table[m]["oracle"] for m in MODELS])
    assert ((oracle > 0.3) & (oracle <= 1.0)).all()
    # the agreement rows are the Spearman correlations of the table's columns over the candidates only
    rows = {row["score"]: row for row in record["agreement"]}
    for score in ("flow", "gmm", "dim", "uniformity"):
        expected = spearmanr([table[m][score] for m in MODELS], oracle).statistic
        assert rows[score]["spearman"] == pytest.approx(expected, nan_ok=True)
        assert rows[score]["n_models"] == 3
    # points lost: 100 × (best accuracy − accuracy of the verdict's leader)
    leader = record["verdict"]["leading"]
    assert leader in MODELS
    assert record["regret"]["leading"] == pytest.approx(100 * (oracle.max() - table[leader]["oracle"]))
    assert record["best"] == MODELS[int(oracle.argmax())]
    # the run has labels: they decide its answer; the label-free ranking (3 candidates) earns no trust
    assert record["verdict"]["basis"] == "labels" and record["verdict"]["recommended"] in MODELS
    assert record["verdict"]["trust"] == "low" and out["summary"]["control_recommended"] == 0
    # the labels' own judgement: few-label draws at every k, the stopping advice, half/half full labels
    labels = record["labels"]
    assert {row["k"] for row in labels["few"]} == {16, 32, 48, 64, 128}
    assert all(row["draws"] == 2 for row in labels["few"]) and len(labels["full"]) == 5
    assert all(0 <= row["share_within"] <= 1 for row in labels["few"])
    assert all(row["points_lost"] >= 0 and row["pick"] in MODELS for row in labels["full"])
    # without labels: one corpus, so no rule can be chosen on the others
    assert out["summary"]["label_free"]["classifier"]["cases"] == 0


@pytest.mark.slow
def test_classification_is_judged_again_by_nearest_neighbours(result):
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    store, out = result
    (record,) = out["corpora"]
    table = {row["model"]: row for row in record["table"]}
    run = store.get(record["run_id"])
    labels = run.corpus_frame()["label"].to_numpy()
    # the kNN oracle, computed here with scikit-learn directly: 10 neighbours, cosine, 5 seeded folds
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    for model in MODELS:
        x = np.asarray(run.load_embeddings(model), dtype=np.float64)
        knn = KNeighborsClassifier(n_neighbors=10, metric="cosine")
        assert table[model]["oracle_knn"] == pytest.approx(cross_val_score(knn, x, labels, cv=folds).mean())
    knn = record["knn"]
    accuracy = np.array([table[m]["oracle_knn"] for m in MODELS])
    rows = {row["score"]: row for row in knn["agreement"]}
    assert set(rows) == set(benchmark.TABLE_SCORES)
    expected = spearmanr([table[m]["dim"] for m in MODELS], accuracy).statistic
    assert rows["dim"]["spearman"] == pytest.approx(expected, nan_ok=True)
    assert knn["best"] == MODELS[int(accuracy.argmax())]
    leader = record["verdict"]["leading"]
    assert knn["leading"] == pytest.approx(100 * (accuracy.max() - table[leader]["oracle_knn"]))
    assert "| corpus (kNN oracle) |" in benchmark_report.markdown_table(out)


@pytest.mark.slow
def test_benchmark_json_round_trips_and_fills_the_docs_page(result, tmp_path):
    store, out = result
    stored = benchmark.load_benchmark(store)
    assert stored["corpora"][0]["run_id"] == out["corpora"][0]["run_id"]
    page = tmp_path / "benchmark.md"
    page.write_text(
        f"# Title\nbefore\n{benchmark_report.DOCS_START}\nold table\n{benchmark_report.DOCS_END}\nafter\n"
    )
    benchmark_report.update_docs(page, stored)
    text = page.read_text()
    assert "old table" not in text and text.startswith("# Title\nbefore\n") and text.endswith("after\n")
    assert "| debates-2016 | 150 |" in text and "| **mean** |" in text
    plain = tmp_path / "plain.md"
    plain.write_text("no markers here\n")
    with pytest.raises(ValueError, match="benchmark:start"):
        benchmark_report.update_docs(plain, stored)
    assert plain.read_text() == "no markers here\n"


@pytest.mark.slow
def test_cli_prints_the_stored_table_and_refuses_unknown_corpora(result, tmp_path):
    store, _ = result
    shown = flare_here("benchmark", "--table-only", runs_dir=store.root)
    assert "| debates-2016 | 150 |" in shown.stdout
    missing = flare_here("benchmark", "--table-only", runs_dir=tmp_path / "empty", check=False)
    assert missing.returncode == 2 and "run `flare benchmark` first" in missing.stderr
    unknown = flare_here("benchmark", "--corpora", "imdb", runs_dir=tmp_path / "none", check=False)
    assert unknown.returncode == 2 and "unknown benchmark corpora ['imdb']" in unknown.stderr
    assert not (tmp_path / "none").exists()


@pytest.mark.slow
def test_every_is_variant_is_judged_and_summarised(result):
    store, out = result
    (record,) = out["corpora"]
    run = store.get(record["run_id"])
    variants = run.load_frame("sufficiency", "flow", "all_scores.parquet").set_index("model")
    oracle = [next(r["oracle"] for r in record["table"] if r["model"] == m) for m in MODELS]
    rows = {row["score"]: row for row in record["agreement"]}
    for variant in ("is_mean_norm", "cond_only_median_raw"):
        expected = spearmanr(variants.loc[MODELS, variant], oracle).statistic
        assert rows[f"flow:{variant}"]["spearman"] == pytest.approx(expected, nan_ok=True)
    # the default score is the median of IS per target dimension: the same ranking as that variant
    assert rows["flow"]["spearman"] == pytest.approx(rows["flow:is_median_norm"]["spearman"])
    summary = {row["score"]: row for row in out["summary"]["scores"]}
    assert summary["flow:is_mean_norm"]["mean_spearman"] == pytest.approx(
        rows["flow:is_mean_norm"]["spearman"]
    )
    table = benchmark_report.markdown_table(out)
    assert "| flow:is_mean_norm |" in table and "of 1 |" in table
    # each ρ with its bootstrap interval (three models are too few for one: shown as dashes)
    flow = rows["flow"]
    bounds = [f"{v:.2f}" if v is not None else "–" for v in (flow["ci_low"], flow["ci_high"])]
    assert f"| {flow['spearman']:.2f} [{bounds[0]}, {bounds[1]}] |" in table


@pytest.mark.slow
def test_rejudging_reads_the_stored_runs_without_running_them(result, tmp_path):
    store, out = result
    (before,) = out["corpora"]
    run = store.get(before["run_id"])
    timings = dict(run.manifest["timings"])
    again = benchmark.rejudge_benchmark(store)
    (after,) = again["corpora"]
    assert after["run_id"] == before["run_id"] and after["seconds"] == before["seconds"]
    for key in ("agreement", "regret", "table", "verdict", "labels"):  # as JSON: NaN equals NaN there
        assert json.dumps(after[key], sort_keys=True) == json.dumps(before[key], sort_keys=True)
    assert store.get(before["run_id"]).manifest["timings"] == timings  # nothing recomputed
    assert benchmark.load_benchmark(store)["corpora"][0]["table"] == after["table"]
    missing = flare_here("benchmark", "--rejudge", runs_dir=tmp_path / "empty", check=False)
    assert missing.returncode == 2 and "run `flare benchmark` first" in missing.stderr


def test_the_shipped_benchmark_is_the_larger_pool_with_the_eight_candidate_figures_beside():
    root = Path(__file__).parents[2]
    larger = benchmark.load_benchmark(RunStore(root / "bench" / "studies" / "benchmark_16_models"))
    assert larger is not None and len(larger["models"]) >= 17  # 16 trained candidates and the partial model
    labelled = {r["corpus"] for r in larger["corpora"]}
    assert labelled == {
        "rotten-tomatoes", "debates-2016", "bbc-news", "sms-spam", "tweets-sentiment", "lee-similarity"
    }  # fmt: skip
    shipped = shipped_results()
    assert shipped["models"] == larger["models"]
    by_corpus = {r["corpus"]: r for r in shipped["corpora"]}
    for record in larger["corpora"]:  # the six labelled corpora ship as stored, with 16 candidates each
        assert by_corpus[record["corpus"]] == record and len(record["candidates"]) >= 16
        # the eight-model figures beside: the same run on the first eight
        assert len(record["pools"]["first"]["candidates"]) == 8
    page = (root / benchmark_report.DOCS_PAGE).read_text(encoding="utf-8")
    assert benchmark_report.markdown_table(shipped) in page
    assert f"| corpus (8 → {len(larger['corpora'][0]['pools']['whole']['candidates'])} candidates) |" in (
        benchmark_report.markdown_table(shipped)
    )
    earlier = benchmark.load_benchmark(RunStore(root / "bench" / "studies" / "benchmark_8_models"))
    assert earlier is not None and len(earlier["models"]) == 9  # the benchmark the answer quoted before


def test_docs_sections_are_named_plainly(tmp_path):
    assert benchmark_report.docs_markers() == (benchmark_report.DOCS_START, benchmark_report.DOCS_END)
    assert benchmark_report.docs_markers("pool16") == (
        "<!-- benchmark-pool16:start -->",
        "<!-- benchmark-pool16:end -->",
    )
    with pytest.raises(ValueError, match="letters, digits and hyphens"):
        benchmark_report.docs_markers("x --> <script>")
    page = tmp_path / "benchmark.md"
    page.write_text("<!-- benchmark:start -->\nkept\n<!-- benchmark:end -->\n")
    for options in (["--docs", str(page), "--docs-section"], ["--readme", str(page), "--readme-section"]):
        refused = flare_here(
            "benchmark", "--table-only", *options, "bad name", runs_dir=tmp_path / "runs", check=False,
        )  # fmt: skip
        assert refused.returncode == 2 and "letters, digits and hyphens" in refused.stderr
    assert (
        page.read_text() == "<!-- benchmark:start -->\nkept\n<!-- benchmark:end -->\n"
        and not (tmp_path / "runs").exists()
    )


def test_the_docs_show_the_shipped_benchmark():
    shipped = shipped_results()
    assert shipped is not None and shipped["complete"]
    page = (Path(__file__).parents[2] / benchmark_report.DOCS_PAGE).read_text(encoding="utf-8")
    section = page.split(benchmark_report.DOCS_START, 1)[1].split(benchmark_report.DOCS_END, 1)[0]
    assert benchmark_report.markdown_table(shipped) in section
    assert len(shipped["corpora"]) >= 4 and shipped["summary"]["control_recommended"] == 0


def test_the_docs_tables_are_what_flare_benchmark_table_only_prints(tmp_path):
    """The benchmark page is made by the command, not by hand: printing the shipped file and the search
    corpora's stored benchmark into a copy of the page leaves it byte for byte as committed."""
    root = Path(__file__).parents[2]
    committed = (root / benchmark_report.DOCS_PAGE).read_text(encoding="utf-8")
    page = tmp_path / "benchmark.md"
    stale = committed
    for section in (None, "retrieval"):
        start, end = benchmark_report.docs_markers(section)
        stale = stale.split(start)[0] + start + "\nstale\n" + end + stale.split(end, 1)[1]
    assert stale != committed
    page.write_text(stale, encoding="utf-8")
    store = RunStore(tmp_path / "runs")
    benchmark.benchmark_dir(store).mkdir(parents=True)
    (benchmark.benchmark_dir(store) / "benchmark.json").write_bytes(
        (root / "flare_core" / "benchmark" / "benchmark_results.json").read_bytes()
    )
    flare_here("benchmark", "--table-only", "--docs", str(page), runs_dir=store.root)
    flare_here(
        "benchmark", "--table-only", "--docs", str(page), "--docs-section", "retrieval",
        runs_dir=root / "bench" / "studies" / "benchmark_retrieval",
    )  # fmt: skip
    assert page.read_text(encoding="utf-8") == committed
