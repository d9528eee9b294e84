"""The dashboard in a real headless Chromium, started by ``flare app``: every page of a stored run renders
its charts and no exception box; an embeddings-only run started on the New run page is followed live.

Screenshots go to ``test-output/screenshots/``: one PNG per page of the stored run, and ``during-*`` and
``after-*`` for every page of the live run (kept by CI as artefacts).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from flare_core.answer.stored import load_verdict
from tests.pages.app_process import BROWSER_MARKS, ROOT, headless_chromium, start_app, stop_app

SHOTS = ROOT / "test-output" / "screenshots"
# (url path, text that must appear, whether a plotly chart must render)
PAGES = [
    ("", "What the labels say", True),
    ("sufficiency", "Which model tells about which", True),
    ("corpus", "Embedding map", True),
    ("collapse", "Most-collapsed pairs", True),
    ("layers", "Layer-wise concentration", True),
    ("validation", "Stability of the ranking", True),
    ("runs", "Runs", False),
    ("new_run", "Upload a corpus", False),
]

PAGE_PATHS = ["", "sufficiency", "corpus", "collapse", "layers", "validation", "runs", "new_run"]
#: Analysis pages that open with a plain-language verdict (a container keyed page-verdict).
VERDICT_PAGES = ["", "sufficiency", "corpus", "collapse", "layers", "validation"]
#: The same for a run of uploaded embeddings only: no token states, so no collapse or layer verdict.
EMBEDDINGS_ONLY_VERDICT_PAGES = ["", "sufficiency", "corpus", "validation"]
VERDICT = ".st-key-page-verdict"
#: Names from the code that must never reach the screen (stage ids, manifest fields).
INTERNAL_NAMES = ("sufficiency_flow", "sufficiency_gmm", "busy_s", "last_unit", "last_seen", "n_texts")

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def browser_store(tmp_path_factory):
    """A store of its own for the dashboard: the live run must not join the shared fixture store."""
    from flare_core.store.runs import RunStore

    return RunStore(tmp_path_factory.mktemp("browser-runs"))


@pytest.fixture(scope="module")
def stored_run(labelled_run, browser_store):
    """A copy of the labelled fixture run in the dashboard's store."""
    shutil.copytree(labelled_run.path, browser_store.root / labelled_run.id)
    return browser_store.get(labelled_run.id)


@pytest.fixture(scope="module")
def tab(browser):
    """One tab that the tests of a stored run's pages share, each opening its page's address in it: a new
    tab costs Chromium about twice the CPU of opening an address in an open one (a new renderer)."""
    page = browser.new_page(viewport={"width": 1400, "height": 2200})
    yield page
    page.close()


@pytest.fixture(scope="module")
def app_server(browser_store, tab):
    """``(url, pid of the Streamlit process)`` of ``flare app`` serving ``browser_store``."""
    proc, url = start_app(browser_store.root)
    (streamlit_pid,) = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    # the first session of a fresh server, opened at a page's address, gets the app's own navigation (a
    # folder named pages/ beside app.py would make Streamlit list its files there instead)
    tab.goto(f"{url}/runs", wait_until="domcontentloaded", timeout=60_000)
    sidebar = tab.locator("[data-testid='stSidebar']")
    sidebar.get_by_text("FLARE Studio").first.wait_for(timeout=60_000)
    assert "findings" not in sidebar.inner_text() and "common" not in sidebar.inner_text()
    yield url, int(streamlit_pid)
    stop_app(proc)


@pytest.fixture(scope="module")
def app_url(app_server):
    return app_server[0]


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as launched:
        yield launched


@pytest.mark.parametrize(("path", "expected", "chart"), PAGES)
def test_page_renders_in_chromium(app_url, tab, stored_run, path, expected, chart):
    tab.goto(f"{app_url}/{path}?run={stored_run.id}", wait_until="domcontentloaded", timeout=60_000)
    tab.get_by_text(expected, exact=False).first.wait_for(timeout=60_000)
    if chart:
        tab.locator(".js-plotly-plot .main-svg, .js-plotly-plot canvas").first.wait_for(timeout=60_000)
    _drawn(tab)  # the script has finished: nothing is left to draw before the screenshot
    assert tab.locator("[data-testid='stException']").count() == 0, tab.locator(
        "[data-testid='stException']"
    ).first.inner_text()
    if path in VERDICT_PAGES:
        verdict = tab.locator(VERDICT).first.inner_text()
        assert "appears when" not in verdict and len(verdict.split()) >= 8, verdict
    _assert_no_internal_names(tab, path)
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{path or 'overview'}.png"), full_page=True)


