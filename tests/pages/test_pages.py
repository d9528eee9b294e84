"""Every dashboard page against stored fixture runs (with labels, static-only without labels, failed),
through Streamlit's AppTest: assertions on the content shown, not only on the absence of exceptions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from flare_core.answer.shipped import shipped_results
from flare_core.answer.stored import load_verdict
from tests.pages.test_access_pages import _opens_nothing
from tests.support import page_texts, shown

APP = str(Path(__file__).resolve().parents[2] / "app.py")
pytestmark = pytest.mark.slow


@pytest.fixture
def open_page(fixture_store, monkeypatch):
    monkeypatch.setenv("FLARE_RUNS_DIR", str(fixture_store.root))

    def _open(page: str, run) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["run"] = run.id
        at.run()
        if page != "dashboard/overview.py":
            at.switch_page(page)
            at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return _open


def _page_verdict(at: AppTest) -> str | None:
    """The text of the page's verdict box (CSS class st-key-page-verdict), None when it has none."""
    boxes = [b for b in at.get("flex_container") if b.proto.id.endswith("-page-verdict")]
    assert len(boxes) <= 1
    return "\n".join(str(alert.value) for alert in boxes[0].info) if boxes else None


@pytest.mark.parametrize(
    ("page", "found"),
    [
        (
            "dashboard/collapse.py",
            "Mean pooling hides much of the difference between texts for all-MiniLM-L6-v2",
        ),
        ("dashboard/layers.py", "In all-MiniLM-L6-v2, the layers make the tokens of a text"),
        ("dashboard/corpus.py", "50 texts, typically"),
        ("dashboard/sufficiency.py", "tells the most about the other models"),
        ("dashboard/validation.py", "compared with classification accuracy over only 4 models"),
    ],
)
def test_every_analysis_page_opens_with_its_verdict(open_page, labelled_run, page, found):
    at = open_page(page, labelled_run)
    verdict = _page_verdict(at)
    assert verdict is not None and verdict.startswith("**")
    assert found in shown(verdict)
    assert at.info[0].value == verdict  # the first note of the page


def test_overview_leads_with_the_answer_of_the_labels_and_keeps_the_map(open_page, labelled_run):
    at = open_page("dashboard/overview.py", labelled_run)
    verdict = load_verdict(labelled_run)
    comparison = labelled_run.load_frame("labels", "comparison.parquet")
    assert verdict["basis"] == "labels" and verdict["settled"]
    assert verdict["recommended"] == comparison.iloc[0]["model"]
    (alert,) = at.success  # the answer leads, in green; no red box above a table of the labels' verdict
    answer = shown(alert.value)
    assert answer.startswith(f"**Use {verdict['recommended']}: ") and "accuracy on your labels" in answer
    assert not at.error
    text = page_texts(at)
    assert "Decided by your labels" in text and "Nothing more is needed: your labels decided." in text
    # the label-free ranking stays beside it as the map, with its own trust level and checks
    assert "Label-free ranking, trust: low" in text
    checks, said, ranking, everything = (at.dataframe[i].value for i in range(4))
    assert "Enough candidates to compare" in set(checks["check"]) and "failed" in set(checks["result"])
    assert list(said["model"]) == comparison["model"].tolist() and said.iloc[0]["behind the best"] == "best"
    assert list(ranking.columns) == ["rank", "model", "role", "score", "likely between", "notes"]
    assert set(ranking["model"]) == {m["id"] for m in labelled_run.manifest["models"]}
    assert ranking.iloc[0]["model"] == verdict["leading"] and "leads" in ranking.iloc[0]["notes"]
    assert "None" not in ranking.astype(str).to_numpy()  # missing values are blank, not "None"
    assert "accuracy" in everything.columns and "flow_ci_low" in everything.columns  # behind "All columns"
    assert "All columns" in [e.label for e in at.expander]


def test_sufficiency_page_shows_matrix_graph_and_pairs(open_page, labelled_run):
    at = open_page("dashboard/sufficiency.py", labelled_run)
    text = page_texts(at)
    assert "groups (Louvain communities, resolution 1.1, seed 0)" in text
    assert "Held-out check: the estimators fit texts they were not trained on worse by" in text
    assert "Δ_emp" not in text
    pairs = at.dataframe[0].value
    assert len(pairs) == 4 * (3 + 2)  # each of the 4 candidates from the 3 others and the 2 controls
    at.radio[0].set_value("gmm").run()
    assert not at.exception


