"""Sharing safely, tried in a real headless Chromium against ``flare app --host 0.0.0.0`` (reachable by
others, so the owner needs the token it prints) over a store of 8 runs (50 with ``--bench``): the owner, then
two share-link viewers using the server at once, and strangers.

Every attempt of the security table (docs/sharing.md, "Sharing safely") is made and printed with its outcome (also
written to ``test-output/sharing-security.md``): a share link of run A with another run's id added, an id
typed into the address, random, expired and revoked tokens, the picker, the report download, a "figures only"
link (no corpus text in any page's HTML, in anything the server sent, or in any download), every action tried
through the widgets and by replaying the owner's own messages (start, cancel, delete, share) into the viewers'
sessions, a wrong owner token, and the owner's link. Then what a web page the owner visits could try against
``flare app`` on 127.0.0.1 (a second server over the same store, where whoever reaches it is the owner): a
foreign Host (DNS rebinding, through Chromium's host-resolver rules), a page of another origin opening the
WebSocket, and a raw WebSocket with a foreign Host replaying the owner's Delete; on the exposed server, a
fragment rerun of a revoked link's session, a stranger's and a viewer's upload, and the owner's label save
replayed into other sessions. Nothing may leak and the store's files must not change. The time a page takes
with the owner and two viewers at once is measured by ``bench/speed/page_sessions.py``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import http.server
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.pages.app_process import (
    BROWSER_MARKS,
    ROOT,
    headless_chromium,
    launch_app,
    stop_app,
    wait_until_up,
)
from tests.pages.browser_sessions import (
    Session,
    Table,
    capture,
    choose,
    create_link_in_the_page,
    leaks,
    replay,
    settle_all,
    snapshot,
    snippets_of,
    try_controls,
)

pytestmark = BROWSER_MARKS

TABLE = ROOT / "test-output" / "sharing-security.md"
#: Runs in the store: every one but A must stay hidden from a viewer (50, a long picker, under ``--bench``).
N_RUNS, N_RUNS_BENCH = 8, 50
OTHER_NAME = "Confidential run"  # the name of every run but A: no viewer may ever receive it
#: The analysis pages: address, name in the menu, title on the page.
ANALYSIS = [
    ("", "Overview", "Overview"),
    ("sufficiency", "Information sufficiency", "Information sufficiency"),
    ("corpus", "Corpus & embedding map", "Corpus & embeddings"),
    ("collapse", "Mean-pooling collapse", "Mean-pooling collapse"),
    ("layers", "Layer-wise concentration", "Layer-wise concentration"),
    ("validation", "Validation", "Validation"),
]
TITLES = {path: title for path, _, title in ANALYSIS}
REFUSED = "This link is not valid"
#: A site's name that Chromium resolves to 127.0.0.1, as a rebinding DNS server would make it.
REBIND = "attacker-rebind.example"


# -- the store and the server ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store_of_runs(labelled_run, tmp_path_factory, request):
    """Run A (a copy of the labelled fixture run), run B and more copies (``N_RUNS`` in all) made through the store's own
    bundle import, each other run named ``OTHER_NAME``; ``run-c`` looks busy (a live process, a fresh
    heartbeat) so that the owner's Runs page offers Cancel."""
    from flare_core.run import jobs
    from flare_core.store.bundle import export_run
    from flare_core.store.bundle_import import import_run
    from flare_core.store.runs import RunStore

    folder = tmp_path_factory.mktemp("share-store")
    store = RunStore(folder / "runs")
    bundle = export_run(labelled_run, folder / "a.zip").read_bytes()
    import_run(store, bundle, run_id="run-a").update(name="Run A shared")
    for index in range(1, N_RUNS_BENCH if request.config.getoption("--bench") else N_RUNS):
        run_id = {1: "run-b", 2: "run-c"}.get(index, f"run-{index:02d}")
        import_run(store, bundle, run_id=run_id).update(name=f"{OTHER_NAME} {index:02d}")
    from tests.support import planted_run

    (folder / "planted").mkdir()
    planted, _ = planted_run(folder / "planted", with_labels=False)  # the owner labels this one
    import_run(store, export_run(planted, folder / "u.zip").read_bytes(), run_id="run-u").update(
        name=f"{OTHER_NAME} unlabelled"
    )
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"])
    store.get("run-c").update(
        status="running", pid=sleeper.pid, host=socket.gethostname(), pid_start_time=None
    )
    (store.get("run-c").path / jobs.HEARTBEAT).write_text(repr(time.time() + 3600))
    yield store
    sleeper.kill()
    sleeper.wait()


