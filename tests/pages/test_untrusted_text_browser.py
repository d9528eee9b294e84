"""Text that others wrote, shown in a real headless Chromium: a run imported from a bundle whose corpus texts
carry a markdown image and link to a local listener, whose name and label column carry a markdown image and
every kind of markup, and whose categories carry one too. The owner and a share-link viewer open every page
they have (the collapse page with a pair of texts selected): the listener must see no request, no page may
hold a link or an image to it, and the name must read as it was written.

Also here: the tables offer no "Download as CSV" of their own (Streamlit's writes formulas as they are), the
map's "Download CSV" holds the corpus texts exactly with formulas neutralised, and a 100,000-column file is
refused on the New run page before any preview.
"""

from __future__ import annotations

import http.server
import io
import json
import threading
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from dashboard.page_list import PAGES, SHARED_PAGES, url_path
from flare_core.view.plain import WORD_JOINER
from tests.pages.app_process import BROWSER_MARKS, headless_chromium, start_app, stop_app

pytestmark = BROWSER_MARKS

RUN = "run-m"
#: The page titles (h1) by address.
TITLES = {
    "": "Overview",
    "labels": "Check with a few labels",
    "sufficiency": "Information sufficiency",
    "corpus": "Corpus & embeddings",
    "collapse": "Mean-pooling collapse",
    "layers": "Layer-wise concentration",
    "validation": "Validation",
    "new_run": "New run",
    "runs": "Runs",
}
DRAWN = """(title) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const h = document.querySelector('h1');
    return !!app && app.dataset.testScriptState === 'notRunning' && !!h && h.innerText.includes(title)
        && !document.querySelector('[data-testid="stSkeleton"]');
}"""
#: Every element that points at the listener (the port is filled in), and what it is.
POINTING = """(port) => [...document.querySelectorAll('[href], [src], [srcset], [style]')]
    .filter(e => ['href', 'src', 'srcset', 'style'].some(a => (e.getAttribute(a) || '').includes(':' + port)))
    .map(e => e.outerHTML.slice(0, 160))"""


class _Listener(http.server.BaseHTTPRequestHandler):
    """Answers nothing useful; keeps every request's path."""

    seen: list[str] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def listener():
    """``(port, requests seen)`` of a local HTTP listener that the hostile texts point at."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Listener.seen = []
    yield server.server_address[1], _Listener.seen
    server.shutdown()


def name_of(port: int) -> str:
    """The imported run's name: a markdown image to the listener and every other kind of markup."""
    return (
        f"Run ![n](http://127.0.0.1:{port}/name.png) <b>bold</b> <script>x()</script> *em* _u_ `code` "
        "$x^2$ :smile: :material/home: :red[red] a\\b [l](y) &amp;"
    )


def hostile_texts(texts: list[str], port: int) -> list[str]:
    """Each text with a markdown image and link to the listener; the first one a spreadsheet formula,
    the second one with quotes, an ampersand, markup and line breaks."""
    payload = f" ![p](http://127.0.0.1:{port}/pixel.png) [details](http://127.0.0.1:{port}/x)"
    shown = [t[:300] + payload for t in texts]
    shown[0] = f'=HYPERLINK("http://127.0.0.1:{port}/formula", "open"){payload}'
    shown[1] = f'He said "no" & <b>left</b>\nthen\r\ncame back{payload}'
    return shown


@pytest.fixture(scope="module")
def hostile_store(labelled_run, listener, tmp_path_factory):
    """A store with ``RUN``: the labelled fixture run bundled, its texts, name, label column and one category
    rewritten inside the bundle, imported as a bundle from elsewhere would be; and a share link of it."""
    from flare_core.store import shares
    from flare_core.store.bundle import export_run
    from flare_core.store.bundle_import import import_run
    from flare_core.store.runs import RunStore

    port, _ = listener
    folder = tmp_path_factory.mktemp("untrusted")
    source = zipfile.ZipFile(export_run(labelled_run, folder / "a.zip"))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "corpus.parquet":
                corpus = pd.read_parquet(io.BytesIO(data))
                corpus["text"] = hostile_texts(corpus["text"].tolist(), port)
                category = f"sport ![c](http://127.0.0.1:{port}/category.png)"
                corpus["label"] = corpus["label"].replace({"sport": category})
                buffer = io.BytesIO()
                corpus.to_parquet(buffer, index=False)
                data = buffer.getvalue()
            elif info.filename == "manifest.json":
                manifest = json.loads(data)
                manifest["name"] = name_of(port)
                manifest["corpus"]["label_column"] = f"label ![l](http://127.0.0.1:{port}/column.png)"
                data = json.dumps(manifest).encode()
            bundle.writestr(info.filename, data)
    store = RunStore(folder / "runs")
    import_run(store, out.getvalue(), run_id=RUN)
    token, _ = shares.create_link(store, RUN, texts=True)
    return store, token


@pytest.fixture(scope="module")
def app_url(hostile_store):
    store, _ = hostile_store
    proc, url = start_app(store.root)
    yield url
    stop_app(proc)


@pytest.fixture(scope="module")
def tab(app_url):
    with headless_chromium() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 2200}, accept_downloads=True)
        yield context.new_page()
        context.close()


def open_page(tab, address: str, title: str) -> None:
    tab.goto(address, wait_until="domcontentloaded", timeout=60_000)
    tab.wait_for_function(DRAWN, arg=title, timeout=60_000)