def test_collapse_page_lists_pairs(open_page, labelled_run):
    at = open_page("dashboard/collapse.py", labelled_run)
    summary = at.dataframe[0].value
    assert summary["model"].tolist() == ["all-MiniLM-L6-v2"]
    top = at.dataframe[1].value
    assert len(top) == 20 and top["socm"].is_monotonic_decreasing


def test_layers_and_validation_pages(open_page, labelled_run):
    at = open_page("dashboard/layers.py", labelled_run)
    assert "Averaged over 4 sampled texts" in page_texts(at)
    at = open_page("dashboard/validation.py", labelled_run)
    tables = [frame.value for frame in at.dataframe]
    checks, shipped, correlations = tables[:3]
    assert {"check", "result", "figure", "meaning"} <= set(checks.columns)
    corpora = [r["corpus"] for r in shipped_results()["corpora"]]  # the benchmark that ships: one row each
    assert shipped["corpus"].tolist() == corpora and "ranking vs labels (ρ)" in shipped.columns
    assert {"label_free", "downstream", "spearman_rho", "kendall_tau"} <= set(correlations.columns)
    assert "classification accuracy" in set(correlations["downstream"])  # the scores in words
    assert any("rest on only 4 models, and so are greyed out" in w.value for w in at.warning)


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("dashboard/collapse.py", "This run has no collapse figures: they need a transformer model"),
        ("dashboard/layers.py", "This run has no layer-by-layer figures"),
        ("dashboard/validation.py", "Correlation tables need labels"),
        ("dashboard/corpus.py", "Embedding map"),
        ("dashboard/overview.py", "Label-free ranking, trust: low"),
    ],
)
def test_static_unlabelled_run_shows_empty_states(open_page, unlabelled_run, page, expected):
    at = open_page(page, unlabelled_run)
    assert expected in page_texts(at)
    if page == "dashboard/overview.py":  # without labels: a provisional choice, its odds and the offer
        (alert,) = at.info[:1]
        assert alert.value.startswith("**Provisionally ") and "public corpora" in alert.value
        assert any(link.label == "Check with a few labels" for link in at.get("page_link"))
    if page in ("dashboard/collapse.py", "dashboard/layers.py"):
        assert _page_verdict(at) is None  # nothing found, nothing to say


@pytest.mark.parametrize(
    "page",
    [
        "dashboard/overview.py",
        "dashboard/sufficiency.py",
        "dashboard/collapse.py",
        "dashboard/corpus.py",
        "dashboard/validation.py",
    ],
)
def test_failed_run_pages_say_it_failed(open_page, failed_run, page):
    at = open_page(page, failed_run)
    assert "This run failed" in page_texts(at)


def test_runs_page_lists_every_run(open_page, labelled_run, unlabelled_run, failed_run):
    at = open_page("dashboard/runs.py", labelled_run)
    table = at.dataframe[-1].value
    assert {labelled_run.id, unlabelled_run.id, failed_run.id} <= set(table["id"])