@pytest.fixture(scope="module")
def servers(store_of_runs):
    """Both servers over the store, started at once: ``flare app --host 0.0.0.0`` (reachable by others) and
    ``flare app`` on 127.0.0.1 (this machine only)."""
    exposed = launch_app(store_of_runs.root, "--host", "0.0.0.0", stderr=subprocess.PIPE)
    local = launch_app(store_of_runs.root)
    try:
        for proc, url in (exposed, local):
            wait_until_up(proc, url, timeout=60)
        yield exposed, local
    finally:
        for proc, _ in (exposed, local):
            stop_app(proc)


@pytest.fixture(scope="module")
def exposed_server(servers):
    """``(url, owner token)`` of ``flare app --host 0.0.0.0``: the token is read from what it printed."""
    (proc, url), _ = servers
    printed: list[str] = []
    threading.Thread(target=lambda: printed.extend(proc.stderr), daemon=True).start()
    deadline = time.monotonic() + 20
    while not (found := re.search(r"\?owner=([A-Za-z0-9_-]{40,})", "".join(printed))):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert found, f"flare app --host 0.0.0.0 printed no owner link: {printed}"
    return url, found.group(1)


@pytest.fixture(scope="module")
def local_server(servers):
    """The url of ``flare app`` on 127.0.0.1 (this machine only: whoever reaches it is the owner) over the
    same store: what a web page the owner visits would attack."""
    _, (_, url) = servers
    return url


@pytest.fixture(scope="module")
def chromium():
    with headless_chromium(f"--host-resolver-rules=MAP {REBIND} 127.0.0.1") as browser:
        yield browser


# -- one browser session, with what its server sent and a way to send as it ------------------------------------


# -- the test, in the order a person would go --------------------------------------------------------------------


@dataclass
class Trial:
    """What the steps share: the server, the store, the table, the sessions and the links made."""

    url: str
    owner_token: str
    store: Any
    snippets: list[bytes]
    browser: Any
    table: Table = field(default_factory=Table)
    times: list[float] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)
    captured: dict[str, list[bytes]] = field(default_factory=dict)
    before: dict[str, str] = field(default_factory=dict)  # the store's files once the owner is done

    def session(self) -> Session:
        self.sessions.append(Session(self.browser, self.url, self.times))
        return self.sessions[-1]

    def leave(self, session: Session) -> None:
        """Close ``session``'s browser (its page stops asking the server for anything)."""
        session.close()
        self.sessions.remove(session)

    def owner_address(self, path: str = "") -> str:
        return f"{path}?owner={self.owner_token}&run=run-a"


def _owner_makes_links(trial: Trial) -> Session:
    """The owner's link gives everything; three links are made on the Runs page, one expired one by API."""
    from flare_core.store import shares

    owner = trial.session()
    owner.open(trial.owner_address("runs"), "Runs")
    nav = owner.page.locator("[data-testid='stSidebarNav']").inner_text()
    ids = [m["id"] for m in trial.store.list()]
    seen = sum(1 for i in ids if i.encode() in b"".join(owner.received))
    trial.table.add(
        "the owner's link", "everything",
        f"New run and Runs pages in the menu; the picker offers {seen} of {len(ids)} runs",
        "New run" in nav and "Runs" in nav and seen == len(ids) >= N_RUNS,
    )  # fmt: skip
    for name, figures_only in (("texts", False), ("figures", True), ("revoked", False)):
        trial.links[name] = create_link_in_the_page(owner, figures_only=figures_only)
    trial.links["expired"], _ = shares.create_link(
        trial.store, "run-a", expires=dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)
    )
    made = {link.prefix: link for link in shares.list_links(trial.store, "run-a")}
    assert made[trial.links["figures"][:6]].texts is False and made[trial.links["texts"][:6]].texts is True
    return owner


