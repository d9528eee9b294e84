"""Browser sessions for the sharing tests: one person's Chromium context whose websocket the test can read
(everything the server sent) and write to (messages as that browser would send them), with page times;
the security table; and the owner's moves on the Runs page."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

READY = """(title) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.dataset.testScriptState !== 'notRunning') return false;
    const h = document.querySelector('h1');
    return !!h && h.innerText.includes(title) && !document.querySelector('[data-testid="stSkeleton"]');
}"""
FORBIDDEN = ("Start run", "Cancel", "Delete permanently", "Create link", "Revoke", "Import", "Save", "Rename")


class Session:
    """One person's browser (its own context): the messages the server sent it, page times, and its
    websocket to the server, through which a test can send messages as this browser would."""

    def __init__(self, browser, url: str, times: list[float]) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 2000}, accept_downloads=True)
        self.page = self.context.new_page()
        self.url, self.times = url, times
        self.received: list[bytes] = []
        self.held: list[bytes] = []
        self.hold = False
        self.server = None
        self.page.route_web_socket(re.compile(r".*/_stcore/stream.*"), self._route)

    def _route(self, ws) -> None:
        server = ws.connect_to_server()
        self.server = server

        def to_server(message) -> None:
            if self.hold:
                self.held.append(message if isinstance(message, bytes) else message.encode())
            else:
                server.send(message)

        def to_page(message) -> None:
            self.received.append(message if isinstance(message, bytes) else message.encode())
            ws.send(message)

        ws.on_message(to_server)
        server.on_message(to_page)

    def start(self, address: str) -> float:
        started = time.monotonic()
        self.page.goto(f"{self.url}/{address}", wait_until="commit", timeout=60_000)
        return started

    def navigate(self, menu: str) -> float:
        """Click ``menu`` in the sidebar's menu (no new page load, as a person moves between pages)."""
        started = time.monotonic()
        self.page.locator("[data-testid='stSidebarNav']").get_by_text(menu, exact=True).click()
        return started

    def ready(self, title: str) -> bool:
        return bool(self.page.evaluate(READY, title))

    def open(self, address: str, title: str) -> None:
        """Open ``address`` and wait until the page titled ``title`` is drawn; its time is kept."""
        started = self.start(address)
        self.wait(title, started)

    def wait(self, title: str, started: float, timeout: float = 60.0) -> None:
        while not self.ready(title):
            if time.monotonic() - started > timeout:
                raise AssertionError(f"{title!r} was not drawn within {timeout:.0f} s: {self.text()[:300]}")
            self.page.wait_for_timeout(30)
        self.times.append(time.monotonic() - started)

    def settle(self, ms: int = 1500) -> None:
        """Wait until the session's script has run again and finished (after a click or a sent message).

        The run must start within ``ms`` milliseconds; what starts no run (a refused message) waits that
        long. Once it has started, its end is awaited (30 s at most)."""
        started = time.monotonic()
        while self._script_state() == "notRunning" and time.monotonic() - started < ms / 1000:
            self.page.wait_for_timeout(20)
        deadline = time.monotonic() + 30
        while self._script_state() != "notRunning":
            assert time.monotonic() < deadline, "the script did not finish within 30 s"
            self.page.wait_for_timeout(20)

    def _script_state(self) -> str | None:
        return self.page.evaluate(
            "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState ?? null"
        )

    def text(self) -> str:
        return self.page.inner_text("body")

    def sidebar(self) -> str:
        return self.page.locator("[data-testid='stSidebar']").inner_text()

    def everything(self) -> bytes:
        """What this browser got: every message of the server, and the page's HTML now."""
        return b"".join(self.received) + self.page.content().encode("utf-8")

    def download(self, locator) -> bytes:
        with self.page.expect_download(timeout=60_000) as info:
            locator.click()
        return Path(info.value.path()).read_bytes()

    def close(self) -> None:
        self.context.close()


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the store with its digest (locks and heartbeats aside)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("worker.heartbeat", ".store.lock")
    }


def snippets_of(texts: list[str]) -> list[bytes]:
    """A 24-character run of letters and spaces from each text: found in raw bytes whatever the escaping."""
    found = []
    for text in texts:
        match = re.search(r"[A-Za-z][A-Za-z ]{22}[A-Za-z]", text)
        if match:
            found.append(match.group(0).encode("utf-8"))
    return found


def leaks(blob: bytes, snippets: list[bytes]) -> int:
    return sum(1 for s in snippets if s in blob)