def select_first_pair(tab) -> None:
    """Select the first row of the collapse page's most-collapsed pairs (its row marker, on the grid's
    canvas) and wait until both texts are shown."""
    grid = tab.locator(".st-key-top-pairs [data-testid='stDataFrame']")
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    tab.mouse.click(box["x"] + 16, box["y"] + 36 + 17)
    tab.get_by_text("Text B", exact=True).wait_for(timeout=30_000)
    tab.wait_for_function(DRAWN, arg="Mean-pooling collapse", timeout=60_000)


def assert_nothing_points_at(tab, listener, where: str) -> None:
    port, seen = listener
    tab.wait_for_timeout(600)  # an image the page holds is fetched by now
    pointing = tab.evaluate(POINTING, str(port))
    assert not pointing, f"{where}: elements point at the listener: {pointing}"
    assert not seen, f"{where}: the listener was asked for {seen}"
    assert not tab.locator("[data-testid='stException']").count(), where


def visit_every_page(tab, listener, base: str, query: str, paths: list[str]) -> list[str]:
    """Open every page of ``paths`` (and select a pair on the collapse page); the body texts seen."""
    bodies = []
    for path in paths:
        address = url_path(path)
        open_page(tab, f"{base}/{address}?{query}", TITLES[address])
        if address == "collapse":
            select_first_pair(tab)
            shown = tab.inner_text("body").replace(WORD_JOINER, "")
            assert f"![p](http://127.0.0.1:{listener[0]}/pixel.png)" in shown  # both texts, as text
        assert_nothing_points_at(tab, listener, f"{address or 'overview'} ({query.split('=')[0]})")
        bodies.append(tab.inner_text("body").replace(WORD_JOINER, ""))
    return bodies


def test_the_owner_sees_texts_and_names_as_text_on_every_page(app_url, tab, listener, hostile_store):
    bodies = visit_every_page(tab, listener, app_url, f"run={RUN}", [p.path for p in PAGES])
    name = name_of(listener[0])
    overview = bodies[0]
    assert name in overview, f"the run's name is not shown as written: {overview[:600]}"
    labels_page = bodies[[p.path for p in PAGES].index("dashboard/labels.py")]
    assert f"label ![l](http://127.0.0.1:{listener[0]}/column.png)" in labels_page


def test_a_viewer_sees_texts_and_names_as_text_on_every_page(app_url, tab, listener, hostile_store):
    _, token = hostile_store
    bodies = visit_every_page(tab, listener, app_url, f"share={token}", list(SHARED_PAGES))
    sidebar = tab.locator("[data-testid='stSidebar']").inner_text().replace(WORD_JOINER, "")
    assert "Shared with you" in sidebar and name_of(listener[0]) in sidebar, sidebar
    assert name_of(listener[0]) in bodies[0]


def test_tables_offer_no_csv_of_their_own_and_the_map_csv_holds_the_texts(
    app_url, tab, listener, hostile_store
):
    store, _ = hostile_store
    open_page(tab, f"{app_url}/collapse?run={RUN}", TITLES["collapse"])
    grid = tab.locator(".st-key-top-pairs [data-testid='stDataFrame']")
    grid.hover()
    toolbar = tab.locator("[data-testid='stElementToolbar']").filter(
        has=tab.get_by_role("button", name="Search")
    )
    toolbar.first.wait_for(timeout=10_000)  # the table's toolbar is drawn: search and full screen
    assert tab.get_by_role("button", name="Download as CSV").count() == 0
    open_page(tab, f"{app_url}/corpus?run={RUN}", TITLES["corpus"])
    button = tab.locator("[class*='st-key-dl-run-m-map-'] button").first
    with tab.expect_download(timeout=60_000) as download:
        button.click()
    back = pd.read_csv(Path(download.value.path()), keep_default_na=False)
    corpus = store.get(RUN).corpus_frame()
    expected = corpus["text"].iloc[back["row"]].tolist()
    expected = ["'" + t if t.startswith("=") else t for t in expected]
    assert back["text"].tolist() == expected  # exact: no &quot; or &amp;, line breaks kept
    assert any(t.startswith("'=HYPERLINK(") for t in back["text"]) and any(
        '"no" & <b>' in t for t in back["text"]
    )
    assert_nothing_points_at(tab, listener, "corpus map download")


def test_a_very_wide_file_is_refused_before_any_preview(app_url, tab, tmp_path):
    path = tmp_path / "wide.csv"
    names = [f"c{i}" for i in range(100_000)]
    path.write_text(",".join(names) + "\n" + ",".join("x" for _ in names) + "\n")
    open_page(tab, f"{app_url}/new_run", TITLES["new_run"])
    started = time.monotonic()
    tab.locator("[data-testid='stFileUploaderDropzoneInput']").first.set_input_files(str(path))
    refusal = tab.get_by_text("has 100,000 columns; at most 2,000 are read", exact=False)
    refusal.wait_for(timeout=60_000)
    print(f"refusal shown {time.monotonic() - started:.1f} s after the upload began")
    tab.wait_for_function(DRAWN, arg=TITLES["new_run"], timeout=60_000)
    main = tab.locator("[data-testid='stMain']")
    assert main.locator("[data-testid='stDataFrame']").count() == 0  # no preview
    assert "Text column" not in main.inner_text() and "duplicate" not in main.inner_text()