def _owner_messages(trial: Trial, owner: Session) -> None:
    """The owner's own messages for each action, held back from the server (replayed later into other
    sessions); the page is opened again after each, as its browser waits for an answer that never comes."""
    owner.page.get_by_text("Delete a run").click()
    owner.settle(500)
    choose(owner, "Run to delete", "run-b")
    delete = owner.page.get_by_role("button", name="Delete permanently")
    trial.captured["delete"] = capture(owner, delete.click)
    owner.open(trial.owner_address("runs"), "Runs")
    trial.captured["cancel"] = capture(owner, owner.page.get_by_role("button", name="Cancel").first.click)
    owner.open(trial.owner_address("runs"), "Runs")
    trial.captured["share"] = capture(owner, owner.page.get_by_role("button", name="Create link").click)
    owner.open(f"new_run?owner={trial.owner_token}", "New run")
    corpus_csv = trial.store.root.parent / "corpus.csv"
    trial.store.get("run-a").corpus_frame()[["text", "label"]].to_csv(corpus_csv, index=False)
    owner.page.locator("[data-testid='stFileUploaderDropzoneInput']").first.set_input_files(str(corpus_csv))
    start = owner.page.get_by_role("button", name="Start run")
    start.wait_for(timeout=60_000)
    owner.settle(1000)
    assert start.is_enabled(), owner.text()[:500]
    trial.captured["start"] = capture(owner, start.click)
    owner.open(f"labels?owner={trial.owner_token}&run=run-u", "Check with a few labels")
    owner.page.get_by_role("textbox", name="Categories, separated by commas").fill("sport, politics")
    owner.page.keyboard.press("Enter")
    owner.settle(800)
    trial.captured["label"] = capture(
        owner, owner.page.get_by_role("button", name="Save the categories").click
    )


def _owner_revokes(trial: Trial, owner: Session) -> tuple[Session, Session]:
    """Two viewers open a link that the owner then revokes on the Runs page; returns their sessions."""
    from flare_core.store import shares

    holder, second = trial.session(), trial.session()
    opening = [(holder, f"?share={trial.links['revoked']}", "Overview"),
               (second, f"?share={trial.links['revoked']}", "Overview"),
               (owner, trial.owner_address("runs"), "Runs")]  # fmt: skip
    for who, at, title in [(who, who.start(address), title) for who, address, title in opening]:
        who.wait(title, at)
    choose(owner, "Revoke a link", trial.links["revoked"][:6])
    owner.page.get_by_role("button", name="Revoke", exact=True).click()
    owner.settle(1500)
    assert shares.list_links(trial.store, "run-a")[2].state() == "revoked"
    return holder, second


def _viewers_go_through_the_pages(trial: Trial) -> tuple[Session, Session]:
    """Two viewers open their links (one with another run's id added) and go through the menu's pages at
    the same moments; every control a viewer's page shows is looked at and its own buttons pressed. Returns
    the two viewers' sessions."""
    viewer, figures = trial.session(), trial.session()
    people = [
        (viewer, f"?share={trial.links['texts']}&run=run-b"),  # another run's id added
        (figures, f"?share={trial.links['figures']}"),
    ]
    for who, at in [(who, who.start(address)) for who, address in people]:
        who.wait("Overview", at)
    offered, pressed, notices = [], 0, set()
    for _, menu, title in [*ANALYSIS[1:], ANALYSIS[0]]:
        for who, at in [(who, who.navigate(menu)) for who, _ in people]:
            who.wait(title, at)
        for who, _ in people:
            found, clicks = try_controls(who, notices)
            offered, pressed = offered + found, pressed + clicks
    for path in ("runs", "new_run", "labels"):  # the addresses of the pages a link does not have
        linked = ((viewer, trial.links["texts"]), (figures, trial.links["figures"]))
        for who, at in [(who, who.start(f"{path}?share={link}")) for who, link in linked]:
            who.wait("Overview", at)
        for who, _ in linked:
            found, clicks = try_controls(who, notices)
            offered, pressed = offered + found, pressed + clicks
    trial.table.add(
        "start, delete, cancel, label or share through a page's widgets", "refused",
        f"no such control on any page of either link (their addresses of Runs, New run and Check with a few "
        f"labels: {' / '.join(sorted(notices)) or 'no notice'}, then the Overview); {pressed} of the pages' own "
        "buttons pressed",
        not offered and snapshot(trial.store.root) == trial.before,
    )  # fmt: skip
    return viewer, figures