class Table:
    """The security table: one row per attempt, with what happened."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, bool]] = []

    def add(self, attempt: str, expected: str, outcome: str, ok: bool) -> None:
        self.rows.append((attempt, expected, outcome, bool(ok)))

    def markdown(self) -> str:
        lines = ["| attempt | expected outcome | outcome | |", "|---|---|---|---|"]
        lines += [f"| {a} | {e} | {o} | {'pass' if ok else 'FAIL'} |" for a, e, o, ok in self.rows]
        return "\n".join(lines)


def shown_link(owner: Session) -> str | None:
    codes = owner.page.locator("[data-testid='stCode']").filter(has_text="share=")
    if not codes.count():
        return None
    return re.search(r"share=([A-Za-z0-9_-]+)", codes.first.inner_text()).group(1)


def create_link_in_the_page(owner: Session, figures_only: bool) -> str:
    """The owner makes a link on the Runs page; the token is read from the page, as a person would copy it."""
    if figures_only:
        owner.page.get_by_text("figures only", exact=True).first.click()
        owner.settle(800)
    before = shown_link(owner)
    owner.page.get_by_role("button", name="Create link").click()
    deadline = time.monotonic() + 30
    while shown_link(owner) in (None, before):
        assert time.monotonic() < deadline, "no new link was shown"
        owner.page.wait_for_timeout(100)
    owner.settle(300)
    return shown_link(owner)


def try_controls(who: Session, notices: set[str]) -> tuple[list[str], int]:
    """The labels of the page's buttons that would act on the store, and how many of the page's own buttons
    were pressed (each of them, with the page's answer awaited); a "Page not found" notice is noted and
    closed first."""
    dialog = who.page.get_by_role("dialog")
    if dialog.count():  # Streamlit's answer to an address of a page that this session does not have
        notices.add(dialog.first.inner_text().split("\n")[0])
        who.page.keyboard.press("Escape")
        dialog.first.wait_for(state="detached", timeout=10_000)
    labels = [b.strip() for b in who.page.get_by_role("button").all_inner_texts()]
    buttons = who.page.locator("[data-testid='stMain'] [data-testid='stButton'] button")
    pressed = 0
    for index in range(buttons.count()):
        if buttons.nth(index).is_visible() and buttons.nth(index).is_enabled():
            buttons.nth(index).click()
            pressed += 1
            who.settle(600)
    return [label for label in labels if label.startswith(FORBIDDEN)], pressed


def choose(owner: Session, label: str, option: str) -> None:
    """Choose ``option`` in the select box labelled ``label`` (typed, as the list may be long)."""
    box = owner.page.locator("[data-testid='stSelectbox']").filter(has_text=label)
    box.locator("input").click()
    owner.page.keyboard.type(option)
    owner.page.get_by_role("option", name=option, exact=True).click()
    owner.settle(800)


def capture(owner: Session, click) -> list[bytes]:
    """The messages the owner's browser sends when ``click()`` runs, held back from the server."""
    owner.held.clear()
    owner.hold = True
    click()
    deadline = time.monotonic() + 10
    while not owner.held and time.monotonic() < deadline:
        owner.page.wait_for_timeout(20)
    owner.page.wait_for_timeout(300)  # any message that follows the first
    owner.hold = False
    assert owner.held, "the click sent nothing"
    return list(owner.held)


def settle_all(sessions: list[Session], ms: int = 1500) -> None:
    """:meth:`Session.settle` of every session at once: each session's script must start within ``ms``
    milliseconds (what starts none, such as a refused message, waits that long, all sessions in the same
    window); every one that started is awaited until it has finished (30 s at most)."""
    started = time.monotonic()
    ran = [False] * len(sessions)
    while True:
        states = [session._script_state() for session in sessions]
        ran = [seen or state != "notRunning" for seen, state in zip(ran, states, strict=True)]
        window_over = time.monotonic() - started >= ms / 1000
        if all(
            state == "notRunning" and (seen or window_over) for seen, state in zip(ran, states, strict=True)
        ):
            return
        assert time.monotonic() - started < ms / 1000 + 30, "a script did not finish within 30 s"
        sessions[0].page.wait_for_timeout(20)


def replay(targets: list[tuple[Session, str]], messages: list[bytes]) -> None:
    """Send ``messages`` (the owner's) as each target session's browser would, with that session's own
    query string, one message at a time to every session at once, each followed by the runs it starts."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    for raw in messages:
        for session, query in targets:
            message = BackMsg()
            message.ParseFromString(raw)
            if message.WhichOneof("type") == "rerun_script":
                message.rerun_script.query_string = query
            session.server.send(message.SerializeToString())
        settle_all([session for session, _ in targets], 500)  # the runs they start, if the server starts any