def test_runs_page_shows_worker_processes_of_an_active_run(tmp_path, monkeypatch, small_corpus_path):
    from flare_core.data.corpus import load_corpus
    from flare_core.run.create import create_run
    from flare_core.run.params import RunParams
    from flare_core.store.runs import RunStore

    store = RunStore(tmp_path / "runs")
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    run = create_run(store, corpus, RunParams(models=["glove-6b-50d"], workers=2, controls=[]))
    run.update(  # a created run counts as active until a worker picks it up
        workers={
            "node-a:101": {"units": 3, "failed": 0, "busy_s": 4.5, "stage": "sufficiency_flow",
                           "last_unit": "conditional: a → b", "last_seen": "2026-11-22T10:00:00Z"},
            "node-b:202": {"units": 2, "failed": 1, "busy_s": 2.0, "stage": "embeddings",
                           "last_unit": "glove-6b-50d", "last_seen": "2026-11-22T10:00:01Z"},
        },
    )  # fmt: skip
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = run.id
    at.run()
    at.switch_page("dashboard/runs.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Worker processes" in page_texts(at)
    table = next(d.value for d in at.dataframe if "worker" in d.value.columns)
    assert list(table["worker"]) == ["worker 1", "worker 2"]  # numbered, not a machine name and a process id
    assert list(table["units"]) == [3, 2] and list(table["failed"]) == [0, 1]


def test_bad_run_link_is_refused(fixture_store, monkeypatch, labelled_run):
    monkeypatch.setenv("FLARE_RUNS_DIR", str(fixture_store.root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = "../../etc"
    at.run()
    assert not at.exception
    assert any("invalid run id" in e.value for e in at.error)


@pytest.mark.parametrize(
    ("link", "said"), [("../../etc", "invalid run id"), ("no-such-run", "No run `no-such-run`")]
)
def test_a_bad_run_link_is_refused_by_a_store_without_runs(tmp_path, monkeypatch, link, said):
    monkeypatch.setenv("FLARE_RUNS_DIR", str(tmp_path / "empty"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = link
    at.run()
    assert not at.exception
    assert any(said in e.value for e in [*at.error, *at.warning]), [e.value for e in [*at.error, *at.warning]]
    assert "No runs yet. Start one on **New run**." in [i.value for i in at.info]


def test_viewer_only_mode_opens_nothing_without_a_share_link(fixture_store, monkeypatch, labelled_run):
    monkeypatch.setenv("FLARE_RUNS_DIR", str(fixture_store.root))
    monkeypatch.setenv("FLARE_VIEWER_ONLY", "1")
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = labelled_run.id
    at.run()
    assert not at.exception
    assert [t.value for t in at.title] == ["FLARE Studio"]
    assert [i.value for i in at.info] == ["This dashboard opens with a share link from its owner."]
    assert _opens_nothing(at)  # no page is registered at all
    assert os.environ["FLARE_VIEWER_ONLY"] == "1"


def test_corpus_page_says_when_long_texts_were_cut(open_page, labelled_run):
    corpus = labelled_run.manifest["corpus"]
    note = "1 of 50 texts longer than 100,000 characters was cut to the first 100,000 characters"
    labelled_run.update(corpus={**corpus, "stats": {**corpus.get("stats", {}), "truncation_note": note}})
    try:
        at = open_page("dashboard/corpus.py", labelled_run)
        assert note in [shown(w.value) for w in at.warning]
    finally:
        labelled_run.update(corpus=corpus)
    assert note not in [shown(w.value) for w in open_page("dashboard/corpus.py", labelled_run).warning]


def test_the_new_link_box_goes_when_its_link_is_revoked(unlabelled_run, tmp_path, monkeypatch):
    """The box that shows a new link once ("Copy it now") is gone after that link is revoked, on the page
    or from the command line, and nothing else of it stays on screen."""
    import shutil

    from flare_core.store import shares
    from flare_core.store.runs import RunStore

    store = RunStore(tmp_path / "runs")
    shutil.copytree(unlabelled_run.path, store.root / unlabelled_run.id)
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = unlabelled_run.id
    at.run()
    at.switch_page("dashboard/runs.py")
    at.run()
    at.button(key="share-create").click().run()
    (link,) = shares.list_links(store, unlabelled_run.id)
    assert f"Link `{link.prefix}` created. Copy it now" in page_texts(at)
    assert any("share=" in c.value for c in at.code)
    at.selectbox(key="share-revoke").set_value(link.prefix).run()
    at.button(key="share-revoke-button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert shares.list_links(store, unlabelled_run.id)[0].state() == "revoked"
    assert "Copy it now" not in page_texts(at) and not any("share=" in c.value for c in at.code)
    # revoked elsewhere (flare share RUN --revoke PREFIX) while the box is shown: gone at the next rerun
    at.button(key="share-create").click().run()
    second = next(x for x in shares.list_links(store, unlabelled_run.id) if x.state() == "active")
    assert f"Link `{second.prefix}` created" in page_texts(at)
    shares.revoke_links(store, unlabelled_run.id, second.prefix)
    at.run()
    assert "Copy it now" not in page_texts(at) and not any("share=" in c.value for c in at.code)
