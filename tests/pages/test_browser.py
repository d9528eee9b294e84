"""The dashboard in a real headless Chromium: every page of a stored run renders its charts, no exception box.

Screenshots go to ``test-output/screenshots/`` (one PNG per page).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots"
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# (url path, text that must appear, whether a plotly chart must render)
PAGES = [
    ("", "Trust: low", True),
    ("sufficiency", "IS graph with Louvain communities", True),
    ("corpus", "Embedding map", True),
    ("collapse", "Most-collapsed pairs", True),
    ("layers", "Layer-wise concentration", True),
    ("validation", "Stability of the ranking", True),
    ("runs", "Runs", False),
    ("new_run", "Upload a corpus", False),
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (bash install.sh --with-browser)"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(labelled_run, fixture_store):
    port = _free_port()
    env = dict(os.environ, FLARE_RUNS_DIR=str(fixture_store.root))
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
            "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
        ],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the dashboard did not start within 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.mark.parametrize(("path", "expected", "chart"), PAGES)
def test_page_renders_in_chromium(app_url, browser, labelled_run, path, expected, chart):
    page = browser.new_page(viewport={"width": 1400, "height": 2200})
    try:
        page.goto(f"{app_url}/{path}?run={labelled_run.id}", wait_until="domcontentloaded", timeout=60_000)
        page.get_by_text(expected, exact=False).first.wait_for(timeout=60_000)
        if chart:
            page.locator(".js-plotly-plot .main-svg, .js-plotly-plot canvas").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)  # let the remaining elements settle before the screenshot
        assert page.locator("[data-testid='stException']").count() == 0, page.locator(
            "[data-testid='stException']"
        ).first.inner_text()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{path or 'overview'}.png"), full_page=True)
    finally:
        page.close()


def test_unsafe_run_link_is_refused_in_the_browser(app_url, browser):
    page = browser.new_page()
    try:
        page.goto(f"{app_url}/?run=../../etc", wait_until="domcontentloaded", timeout=60_000)
        page.get_by_text("invalid run id", exact=False).first.wait_for(timeout=60_000)
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()
