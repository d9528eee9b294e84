"""The sidebar's run picker in a real headless Chromium: a run's status there follows the run without a
reload, on a page that has no refresh of its own."""

from __future__ import annotations

import re
import shutil
import time

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


def _started_twice(unlabelled_run, store: RunStore) -> tuple[str, str]:
    """The same file started twice within one minute, the second time with another tolerance and use:
    two copies of a finished run, ``(older id, newer id)``, their names, statuses and minute alike."""
    ids = ("20261128-154005-0a0a0a", "20261128-154035-0b0b0b")
    for run_id, second, tolerance, use in zip(
        ids, ("05", "35"), (2.0, 5.0), ("unsure", "classifier"), strict=True
    ):
        shutil.copytree(unlabelled_run.path, store.root / run_id)
        run = store.get(run_id)
        params = {**run.manifest["params"], "tolerance_points": tolerance, "use": use}
        run.update(id=run_id, name="reviews", created=f"2026-11-28T15:40:{second}+00:00", params=params)
    return ids


def test_of_two_runs_started_within_a_minute_the_newer_is_shown_and_shared(unlabelled_run, tmp_path):
    from playwright.sync_api import expect

    from flare_core.store import shares
    from tests.pages.browser_sessions import Session, create_link_in_the_page

    store = RunStore(tmp_path / "runs")
    older, newer = _started_twice(unlabelled_run, store)
    proc, url = start_app(store.root)
    try:
        with headless_chromium() as browser:
            owner = Session(browser, url, [])
            owner.open(f"?run={newer}", "Overview")
            chosen = owner.page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox'] input")
            expect(chosen).to_have_value(re.compile(r"^reviews · done · 2026-11-28 15:40 · 0b0b0b · "))
            assert "within 5 points" in chosen.input_value() and "for classifier" in chosen.input_value()
            started = time.monotonic()  # any menu entry keeps the run chosen
            owner.page.locator("[data-testid='stSidebarNav']").get_by_role("link", name="Runs").click()
            owner.wait("Runs", started)
            owner.settle(800)
            assert f"run={newer}" in owner.page.url
            expect(chosen).to_have_value(re.compile("0b0b0b"))
            assert "(0b0b0b, " in owner.text() and "(0a0a0a, " not in owner.text()
            token = create_link_in_the_page(owner, figures_only=False)
            found = shares.find_link(store, token)
            assert found is not None and found[0] == newer
            assert shares.list_links(store, older) == []
            # the older run can be chosen too, by its own label
            chosen.click()
            owner.page.get_by_role("option", name=re.compile("0a0a0a")).click()
            owner.settle(800)
            assert f"run={older}" in owner.page.url
            expect(chosen).to_have_value(re.compile(r"0a0a0a · for unsure · within 2 points$"))
    finally:
        stop_app(proc)
