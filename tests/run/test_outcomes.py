"""Stages on their own: a stage that fails leaves a run "done, with problems" whose other stages are
complete, said in words everywhere a run's status is shown, and ``flare resume`` retries only that stage."""

from __future__ import annotations

import json

import pytest

from flare_core.answer.stored import VERDICT_FILE
from flare_core.data.corpus import load_corpus
from flare_core.run import jobs, stages
from flare_core.run.create import create_run
from flare_core.run.outcomes import problem_words, problems, status_words
from flare_core.run.params import RunParams
from flare_core.store.runs import RunStore
from flare_core.view.results import run_results, runs_table

try:
    from tests.support import flare_here, shown
except ImportError:  # pytest put tests/ itself on sys.path
    from support import flare_here, shown  # type: ignore[no-redef]

STATIC = ["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"]


def test_problem_words_say_why_and_what_to_do_without_a_bare_exception():
    worded = problem_words("r1", "maps", ValueError("UMAP needs at least 3 texts to draw a map"))
    assert worded["why"] == "UMAP needs at least 3 texts to draw a map"  # an acronym keeps its capitals
    assert problem_words("r1", "maps", ValueError("The file is gone."))["why"] == "the file is gone"
    assert "flare resume r1" in worded["todo"] and worded["error"].startswith("ValueError")
    bug = problem_words("r1", "maps", KeyError("x"))
    assert bug["why"].startswith("an unexpected error inside FLARE Studio (KeyError")
    assert "flare show r1 --json" in bug["todo"]
    assert problem_words("r1", "maps", MemoryError())["why"] == "the machine ran out of memory"


def test_status_words():
    failed = {"outcomes": {"maps": {"status": "failed", "why": "w", "todo": "t"}}}
    assert status_words(failed, "done") == "done, with problems"
    assert status_words({"outcomes": {"maps": {"status": "skipped", "why": "w"}}}, "done") == "done"
    assert status_words(failed, "running") == "running"


@pytest.mark.slow
def test_a_failing_stage_leaves_the_others_complete_and_resume_repairs_only_it(
    tmp_path, small_corpus_path, monkeypatch
):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    params = RunParams(
        models=STATIC, estimators=["gmm"], controls=[], collapse=False, concentration=False, map_points=50,
        validation=["aggregation"],
    )  # fmt: skip
    store = RunStore(tmp_path / "runs")
    run = create_run(store, corpus, params)

    def broken_maps(*args, **kwargs):
        raise RuntimeError("the map could not be drawn (injected fault)")

    monkeypatch.setattr(stages, "maps_stage", broken_maps)
    assert jobs.run_in_process(run) == "done"
    manifest = run.manifest
    outcomes = {name: o["status"] for name, o in manifest["outcomes"].items()}
    assert outcomes["maps"] == "failed"
    for stage in ("sufficiency_gmm", "geometry", "downstream", "validation", "summary", "verdict"):
        assert outcomes[stage] == "done", (stage, outcomes)
    assert run.has(VERDICT_FILE) and run.has("summary.parquet") and run.has("downstream.parquet")
    [problem] = problems(manifest)
    assert problem["stage"] == "maps" and problem["why"] == "the map could not be drawn (injected fault)"
    row = next(r for r in runs_table(store) if r["id"] == run.id)
    assert row["status"] == "done, with problems"
    assert "Drawing a map of each embedding space failed: the map could not be drawn" in row["problems"]
    assert f"flare resume {run.id}" in row["problems"]
    shown = flare_here("show", run.id, runs_dir=store.root).stdout
    assert "done, with problems" in shown and "problem: drawing a map of each embedding space failed" in shown
    assert (
        json.loads(flare_here("show", run.id, "--json", runs_dir=store.root).stdout)["problems"][0]["stage"]
        == "maps"
    )

    _runs_page_says(store, run.id, "Drawing a map of each embedding space failed: the map could not be drawn")
    _share_link_says(
        store, run.id, "Drawing a map of each embedding space failed: the map could not be drawn"
    )

    monkeypatch.undo()  # the fault is gone: resume retries the maps and nothing that was done
    stamps = {
        p: run.artefact(*p).stat().st_mtime_ns for p in [("geometry.parquet",), ("downstream.parquet",)]
    }
    resumed = flare_here("resume", run.id, runs_dir=store.root)
    assert "done, with a problem" not in resumed.stderr
    manifest = run.manifest
    assert manifest["outcomes"]["maps"]["status"] == "done" and problems(manifest) == []
    assert all(run.artefact(*p).stat().st_mtime_ns == t for p, t in stamps.items())
    assert run_results(run)["status_words"] == "done"


def _app(store: RunStore, query: dict[str, str], page: str | None = None):
    """The dashboard rendered by Streamlit's AppTest over ``store`` with ``query`` in its address, then
    switched to ``page`` when given."""
    import os
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[2] / "app.py")
    before = os.environ.get("FLARE_RUNS_DIR")
    os.environ["FLARE_RUNS_DIR"] = str(store.root)
    try:
        at = AppTest.from_file(app, default_timeout=120)
        for key, value in query.items():
            at.query_params[key] = value
        at.run()
        if page is not None:
            at.switch_page(page)
            at.run()
    finally:
        if before is None:
            os.environ.pop("FLARE_RUNS_DIR", None)
        else:
            os.environ["FLARE_RUNS_DIR"] = before
    assert not at.exception, [e.value for e in at.exception]
    return at


def _runs_page_says(store: RunStore, run_id: str, sentence: str) -> None:
    """The Runs page names the failed stage in words for ``run_id`` and offers to try it again."""
    at = _app(store, {"run": run_id}, page="dashboard/runs.py")
    words = "\n".join(shown(c.value) for c in at.caption)
    assert sentence in words and f"flare resume {run_id}" in words
    assert any(b.label == "Try the failed stages again" for b in at.button)


def _share_link_says(store: RunStore, run_id: str, sentence: str) -> None:
    """A share link to the run with problems: its Overview opens, says which stage failed, and offers the
    viewer nothing that would change the run."""
    from flare_core.store.shares import create_link

    token, _ = create_link(store, run_id)
    at = _app(store, {"share": token})
    assert any(sentence in shown(w.value) for w in at.warning), [w.value for w in at.warning]
    assert not [b.label for b in at.button if "Try the failed stages" in b.label or "Delete" in b.label]
