"""Clickjacking, tried in a real headless Chromium against ``flare app`` on 127.0.0.1: a page of another
origin on this machine (a small web server on another port) puts the owner's Runs page in an iframe and
clicks where *Delete a run* → the run → *Delete permanently* are. The frame must get nothing (the browser
blocks it, as the dashboard's responses forbid framing) and the clicks must change nothing in the store."""

from __future__ import annotations

import contextlib
import http.server
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from tests.pages.app_process import BROWSER_MARKS, headless_chromium, start_app, stop_app
from tests.pages.browser_sessions import snapshot
from tests.support import planted_run

pytestmark = BROWSER_MARKS

FRAME_WIDTH, FRAME_HEIGHT = 1400, 1600
#: What every response of the dashboard must say (header names lower-cased).
FORBIDS = {
    "content-security-policy": "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
}


@contextlib.contextmanager
def framing_page(target: str) -> Iterator[str]:
    """The address of a page on 127.0.0.1 (another port: another origin) that frames ``target``."""
    body = (
        "<!doctype html><title>A prize for you</title><p>Click the buttons below to claim it.</p>"
        f'<iframe id="victim" src="{target}" width="{FRAME_WIDTH}" height="{FRAME_HEIGHT}"></iframe>'
    ).encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _headers_of_every_kind(url: str) -> dict[str, dict[str, str]]:
    """The response headers (names lower-cased) of the dashboard's page, one of its static scripts, its
    health check, and its refusal of a foreign Host (403)."""
    found = {}
    with urllib.request.urlopen(f"{url}/runs", timeout=30) as response:
        found["page"] = {k.lower(): v for k, v in response.headers.items()}
        script = re.search(r'src="\.?(/?static/js/[^"]+\.js)"', response.read().decode()).group(1)
    for what, path in (("static file", "/" + script.lstrip("/")), ("health check", "/_stcore/health")):
        with urllib.request.urlopen(f"{url}{path}", timeout=30) as response:
            found[what] = {k.lower(): v for k, v in response.headers.items()}
    try:
        urllib.request.urlopen(urllib.request.Request(url, headers={"Host": "evil.example"}), timeout=30)
    except urllib.error.HTTPError as refused:
        assert refused.code == 403
        found["refusal"] = {k.lower(): v for k, v in refused.headers.items()}
    return found


def _framed_state(page, timeout: float = 90.0) -> str:
    """``"drawn"`` once the framed dashboard has drawn its Runs page, ``"blocked"`` once Chromium replaced
    the frame by its error page (a response that forbids framing); fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frames = [f for f in page.frames if f != page.main_frame]
        if frames and frames[0].url.startswith("chrome-error://"):
            return "blocked"
        if frames and page.frame_locator("#victim").get_by_text("Delete a run").count():
            return "drawn"
        page.wait_for_timeout(100)
    raise AssertionError(f"the frame neither drew nor was blocked within {timeout:.0f} s: {page.frames}")


def _delete_through_the_frame(page, run_id: str, timeout_ms: int) -> int:
    """Click *Delete a run*, choose ``run_id`` and click *Delete permanently* inside the frame, as a person
    fooled by the framing page would; each click waits ``timeout_ms`` at most for its target. Returns how
    many of the three steps reached their target."""
    frame = page.frame_locator("#victim")
    steps = [
        lambda: frame.get_by_text("Delete a run").click(timeout=timeout_ms),
        lambda: (
            frame.locator("[data-testid='stSelectbox']")
            .filter(has_text="Run to delete")
            .locator("input")
            .click(timeout=timeout_ms)
        ),
        lambda: frame.get_by_role("option", name=run_id, exact=True).click(timeout=timeout_ms),
        lambda: frame.get_by_role("button", name="Delete permanently").click(timeout=timeout_ms),
    ]
    done = 0
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - a target the frame does not show: the step did nothing
            continue
        done += 1
        page.wait_for_timeout(1500)  # the dashboard's answer to the click
    return done


def test_a_page_of_another_origin_cannot_frame_the_dashboard_nor_click_in_it(tmp_path):
    run, _ = planted_run(tmp_path, with_labels=True)
    store_root = run.path.parent
    before = snapshot(store_root)
    proc, url = start_app(store_root)
    try:
        headers = _headers_of_every_kind(url)
        with headless_chromium() as browser:
            context = browser.new_context(viewport={"width": 1500, "height": 1800})
            own = context.new_page()  # the control: at its own address the owner's Runs page draws
            own.goto(f"{url}/runs?run={run.id}", wait_until="commit", timeout=60_000)
            own.get_by_text("Delete a run").wait_for(timeout=90_000)
            own.close()
            page = context.new_page()
            with framing_page(f"{url}/runs?run={run.id}") as attacker:
                page.goto(attacker, wait_until="load", timeout=60_000)
                state = _framed_state(page)
                steps = _delete_through_the_frame(page, run.id, 60_000 if state == "drawn" else 2_000)
                box = page.locator("#victim").bounding_box()
                for dx, dy in ((0.1, 0.1), (0.5, 0.3), (0.5, 0.5), (0.2, 0.7)):  # blind clicks too
                    page.mouse.click(box["x"] + dx * box["width"], box["y"] + dy * box["height"])
                page.wait_for_timeout(1500)
                drawn = page.frame_locator("#victim").locator("[data-testid='stApp']").count()
            context.close()
    finally:
        stop_app(proc)
    survived = (store_root / run.id).is_dir()
    outcome = (
        f"framed dashboard {state}, {steps} of 4 steps of the deletion reached, run survived: {survived}"
    )
    assert state == "blocked" and drawn == 0 and steps == 0, outcome
    assert survived and snapshot(store_root) == before, outcome
    for what, got in headers.items():
        assert {k: got.get(k) for k in FORBIDS} == FORBIDS, (what, got)
