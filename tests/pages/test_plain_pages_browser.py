"""Pages a non-coder trusts (issue 52, part 3), in a real headless Chromium against ``flare app``: tables
read numbers to 3 significant figures and dates as dates under headings in words; a run's empty vectors are
said where its results are; runs read as their name, short id and time, and one started from New run stays
said (and cannot be started twice by mistake); the search check speaks of searches and shows each document
whole; New run's settings speak plainly.

A grid's words are read from the table Streamlit's data grid keeps for screen readers (each cell as the grid
holds it: the pages round numbers to the figures they show, so this is what a person reads)."""

from __future__ import annotations

import re
import shutil
import time

import numpy as np
import pytest

from flare_core.answer import few_judgements as fj
from flare_core.answer.write import write_verdict
from flare_core.run import jobs
from flare_core.store import shares
from flare_core.store.runs import RunStore
from tests.pages.app_process import BROWSER_MARKS, ROOT, headless_chromium, start_app, stop_app
from tests.support import shown

pytestmark = BROWSER_MARKS
SHOTS = ROOT / "test-output" / "screenshots"
#: Every grid of the page: its headings and cells as the grid holds them.
GRIDS = """() => [...document.querySelectorAll('table[role=grid]')].map(t => ({
    head: [...t.querySelectorAll('th')].map(x => x.textContent),
    rows: [...t.querySelectorAll('tbody tr')].map(r => [...r.querySelectorAll('td')].map(x => x.textContent))
}))"""
READY = """(title) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const h = document.querySelector('h1');
    return !!app && app.dataset.testScriptState === 'notRunning' && !!h && h.innerText.includes(title)
        && !document.querySelector('[data-testid="stSkeleton"]');
}"""
NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?")
#: The issue's internal column names.
INTERNAL = ("nll_marg_train", "is_per_dim", "is_raw_nats", "_")
DATE = re.compile(r"\d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d UTC")
EMPTY = "3 texts had no known words for tfidf-svd-256: it gave them empty vectors."


def _significant(cell: str) -> int:
    """The significant figures of a fraction written as ``cell`` ("0.0539": 3, "3.862822239852903e-8": 16)."""
    return len(cell.lstrip("-").split("e")[0].replace(".", "").lstrip("0"))


@pytest.fixture(scope="module")
def store(labelled_run, unlabelled_run, tmp_path_factory):
    """The labelled run whose tfidf-svd-256 gave 3 texts empty vectors, with a share link; the static run
    checked with one judged search (its answer comes from the judgements)."""
    store = RunStore(tmp_path_factory.mktemp("plain-runs"))
    for source in (labelled_run, unlabelled_run):
        shutil.copytree(source.path, store.root / source.id)
    labelled = store.get(labelled_run.id)
    path = labelled.embedding_path("tfidf-svd-256")
    vectors = np.load(path)
    vectors[[3, 7, 11]] = 0.0
    np.save(path, vectors)
    shares.create_link(store, labelled.id)
    searched = store.get(unlabelled_run.id)
    (query,) = fj.add_queries(searched, ["the football team won the match"])
    pool = fj.load_search_judgements(searched).pool(query)
    fj.add_judgements(searched, [(query, row, int(n < 2)) for n, row in enumerate(pool)])
    write_verdict(searched)
    return store


@pytest.fixture(scope="module")
def app(store):
    proc, url = start_app(store.root)
    yield url
    stop_app(proc)


@pytest.fixture(scope="module")
def page(app):
    with headless_chromium() as browser:
        tab = browser.new_page(viewport={"width": 1500, "height": 2400})
        yield tab
        tab.close()


