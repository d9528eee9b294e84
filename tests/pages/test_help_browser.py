"""The help pages in a real headless Chromium: the Overview's "How to read this" opens How to read your
answer with its annotated picture, and the menu's Glossary opens the glossary, for the owner and for a share
link's viewer alike (they hold no run's data)."""

from __future__ import annotations

import shutil

from flare_core.store import shares
from flare_core.store.runs import RunStore
from tests.pages.app_process import BROWSER_MARKS, headless_chromium, start_app, stop_app

pytestmark = BROWSER_MARKS
NAV = "[data-testid='stSidebarNav']"


def _picture_width(page) -> int:
    """The natural width of the first picture of the page's main area, once it has loaded."""
    picture = page.locator("[data-testid='stMain'] img").first
    picture.wait_for(timeout=60_000)
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=picture.element_handle())
    return picture.evaluate("(img) => img.naturalWidth")


def _no_error(page) -> None:
    errors = page.locator("[data-testid='stException']")
    assert errors.count() == 0, errors.first.inner_text()


def test_the_overview_links_how_to_read_and_the_menu_links_the_glossary(labelled_run, tmp_path):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(labelled_run.path, store.root / labelled_run.id)
    token, _ = shares.create_link(store, labelled_run.id, texts=False)
    proc, url = start_app(store.root)
    try:
        with headless_chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            page.goto(f"{url}/?run={labelled_run.id}", wait_until="domcontentloaded", timeout=60_000)
            page.get_by_role("link", name="How to read this").click(timeout=60_000)
            page.locator("h1").filter(has_text="How to read your answer").wait_for(timeout=60_000)
            assert page.url.split("?")[0].endswith("/how_to_read")
            assert _picture_width(page) == 1400, "the annotated Overview, from assets/"
            page.get_by_text("What the answer stands on.", exact=False).first.wait_for(timeout=60_000)
            _no_error(page)

            page.locator(NAV).get_by_text("Glossary", exact=True).click()
            page.locator("h1").filter(has_text="Glossary").wait_for(timeout=60_000)
            page.get_by_text("Chance of being the best", exact=True).first.wait_for(timeout=60_000)
            _no_error(page)

            viewer = browser.new_page(viewport={"width": 1400, "height": 1400})
            viewer.goto(f"{url}/?share={token}", wait_until="domcontentloaded", timeout=60_000)
            viewer.get_by_role("link", name="How to read this").wait_for(timeout=60_000)
            menu = viewer.locator(NAV)
            assert "New run" not in menu.inner_text() and "Glossary" in menu.inner_text()
            menu.get_by_text("Glossary", exact=True).click()
            viewer.get_by_text("Normalizing flows", exact=True).first.wait_for(timeout=60_000)
            _no_error(viewer)
    finally:
        stop_app(proc)
