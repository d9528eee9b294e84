"""The whole few-labels task in a real headless Chromium against ``flare app``: on a run without labels,
name two categories, label 8 of the 16 texts the page's table shows, see the answer and the chances change;
export the run from the Runs page and kill the server (the labels and the answer stay in its store); import
the bundle elsewhere, start a server there and find the 8 labels and the same answer on the page.

The run holds planted embeddings (``tests.support.planted``): ``clear`` separates the classes, ``noise``
(the widest) does not, so the label-free choice is ``noise`` and the labels must move the answer.
"""

from __future__ import annotations

import contextlib
import json
import signal

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from flare_core.answer.from_labels import next_texts
from flare_core.answer.labels import load_labels
from flare_core.answer.stored import VERDICT_FILE, load_verdict
from tests.pages.app_process import BROWSER_MARKS, ROOT, headless_chromium, start_app, stop_app
from tests.support import flare_here, planted_run

SHOTS = ROOT / "test-output" / "screenshots"
pytestmark = BROWSER_MARKS
SHOWN, LABELLED = 16, 8  # the texts the page's table shows, and how many of them are labelled


def _open_labels(page, url: str, run_id: str) -> None:
    page.goto(f"{url}/labels?run={run_id}", wait_until="domcontentloaded", timeout=60_000)
    page.get_by_text("1. The categories").wait_for(timeout=90_000)


def _shown_answer(page) -> str:
    box = page.locator(".st-key-labels-verdict")
    box.wait_for(timeout=60_000)
    return box.inner_text()


def test_label_eight_texts_restart_and_carry_them_in_a_bundle(tmp_path):
    run, truth = planted_run(tmp_path, with_labels=False)
    runs_dir = run.path.parent
    before = load_verdict(run)
    assert before["basis"] == "label-free" and before["recommended"] == "noise"
    category = {"sport": "sport", "politics": "politics", "tech": "politics"}  # two categories
    SHOTS.mkdir(parents=True, exist_ok=True)
    proc, url = start_app(runs_dir)
    try:
        with headless_chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 2200}, accept_downloads=True)
            _open_labels(page, url, run.id)
            page.get_by_role("textbox", name="Categories, separated by commas").fill("sport, politics")
            page.keyboard.press("Enter")
            page.get_by_role("button", name="Save the categories").click()
            page.get_by_text("0 texts labelled so far").wait_for(timeout=60_000)
            assert load_labels(run).categories == ["sport", "politics"]
            # the table shows the 16 texts the product chose: label the first 8 by their true class, cell by
            # cell (8 labels already move the answer to the class-separating model)
            rows = next_texts(run, load_labels(run), SHOWN)["row"].tolist()[:LABELLED]
            grid = page.locator('[data-testid="stDataFrameResizable"]').first
            grid.wait_for(timeout=60_000)
            box = grid.bounding_box()
            row_height = (box["height"] - 40) / SHOWN
            for i, row in enumerate(rows):
                # each edit is kept once the page counts it on its save button; a cell edit that a busy
                # machine missed is made again
                for _attempt in range(3):
                    page.mouse.dblclick(
                        box["x"] + box["width"] - 80, box["y"] + 35 + row_height * i + row_height / 2
                    )
                    page.wait_for_timeout(250)
                    page.keyboard.type(category[truth[row]])
                    page.keyboard.press("Enter")
                    counted = page.get_by_role("button", name=f"Save {i + 1} label(s)")
                    with contextlib.suppress(PlaywrightTimeout):
                        counted.wait_for(timeout=15_000)
                        break
            page.get_by_role("button", name=f"Save {LABELLED} label(s)").click()
            page.get_by_text(f"{LABELLED} texts labelled so far in 1 batch(es)").wait_for(timeout=90_000)
            saved = load_labels(run)
            assert saved.latest() == {r: category[truth[r]] for r in rows}  # what was picked in the table
            answer = _shown_answer(page)
            after = load_verdict(run)
            assert after["basis"] == "few labels" and after["headline"] in answer
            # the answer now reads the labels (8 of them do not yet overturn the benchmark's prior)
            assert after["headline"] != before["headline"] and f"after {LABELLED} labels" in after["headline"]
            assert after["recommended"] in after["headline"]
            assert "chance" in answer  # the chance that the leader is the best, in words
            page.screenshot(path=str(SHOTS / "labels-after-8.png"), full_page=True)

            page.goto(f"{url}/runs?run={run.id}", wait_until="domcontentloaded", timeout=60_000)
            page.get_by_role("button", name="Build run bundle (zip)").click()
            with page.expect_download(timeout=90_000) as download:
                page.get_by_role("button", name="Download bundle").click()
            bundle = tmp_path / "bundle.zip"
            download.value.save_as(bundle)
            stop_app(proc, signal.SIGKILL)  # the server dies; the labels were saved with the run
            assert load_labels(run).entries == saved.entries
            assert json.loads(run.artefact(VERDICT_FILE).read_text()) == after

            elsewhere = tmp_path / "elsewhere"  # another machine's store: the bundle imported there, read
            flare_here("import", str(bundle), runs_dir=elsewhere)  # by a server started after the kill
            proc, url = start_app(elsewhere)
            _open_labels(page, url, run.id)
            page.get_by_text(f"{LABELLED} texts labelled so far in 1 batch(es)").wait_for(timeout=90_000)
            assert after["headline"] in _shown_answer(page)
    finally:
        stop_app(proc)
    imported = json.loads(flare_here("show", run.id, "--json", runs_dir=elsewhere).stdout)
    assert imported["labels_given"]["entries"] == saved.entries