def _open(page, url: str, title: str) -> None:
    page.goto(url, wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_function(READY, arg=title, timeout=90_000)


def _grids(page) -> list[dict]:
    """Every grid of the page, once one has drawn its rows (they are drawn after the script has finished,
    later on a loaded machine), then half a second for the others."""
    page.wait_for_function(f"() => ({GRIDS})().some(g => g.rows.length > 0)", timeout=30_000)
    page.wait_for_timeout(500)
    return page.evaluate(GRIDS)


def _grid(grids: list[dict], heading: str) -> dict:
    return next(g for g in grids if heading in g["head"])


def _assert_plain(grids: list[dict], where: str) -> None:
    """No heading is an internal name; no fraction shows more than 3 significant figures (whole numbers are
    counts, shown whole)."""
    assert grids, f"{where}: no table drawn"
    for grid in grids:
        assert not [h for h in grid["head"] if any(name in h for name in INTERNAL)], (where, grid["head"])
        for row in grid["rows"]:
            long = [c for c in row if NUMBER.fullmatch(c) and ("." in c or "e" in c) and _significant(c) > 3]
            assert not long, (where, grid["head"], long)


def test_tables_read_numbers_to_three_figures_under_headings_in_words(app, page, store):
    _open(page, f"{app}/corpus?run=fixture-labelled", "Corpus")
    grids = _grids(page)
    _assert_plain(grids, "corpus")
    embeddings = _grid(grids, "texts with empty vectors")
    assert "average length of its vectors" in embeddings["head"]
    column = embeddings["head"].index("texts with empty vectors")
    assert {r[0]: r[column] for r in embeddings["rows"]}["tfidf-svd-256"] == "3"
    _open(page, f"{app}/sufficiency?run=fixture-labelled", "Information sufficiency")
    grids = _grids(page)
    _assert_plain(grids, "sufficiency")
    pairs = _grid(grids, "from model")
    assert "fit alone, training texts (nats)" in pairs["head"]
    _open(page, f"{app}/validation?run=fixture-labelled", "Validation")
    page.get_by_text("Stability of the ranking").first.wait_for(timeout=60_000)
    grids = _grids(page)
    _assert_plain(grids, "validation")
    aggregation = _grid(grids, "how the targets are combined")
    assert [r[0] for r in aggregation["rows"]] == ["median", "mean", "trimmed mean (10%)"]


def test_empty_vectors_are_said_where_the_models_results_are(app, page):
    _open(page, f"{app}/?run=fixture-labelled", "Overview")
    page.get_by_text("Models", exact=True).first.wait_for(timeout=60_000)
    assert EMPTY in shown(page.inner_text("body"))
    grids = _grids(page)
    ranking = _grid(grids, "likely between")
    notes = {r[ranking["head"].index("model")]: r[ranking["head"].index("notes")] for r in ranking["rows"]}
    assert "3 texts got empty vectors" in notes["tfidf-svd-256"]
    assert not [m for m, n in notes.items() if "empty" in n and m != "tfidf-svd-256"]
    models = _grid(grids, "seconds to embed")
    assert "notes" in models["head"], str(models["head"])
    notes = {r[0]: r[models["head"].index("notes")] for r in models["rows"]}
    assert notes["tfidf-svd-256"] == "3 texts got empty vectors" and notes["glove-6b-50d"] == "", notes


def test_runs_read_as_name_time_and_short_id_and_share_names_the_run(app, page, store):
    run = store.get("fixture-labelled")
    created = run.manifest["created"]  # "2026-11-28T01:45:46+00:00"
    _open(page, f"{app}/runs?run=fixture-labelled", "Runs")
    page.get_by_text("Create link").first.wait_for(timeout=60_000)
    grids = _grids(page)
    table = _grid(grids, "started")
    row = next(r for r in table["rows"] if r[0] == "labelled fixture")
    when = row[table["head"].index("started")]
    assert DATE.fullmatch(when), when
    assert row[table["head"].index("id")] == run.id  # an id of its own form (not made by new_run_id): whole
    links = _grid(grids, "shows")
    assert DATE.fullmatch(links["rows"][0][links["head"].index("created")])  # not 2026-11-28T01:45:46+00:00
    assert created not in page.content()
    text = shown(page.inner_text("body"))
    assert "Share labelled fixture" in text and "Share this run" not in text
    assert f"labelled fixture ({run.id}, {when})" in text


def test_the_search_check_speaks_of_searches_and_shows_each_passage_then_document(app, page, store):
    run = store.get("fixture-static")
    _open(page, f"{app}/labels?run=fixture-static", "Check with a few searches")
    page.get_by_text("2. Mark what answers it").wait_for(timeout=60_000)
    text = shown(page.inner_text("body"))
    assert "Check with a few labels" not in page.locator("h1").first.inner_text()
    assert "From your judgements so far" in text and "From your labels so far" not in text
    assert "A few searches settle which model finds what you look for" in text
    assert "Name the categories" not in text
    judged = fj.load_search_judgements(run)
    texts = run.corpus_frame()["text"]
    (query,) = judged.ids
    row = max(judged.shown(query), key=lambda r: len(str(texts[r])))
    longest = " ".join(str(texts[row]).split())
    assert len(longest) > 300 and longest not in " ".join(text.split())  # a passage of it first
    box = page.locator("[class*='st-key-pooled-']").filter(has_text=f"row {row} of your corpus")
    box.get_by_text("Show all").click()  # then the whole document, not its first line
    box.get_by_text(longest[:40]).last.wait_for(timeout=30_000)
    assert longest in " ".join(box.inner_text().split())
    boxes = page.get_by_role("checkbox", name=re.compile(r"Document \d+ answers the query"))
    assert boxes.count() == len(judged.shown(query))


def _upload(page, url: str, corpus_path) -> None:
    """New run with ``corpus_path`` uploaded and its settings open."""
    _open(page, f"{url}/new_run", "New run")
    page.locator("[data-testid='stFileUploaderDropzoneInput']").first.set_input_files(str(corpus_path))
    page.get_by_text("50 texts to analyse").first.wait_for(timeout=60_000)
    page.get_by_text("Analysis settings").click()
    page.wait_for_function(READY, arg="New run", timeout=60_000)


def test_new_run_speaks_plainly_with_the_terms_in_the_help(app, page, small_corpus_path):
    _upload(page, app, small_corpus_path)
    text = shown(page.inner_text("body"))
    for jargon in ("flare models --measure", "Information-sufficiency estimator", "IS targets only",
                   "Texts for SOCM", "Built-in models and controls", "SOCM", "gmm", "supervised oracle",
                   "normalizing flows", "nats per dimension", "EMIR", "TREC pooling"):  # fmt: skip
        assert jargon not in text, jargon
    assert "explained in the Glossary (under Help)" in text  # where the terms are, for who wants them
    for words in ("How to measure what the models know about each other", "mixtures (fast, rougher)",
                  "Models to compare against, not ranked", "Texts compared two by two"):  # fmt: skip
        assert words in text, words


def test_a_run_started_on_new_run_stays_said_and_is_not_started_twice(app, page, store, small_corpus_path):
    before = {m["id"] for m in store.list()}
    _upload(page, app, small_corpus_path)
    page.get_by_text("5 points of the best").click()  # "good enough", kept with the run
    page.wait_for_function(READY, arg="New run", timeout=60_000)
    start = page.get_by_role("button", name="Start run")
    start.click()
    page.get_by_text("Started:").first.wait_for(timeout=60_000)
    (run_id,) = {m["id"] for m in store.list()} - before
    run = store.get(run_id)
    try:
        assert run.manifest["params"]["tolerance_points"] == 5.0
        deadline = time.monotonic() + 120
        while run.manifest.get("status") == "queued" and time.monotonic() < deadline:
            time.sleep(0.2)  # the run's status changes: every page of the session is drawn again
        page.wait_for_timeout(8_000)
        page.wait_for_function(READY, arg="New run", timeout=60_000)
        said = shown(page.locator("[data-testid='stAlert']").first.inner_text())
        assert f"Started: bbc50 ({run_id.rsplit('-', 1)[1]}, " in said and "with 50 texts" in said, said
        assert page.get_by_role("link", name="Open it").count() == 1
        assert not start.is_enabled()
        assert "You already started this file with these settings" in shown(page.inner_text("body"))
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "new-run-started.png"), full_page=True)
    finally:
        jobs.cancel(store, run_id)
        jobs.wait(store, run_id, timeout=120)