def _one_run_only(trial: Trial, viewer: Session, figures: Session) -> None:
    """The link with another run's id added, and the picker, show run A only."""
    names = viewer.text() + viewer.sidebar()
    blob = viewer.everything() + figures.everything()
    other = sum(blob.count(x.encode()) for x in (OTHER_NAME, "run-b", "run-c", "run-07"))
    trial.table.add(
        "share link of run A with `?run=B` added", "A only",
        f"{'run A shown' if 'Run A shared' in names else 'RUN A NOT SHOWN'}; the address now says "
        f"run={viewer.page.url.split('run=')[-1]}; {other} mentions of any other run in everything the two "
        "viewers received",
        "Run A shared" in names and viewer.page.url.endswith("run=run-a") and other == 0,
    )  # fmt: skip
    side = viewer.sidebar()
    pickers = viewer.page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").count()
    trial.table.add(
        "the picker", "shows A only",
        f"{pickers} run pickers; the sidebar names “Run A shared” and no other run",
        pickers == 0 and "Run A shared" in side and OTHER_NAME not in side,
    )  # fmt: skip


def _strangers(trial: Trial, holder: Session) -> Session:
    """An id typed without a link; random, altered, expired and revoked tokens; a revoked link's holder at
    their next click. Returns the stranger's session."""
    stranger = trial.session()
    stranger.open("?run=run-b", "FLARE Studio")
    body = stranger.text()
    trial.table.add(
        "a second run's id typed into the URL", "refused",
        "the page asks for a share link; no run, no menu" if "share link" in body else body[:80],
        "opens with a share link" in body and OTHER_NAME not in body and "Overview" not in body,
    )  # fmt: skip
    good = trial.links["texts"]
    for attempt, token in (
        ("a guessed or random token", secrets.token_urlsafe(24)),
        ("a token one character off", good[:-1] + ("A" if good[-1] != "A" else "B")),
        ("an expired token", trial.links["expired"]),
        ("a revoked token", trial.links["revoked"]),
    ):
        stranger.open(f"?share={token}&run=run-a", "FLARE Studio")
        body = stranger.text()
        trial.table.add(
            attempt, "refused",
            "plain refusal: “This link is not valid…”" if REFUSED in body else body[:80],
            REFUSED in body and "Run A shared" not in body and "Overview" not in body,
        )  # fmt: skip
    holder.page.locator("[data-testid='stSidebarNav']").get_by_text("Validation").click()
    holder.settle(1500)
    trial.table.add(
        "a viewer's page after the owner revoked its link", "refused",
        "plain refusal at the next click" if REFUSED in holder.text() else holder.text()[:80],
        REFUSED in holder.text() and "Run A shared" not in holder.text(),
    )  # fmt: skip
    return stranger


def _downloads(trial: Trial, viewer: Session, figures: Session) -> None:
    """A's report through the link with texts; every download and message of the "figures only" link."""
    viewer.page.get_by_role("button", name="Build HTML report").click()
    report = viewer.download(viewer.page.get_by_role("button", name=re.compile("Download report")))
    trial.table.add(
        "report download", "A's report only",
        f"report of run-a ({len(report) / 1024:.0f} KB): {leaks(report, trial.snippets)} of A's texts, "
        f"{report.count(OTHER_NAME.encode()) + report.count(b'run-b')} mentions of other runs",
        b"run-a" in report and OTHER_NAME.encode() not in report and b"run-b" not in report,
    )  # fmt: skip
    files = []
    for path in ("corpus", "collapse"):  # the pages that show texts to a link with texts
        figures.open(f"{path}?share={trial.links['figures']}", TITLES[path])
        buttons = figures.page.get_by_role("button", name="Download CSV")
        files += [figures.download(buttons.nth(index)) for index in range(buttons.count())]
    figures.page.get_by_role("button", name="Build HTML report").click()
    files.append(figures.download(figures.page.get_by_role("button", name=re.compile("Download report"))))
    leaked = leaks(figures.everything() + b"".join(files), trial.snippets)
    control = leaks(viewer.everything(), trial.snippets)
    trial.table.add(
        "“figures only” link", "no text of the corpus anywhere in the HTML or the downloads",
        f"{leaked} of {len(trial.snippets)} texts found in {len(figures.received)} server messages, the pages' "
        f"HTML and {len(files)} downloads (the link with texts: {control} found)",
        leaked == 0 and control > 0 and len(files) >= 3,
    )  # fmt: skip