def test_the_overview_draws_quality_against_cost_in_chromium(app_url, tab, stored_run):
    tab.goto(f"{app_url}/?run={stored_run.id}", wait_until="domcontentloaded", timeout=60_000)
    tab.get_by_text("Cheapest within 2 points of the best", exact=False).first.wait_for(timeout=60_000)
    chart = tab.locator(".js-plotly-plot").filter(has_text="Quality against speed")
    chart.locator(".main-svg").first.wait_for(timeout=60_000)
    assert (
        chart.locator(".scatterlayer .point").count() == len(stored_run.manifest["models"]) - 2
    )  # no controls
    tab.get_by_text("storage (bytes per vector)").click()
    tab.locator(".js-plotly-plot").filter(has_text="Quality against storage").first.wait_for(timeout=60_000)
    _shoot(tab, "overview-quality-cost")


def _drawn(page) -> None:
    """Wait until the page's script has drawn a title and finished, with no placeholder left."""
    page.wait_for_function(
        """() => {
            const app = document.querySelector('[data-testid="stApp"]');
            return !!app && app.dataset.testScriptState === 'notRunning' && !!document.querySelector('h1')
                && !document.querySelector('[data-testid="stSkeleton"]');
        }""",
        timeout=60_000,
    )


def _assert_no_internal_names(page, path: str) -> None:
    text = page.inner_text("body")
    shown = [name for name in INTERNAL_NAMES if name in text]
    assert not shown, f"page '{path or 'overview'}' shows internal names {shown}"


def _shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _embedding_files(folder: Path, corpus_path: Path) -> list[Path]:
    """Three embeddings of the corpus's texts: its topics plus noise at three levels (a best, c worst)."""
    import numpy as np
    import pandas as pd

    labels = pd.read_csv(corpus_path)["label"]
    topics = pd.get_dummies(labels).to_numpy(dtype=np.float64)
    rng = np.random.default_rng(0)
    paths = []
    for name, noise in (("a", 0.3), ("b", 1.0), ("c", 3.0)):
        mixed = topics @ rng.normal(size=(topics.shape[1], 12)) + rng.normal(
            scale=noise, size=(len(labels), 12)
        )
        paths.append(folder / f"{name}.npy")
        np.save(paths[-1], mixed.astype(np.float32))
    return paths


