"""The sidebar's run picker in a real headless Chromium: a run's status there follows the run without a
reload, on a page that has no refresh of its own."""

from __future__ import annotations

import re
import shutil

from flare_core.store.runs import RunStore
from tests.pages.app_process import BROWSER_MARKS, headless_chromium, start_app, stop_app

pytestmark = BROWSER_MARKS


def test_the_picker_shows_that_a_queued_run_has_finished_without_a_reload(unlabelled_run, tmp_path):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(unlabelled_run.path, store.root / unlabelled_run.id)
    run = store.get(unlabelled_run.id)
    proc, url = start_app(store.root)
    try:
        run.update(status="queued", pid=None)  # after the server's start: it does not start the run itself
        from playwright.sync_api import expect

        with headless_chromium() as browser:
            page = browser.new_page()
            page.goto(f"{url}/new_run?run={run.id}", wait_until="domcontentloaded", timeout=60_000)
            chosen = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox'] input")
            expect(chosen).to_have_value(re.compile("^static fixture · queued · "), timeout=60_000)
            run.update(status="done")  # as its worker leaves it
            expect(chosen).to_have_value(re.compile("^static fixture · done · "), timeout=20_000)
    finally:
        stop_app(proc)