def _replays(trial: Trial, viewer: Session, figures: Session) -> None:
    """The owner's messages, sent by each viewer's browser and by two strangers' (no token, a wrong one)."""
    wrong = trial.session()
    wrong.open("?owner=not-the-owner-token-0123456789&run=run-a", "FLARE Studio")
    nobody = trial.session()
    nobody.open("?run=run-b", "FLARE Studio")
    targets = [
        (viewer, f"share={trial.links['texts']}&run=run-b"),
        (figures, f"share={trial.links['figures']}&run=run-b"),
        (nobody, "run=run-b"),
        (wrong, "owner=not-the-owner-token-0123456789&run=run-b"),
    ]
    for action, messages in trial.captured.items():
        replay(targets, messages)
        settle_all([who for who, _ in targets], 300)
        unchanged = snapshot(trial.store.root) == trial.before
        shown = [who.text() for who, _ in targets]
        trial.table.add(
            f"{action}, by replaying the owner's message in each viewer's and a stranger's session", "refused",
            ("nothing changed in the store; " if unchanged else "THE STORE CHANGED; ")
            + "the viewers still see run A only, the strangers the refusal",
            unchanged
            and all("Run A shared" in s and OTHER_NAME not in s for s in shown[:2])
            and all("Overview" not in s and OTHER_NAME not in s for s in shown[2:]),
        )  # fmt: skip


def _wrong_owner_token(trial: Trial, stranger: Session) -> None:
    stranger.open("?owner=guess-guess-guess-guess-guess&run=run-a", "FLARE Studio")
    refused_link = REFUSED in stranger.text()
    stranger.page.locator("input[type=password]").fill("another-wrong-guess-0123456789")
    stranger.page.get_by_role("button", name="Open").click()
    with contextlib.suppress(Exception):  # the page's answer, awaited (what it says is judged below)
        stranger.page.get_by_text("This token is not valid").wait_for(timeout=30_000)
    trial.table.add(
        "wrong owner token", "refused",
        "plain refusal, in the address and in the token field" if refused_link else stranger.text()[:80],
        refused_link and "This token is not valid" in stranger.text() and "Run A shared" not in stranger.text(),
    )  # fmt: skip


# -- what a web page the owner visits could try ------------------------------------------------------------------

#: A page of another origin opens the dashboard's WebSocket and sends the given messages once it opens;
#: resolves when the server closes it (or 8 s after it opened).
WS_FROM_A_PAGE = """async ({url, messages}) => await new Promise((resolve) => {
    const ws = new WebSocket(url, ['streamlit']);
    ws.binaryType = 'arraybuffer';
    const seen = {opened: false, received: 0};
    ws.onopen = () => {
        seen.opened = true;
        for (const m of messages) ws.send(Uint8Array.from(atob(m), (c) => c.charCodeAt(0)));
        setTimeout(() => { ws.close(); resolve(seen); }, 8000);
    };
    ws.onmessage = () => { seen.received += 1; };
    ws.onclose = () => resolve(seen);
})"""
#: A file PUT to the session's upload address with the session's own XSRF cookie, as the page's uploader
#: would; resolves to the HTTP status.
UPLOAD_FROM_A_PAGE = """async (path) => {
    const xsrf = document.cookie.split('; ').find((c) => c.startsWith('_streamlit_xsrf='));
    const form = new FormData();
    form.append('file', new Blob(['text,label\\nsupport ticket with a secret,1\\n'.repeat(1000)]), 'corpus.csv');
    const answer = await fetch(path, {method: 'PUT', body: form, credentials: 'same-origin',
                                      headers: {'X-Xsrftoken': xsrf ? xsrf.slice(16) : ''}});
    return answer.status;
}"""


