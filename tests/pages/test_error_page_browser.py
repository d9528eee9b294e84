"""An uncaught error on a page, seen in a real headless Chromium against ``flare app``: a share link's viewer
opens the Overview of a run whose ``summary.parquet`` is damaged. The page says plainly that something went
wrong, with an id to quote; neither the page nor any element the server sent holds a traceback, an
exception's type, a path of the server's files or Streamlit's "Ask Google" / "Ask ChatGPT" links; the
server's log holds the traceback with that id."""

from __future__ import annotations

import re
import subprocess
import threading
import time

from flare_core.store import shares
from flare_core.store.runs import RunStore
from tests.pages.app_process import BROWSER_MARKS, ROOT, headless_chromium, start_app, stop_app
from tests.pages.browser_sessions import Session
from tests.support import planted_run

pytestmark = BROWSER_MARKS

PLAIN = "Something went wrong on this page"
#: What no person may see of an error: a traceback, the reading library's exception, the server's paths,
#: Streamlit's links that send the error elsewhere.
HIDDEN = ("Traceback", "ArrowInvalid", "pyarrow", str(ROOT), "site-packages", "Ask Google", "ChatGPT")


def _elements(received: list[bytes]) -> list[str]:
    """Every element the server sent but tables (whose Arrow data names the library that wrote it), as
    text: alerts, markdown, exceptions and the rest."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    found = []
    for raw in received:
        message = ForwardMsg()
        message.ParseFromString(raw)
        element = message.delta.new_element if message.WhichOneof("type") == "delta" else None
        if (
            element is not None
            and message.delta.HasField("new_element")
            and element.WhichOneof("type") != "dataframe"
        ):
            found.append(str(element))
    return found


def test_an_error_on_a_page_shows_a_plain_sentence_and_an_id_and_logs_the_traceback(tmp_path):
    planted, _ = planted_run(tmp_path, with_labels=True)
    store = RunStore(planted.path.parent)
    token, _ = shares.create_link(store, planted.id)
    (planted.path / "summary.parquet").write_bytes(b"PAR1 not a table of this run PAR1")  # damaged
    proc, url = start_app(store.root, stderr=subprocess.PIPE)
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    try:
        with headless_chromium() as browser:
            viewer = Session(browser, url, [])
            viewer.open(f"?share={token}", "Overview")
            page = viewer.page  # the page's answer to the error: the plain sentence, or Streamlit's own
            page.get_by_text(PLAIN).or_(page.locator("[data-testid='stException']")).first.wait_for(
                timeout=30_000
            )
            shown = viewer.text()
            seen = viewer.page.content() + "".join(_elements(viewer.received))
            viewer.close()
        found = re.search(rf"{PLAIN}\. The error is recorded with the id ([0-9a-f]{{8}})", shown)
        leaked = [word for word in HIDDEN if word in seen]
        assert found and leaked == [], f"the viewer got {leaked}: {shown[-600:]}"
        error_id = found.group(1)
        deadline = time.monotonic() + 15
        while f"error {error_id}" not in "".join(log) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop_app(proc)
    server_log = "".join(log)
    entry = server_log[server_log.index(f"error {error_id}") :]
    assert "Traceback (most recent call last)" in entry and "summary.parquet" in entry, entry[:2000]