def test_embeddings_only_run_started_on_new_run_is_followed_live(
    app_url, browser, tab, browser_store, small_corpus_path, tmp_path
):
    """New run with three named embeddings files and no model: Start works, the sidebar moves to the run,
    its Overview turns from "being computed" to the verdict without a reload, every page is shot during
    and after the run, and no page shows an internal name."""
    from flare_core.view.verdict import verdict_view

    before = {m["id"] for m in browser_store.list()}
    form = tab  # the New run form; once the run has started, its tab visits the pages while it works
    overview = browser.new_page(viewport={"width": 1400, "height": 1600})
    try:
        form.goto(f"{app_url}/new_run", wait_until="domcontentloaded", timeout=60_000)
        form.get_by_text("FLARE Studio").first.wait_for(timeout=60_000)  # the app's first run has finished
        uploads = form.locator("[data-testid='stFileUploaderDropzoneInput']")
        uploads.first.set_input_files(str(small_corpus_path))
        form.get_by_text("50 texts to analyse").first.wait_for(timeout=60_000)
        form.get_by_text("5 classes, 10 to 10 texts each").first.wait_for(timeout=10_000)
        embeddings = form.locator(
            "[data-testid='stFileUploaderDropzoneInput'][multiple]"
        )  # the one of many files
        embeddings.set_input_files([str(p) for p in _embedding_files(tmp_path, small_corpus_path)])
        for name in ("a", "b", "c"):
            form.get_by_label(f"Name of {name}.npy").fill(f"api-{name}")
        form.get_by_label("Name of c.npy").press("Tab")
        form.get_by_text("50 rows × 12 dimensions").nth(2).wait_for(timeout=30_000)
        models = form.locator("[data-testid='stMultiSelect']").first
        models.locator("input").click()
        for _ in range(20):  # untick every built-in model
            if models.inner_text().strip() == "Built-in models":
                break
            form.keyboard.press("Backspace")
            form.wait_for_timeout(200)
        form.keyboard.press("Escape")
        assert models.inner_text().strip() == "Built-in models"  # no model left
        form.get_by_text("Analysis settings").click()
        form.get_by_text("mixtures (fast, rougher)", exact=True).first.click()
        form.get_by_label("Run name").fill("embeddings only")
        form.get_by_label("Run name").press("Tab")
        start = form.get_by_role("button", name="Start run")
        deadline = time.monotonic() + 30
        while not start.is_enabled() and time.monotonic() < deadline:  # the rerun after the name was typed
            form.wait_for_timeout(50)
        assert start.is_enabled()
        start.click()
        form.get_by_text("with 50 texts").first.wait_for(timeout=60_000)
        (run_id,) = {m["id"] for m in browser_store.list()} - before
        run = browser_store.get(run_id)
        assert [(m["id"], m["kind"]) for m in run.manifest["models"] if m["role"] == "candidate"] == [
            ("api-a", "precomputed"), ("api-b", "precomputed"), ("api-c", "precomputed")
        ]  # fmt: skip
        picker = form.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first
        picker.wait_for(timeout=30_000)
        shown = picker.inner_text() + " ".join(
            picker.locator("input").evaluate_all("els => els.map(e => e.value)")
        )
        assert "embeddings only" in shown, shown  # the sidebar follows the run
        assert f"run={run_id}" in form.url

        overview.goto(f"{app_url}/?run={run_id}", wait_until="domcontentloaded", timeout=60_000)
        overview.locator(VERDICT).first.wait_for(timeout=60_000)
        assert run.status in ("queued", "running"), "the run ended before its Overview was open"
        assert "appears when" in overview.locator(VERDICT).first.inner_text()
        overview.evaluate("window.flareNoReload = true")
        _shoot(overview, "during-overview")
        _assert_no_internal_names(overview, "")

        for path in PAGE_PATHS[1:]:
            form.goto(f"{app_url}/{path}?run={run_id}", wait_until="domcontentloaded", timeout=60_000)
            form.locator("h1").first.wait_for(timeout=60_000)
            _drawn(form)
            assert form.locator("[data-testid='stException']").count() == 0, path
            _assert_no_internal_names(form, path)
            _shoot(form, f"during-{path}")
        form.goto("about:blank")  # the form's tab stops refreshing: only the Overview's tab follows the run

        overview.bring_to_front()
        overview.locator(VERDICT).get_by_text("appears when").wait_for(state="detached", timeout=180_000)
        assert overview.evaluate("window.flareNoReload") is True  # the same document: no reload
        deadline = time.monotonic() + 120
        while run.status != "done" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run.status == "done", run.manifest.get("error")
        headline = verdict_view(load_verdict(run)).headline
        overview.locator(VERDICT).get_by_text(headline, exact=False).first.wait_for(timeout=30_000)
        ranked = set(run.load_frame("summary.parquet")["model"])
        assert {"api-a", "api-b", "api-c"} <= ranked

        for path in PAGE_PATHS:
            overview.goto(f"{app_url}/{path}?run={run_id}", wait_until="domcontentloaded", timeout=60_000)
            overview.locator("h1").first.wait_for(timeout=60_000)
            _drawn(overview)
            assert overview.locator("[data-testid='stException']").count() == 0, path
            assert "This run is running" not in overview.inner_text("body")
            if path in EMBEDDINGS_ONLY_VERDICT_PAGES:
                assert "appears when" not in overview.locator(VERDICT).first.inner_text()
            _assert_no_internal_names(overview, path)
            _shoot(overview, f"after-{path or 'overview'}")
    finally:
        overview.close()


def test_file_watcher_is_off(app_server, tab):
    """``flare app`` turns Streamlit's file watcher off: with a session open, its process holds no inotify
    watch (with the watcher on it holds one; it used to watch the run store)."""
    url, pid = app_server
    tab.goto(url, wait_until="domcontentloaded", timeout=60_000)
    tab.get_by_text("FLARE Studio").first.wait_for(timeout=60_000)
    descriptors = Path(f"/proc/{pid}/fd")
    targets = []
    for fd in descriptors.iterdir():
        try:
            targets.append(os.readlink(fd))
        except OSError:
            continue
    assert targets and not [t for t in targets if "inotify" in t]


def test_unsafe_run_link_is_refused_in_the_browser(app_url, tab):
    tab.goto(f"{app_url}/?run=../../etc", wait_until="domcontentloaded", timeout=60_000)
    tab.get_by_text("invalid run id", exact=False).first.wait_for(timeout=60_000)
    assert tab.locator("[data-testid='stException']").count() == 0