@contextlib.contextmanager
def another_program():
    """The port of a small web server on 127.0.0.1 serving one page: another program of this machine."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<title>another program</title><p>hello</p>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _with_query(raw: bytes, query: str) -> bytes:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    message = BackMsg()
    message.ParseFromString(raw)
    if message.WhichOneof("type") == "rerun_script":
        message.rerun_script.query_string = query
    return message.SerializeToString()


def _forward(received: list[bytes]) -> list:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    messages = []
    for raw in received:
        message = ForwardMsg()
        message.ParseFromString(raw)
        messages.append(message)
    return messages


def _raw_websocket(port: int, host: str, messages: list[bytes]) -> str:
    """A WebSocket to the server on 127.0.0.1:``port`` whose Host (and Origin) say ``host``, sending
    ``messages`` once open: ``"refused (HTTP 403)"``, or what the server answered."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        with connect(f"ws://{host}/_stcore/stream", sock=sock, origin=f"http://{host}",
                     subprotocols=["streamlit"], open_timeout=10) as ws:  # fmt: skip
            for message in messages:
                ws.send(message)
            answers = 0
            with contextlib.suppress(TimeoutError):
                while True:
                    ws.recv(timeout=8)
                    answers += 1
            return f"accepted: {answers} messages answered"
    except InvalidStatus as exc:
        return f"refused (HTTP {exc.response.status_code})"


def _foreign_pages(trial: Trial, local_url: str) -> None:
    """Against ``flare app`` on 127.0.0.1: the owner's own page there (the control), a rebinding site's
    page (its name resolves to 127.0.0.1), a page of another origin on this machine opening the WebSocket
    with the owner's Delete, and a raw WebSocket with a foreign Host replaying it."""
    port = urlsplit(local_url).port
    delete = [_with_query(raw, "run=run-b") for raw in trial.captured["delete"]]
    context = trial.browser.new_context(viewport={"width": 1400, "height": 1200})
    page = context.new_page()
    nav = page.locator("[data-testid='stSidebarNav']")
    try:
        page.goto(f"{local_url}/runs", wait_until="commit", timeout=60_000)
        nav.get_by_text("New run").wait_for(timeout=60_000)  # the owner's menu: the owner there
        answer = page.goto(f"http://{REBIND}:{port}/runs", wait_until="commit", timeout=60_000)
        if answer.status == 200:  # a page came: wait for the menu it may get
            with contextlib.suppress(Exception):
                nav.get_by_text("New run").wait_for(timeout=30_000)
        menu = nav.get_by_text("New run").count() > 0
        trial.table.add(
            f"a foreign Host: a site's page whose name resolves to 127.0.0.1 (DNS rebinding, `{REBIND}`), "
            "against `flare app` on 127.0.0.1", "refused",
            f"HTTP {answer.status}: {'THE OWNER MENU' if menu else 'no page, no session'} (at 127.0.0.1 itself "
            "the same page gives the owner's menu)",
            answer.status == 403 and not menu,
        )  # fmt: skip
        with another_program() as other:  # a real server: Chromium blocks a page whose address it cannot tell
            page.goto(f"http://localhost:{other}/", timeout=60_000)
            seen = page.evaluate(
                WS_FROM_A_PAGE,
                {
                    "url": f"ws://127.0.0.1:{port}/_stcore/stream",
                    "messages": [base64.b64encode(m).decode() for m in delete],
                },
            )
        unchanged = snapshot(trial.store.root) == trial.before
        trial.table.add(
            "a foreign Origin: a page of another program on this machine (`http://localhost:OTHER_PORT`) opens "
            "the WebSocket and sends the owner's Delete", "refused",
            ("the WebSocket never opens" if not seen["opened"] else f"OPENED, {seen['received']} messages")
            + ("; nothing changed in the store" if unchanged else "; THE STORE CHANGED"),
            not seen["opened"] and unchanged,
        )  # fmt: skip
    finally:
        context.close()
    outcome = _raw_websocket(port, f"evil.example:{port}", delete)
    unchanged = snapshot(trial.store.root) == trial.before
    trial.table.add(
        "a raw WebSocket with `Host: evil.example` replays the owner's Delete (same widget ids in every session)",
        "refused",
        outcome + ("; nothing changed in the store" if unchanged else "; THE STORE CHANGED"),
        outcome.startswith("refused") and unchanged,
    )  # fmt: skip


