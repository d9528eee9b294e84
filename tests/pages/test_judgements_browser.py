"""Search judgements given on the New run page, in a real headless Chromium: a bad judgements file is refused
with its reason and Start stays off; good ones are counted under the field and the run started stores them
(the pipeline's tests, tests/run/test_search_labels.py, show such a run recommending a model by nDCG@10)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from flare_core.data.demo import bbc_news_frame
from flare_core.data.judgements import JUDGEMENTS
from flare_core.run import jobs
from flare_core.store.runs import RunStore
from tests.pages.app_process import BROWSER_MARKS, headless_chromium, start_app, stop_app
from tests.support import STATIC, write_judged_files

pytestmark = BROWSER_MARKS


def _files(folder: Path) -> dict[str, Path]:
    """Documents with ids; 12 queries, each with its own article graded 2 and another of its topic graded 1;
    and a judgements file naming a document that does not exist."""
    _, qrels = write_judged_files(folder, bbc_news_frame(n_per_topic=6, seed=1))
    bad = pd.concat([qrels, pd.DataFrame([["q0", "doc-999", 1]], columns=qrels.columns)])
    bad.to_csv(folder / "bad-qrels.tsv", sep="\t", index=False)
    return {name: folder / name for name in ("docs.csv", "queries.csv", "qrels.tsv", "bad-qrels.tsv")}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("judged-runs"))
    proc, url = start_app(store.root)
    with headless_chromium() as browser:
        yield url, browser, store
    stop_app(proc)


def _start_enabled(page, seconds: float = 30) -> bool:
    """Whether Start is on once the page's script has finished (waiting up to ``seconds`` for it to turn on)."""
    page.wait_for_function(
        "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState === 'notRunning'",
        timeout=60_000,
    )
    start = page.get_by_role("button", name="Start run")
    deadline = time.monotonic() + seconds
    while not start.is_enabled() and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    return start.is_enabled()


def _stop(store: RunStore, run) -> None:
    """Cancel the run; a worker still busy after 30 s (its checkpoints come between units) is ended."""
    jobs.cancel(store, run.id)
    deadline = time.monotonic() + 30
    while run.status not in ("done", "failed", "cancelled") and time.monotonic() < deadline:
        time.sleep(0.2)
    pid = run.manifest.get("pid")
    if run.status not in ("done", "failed", "cancelled") and pid:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(int(pid)), signal.SIGKILL)


def _upload_until(page, upload, path: Path, shown: str, tries: int = 3) -> None:
    """Give ``upload`` the file ``path`` until the page shows ``shown``: a rerun of the page that is still
    under way (the previous upload's) can replace the uploader and drop a file given to it meanwhile."""
    for attempt in range(tries):
        upload.set_input_files(str(path))
        try:
            page.get_by_text(shown).first.wait_for(timeout=30_000)
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise


def test_judgements_on_the_new_run_page_are_checked_and_stored(app, tmp_path):
    url, browser, store = app
    files = _files(tmp_path)
    page = browser.new_page(viewport={"width": 1400, "height": 2600})
    try:
        page.goto(f"{url}/new_run", wait_until="domcontentloaded", timeout=60_000)
        page.get_by_text("FLARE Studio").first.wait_for(timeout=60_000)
        uploads = page.locator("[data-testid='stFileUploaderDropzoneInput']")
        uploads.first.set_input_files(str(files["docs.csv"]))
        page.get_by_text("30 texts to analyse").first.wait_for(timeout=60_000)
        page.get_by_text("Search judgements (optional)").click()
        page.get_by_label("Judgements file").wait_for(state="attached", timeout=30_000)
        qrels_input, queries_input = uploads.nth(1), uploads.nth(2)
        queries_input.set_input_files(str(files["queries.csv"]))
        _upload_until(page, qrels_input, files["bad-qrels.tsv"], "not among the 30 documents of the run")
        assert not _start_enabled(page, seconds=2)  # refused: nothing can start

        _upload_until(page, qrels_input, files["qrels.tsv"], "24 judgements of 12 queries")
        models = page.locator("[data-testid='stMultiSelect']").first
        models.locator("input").click()
        for _ in range(20):  # untick every built-in model, then choose two static ones
            if models.inner_text().strip() == "Built-in models":
                break
            page.keyboard.press("Backspace")
            page.wait_for_timeout(200)
        for model in STATIC:
            page.keyboard.type(model)
            page.keyboard.press("Enter")
            page.wait_for_timeout(300)
        page.keyboard.press("Escape")
        assert all(m in models.inner_text() for m in STATIC)
        page.get_by_text("Analysis settings").click()
        page.get_by_text("mixtures (fast, rougher)", exact=True).first.click()
        assert _start_enabled(page)
        page.get_by_role("button", name="Start run").click()
        page.get_by_text("with 30 texts").first.wait_for(timeout=60_000)
        (summary,) = store.list()
        run = store.get(summary["id"])
        assert run.load_frame(JUDGEMENTS)["relevance"].tolist() == [2, 1] * 12
        page.goto("about:blank")  # the page stops following the run (its refreshes took the CPU it needs)
        # the analysis itself (every stage: minutes on 2 cores) is the pipeline tests' (tests/run): stop it
        _stop(store, run)
    finally:
        page.close()