def _fragment_after_revocation(trial: Trial, second: Session) -> None:
    """The second holder of the revoked link asks for a rerun of the Overview's fragment (the verdict), as
    its page would on a timer."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    sent = _forward(second.received)
    fragment = next(
        m.delta.fragment_id for m in sent if m.WhichOneof("type") == "delta" and m.delta.fragment_id
    )
    page_hash = [m.new_session.page_script_hash for m in sent if m.WhichOneof("type") == "new_session"][-1]
    mark = len(second.received)
    message = BackMsg()
    message.rerun_script.query_string = f"share={trial.links['revoked']}"
    message.rerun_script.page_script_hash = page_hash
    message.rerun_script.fragment_id = fragment
    message.rerun_script.is_auto_rerun = True
    second.server.send(message.SerializeToString())

    def answer() -> tuple[bool, int]:
        """Whether the server's answer holds the plain refusal, and how many elements of the fragment's
        own content (the verdict) it drew again."""
        again = [m for m in _forward(second.received[mark:]) if m.WhichOneof("type") == "delta"]
        drawn = [m for m in again if m.delta.fragment_id == fragment and m.delta.HasField("new_element")]
        refused = any(REFUSED.encode() in m.SerializeToString() for m in again)
        return refused, sum(1 for m in drawn if REFUSED.encode() not in m.SerializeToString())

    deadline = time.monotonic() + 30
    while answer() == (False, 0) and time.monotonic() < deadline:
        second.page.wait_for_timeout(50)
    refused, drawn = answer()
    trial.table.add(
        "a fragment rerun (the verdict's) by a session opened before its link was revoked", "refused",
        f"the server answers {'with the plain refusal' if refused else 'WITHOUT A REFUSAL'}; {drawn} elements "
        "of the verdict drawn again",
        refused and drawn == 0,
    )  # fmt: skip


def _uploads(trial: Trial, stranger: Session, viewer: Session) -> None:
    """A stranger (no credential) and a viewer PUT a file to their own sessions' upload addresses with
    their own XSRF cookies, as the page's uploader does (the owner's upload on New run was accepted)."""
    statuses = []
    for who in (stranger, viewer):
        session = [m.new_session.initialize.session_id for m in _forward(who.received)
                   if m.WhichOneof("type") == "new_session"][-1]  # fmt: skip
        statuses.append(
            who.page.evaluate(UPLOAD_FROM_A_PAGE, f"/_stcore/upload_file/{session}/{secrets.token_hex(8)}")
        )
    trial.table.add(
        "a stranger's upload (and a share link viewer's) on the exposed server", "refused, nothing kept",
        f"HTTP {statuses[0]} (the viewer's: HTTP {statuses[1]}), refused before the body is read; the owner's own "
        "upload on New run was accepted",
        statuses == [403, 403],
    )  # fmt: skip


def _report(trial: Trial, capsys) -> None:
    """Print the table, as far as it got (also written to ``TABLE``)."""
    summary = f"\n{len(trial.store.list())} runs in the store."
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(trial.table.markdown() + "\n" + summary + "\n")
    with capsys.disabled():
        print("\n" + trial.table.markdown() + summary)


def test_sharing_security_table(chromium, exposed_server, local_server, store_of_runs, capsys):
    url, owner_token = exposed_server
    texts = store_of_runs.get("run-a").corpus_frame()["text"].tolist()
    trial = Trial(url, owner_token, store_of_runs, snippets_of(texts), chromium)
    assert len(trial.snippets) >= 40
    try:
        owner = _owner_makes_links(trial)
        _owner_messages(trial, owner)
        holder, second = _owner_revokes(trial, owner)
        trial.leave(owner)  # the owner is done: the viewers and strangers act alone from here
        trial.before = snapshot(trial.store.root)  # from here on, nothing may change
        _foreign_pages(trial, local_server)
        _fragment_after_revocation(trial, second)
        viewer, figures = _viewers_go_through_the_pages(trial)
        _one_run_only(trial, viewer, figures)
        stranger = _strangers(trial, holder)
        _uploads(trial, stranger, viewer)
        _downloads(trial, viewer, figures)
        _replays(trial, viewer, figures)
        _wrong_owner_token(trial, stranger)
    finally:
        for each in trial.sessions:
            each.close()
        _report(trial, capsys)
    failed = [row for row in trial.table.rows if not row[3]]
    assert not failed, failed
    assert snapshot(trial.store.root) == trial.before
