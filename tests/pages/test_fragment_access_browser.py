"""A share link revoked (``flare share RUN --revoke PREFIX``) or expired while its viewer's Overview is open,
against a real ``flare app``: the session reruns the Overview's fragment of the verdict three times, as the
browser sends such reruns over the WebSocket (on a timer while a run works; any client can send them).

- Over a plain WebSocket client, on a finished run: each rerun must get nothing of the run (not the
  verdict it showed, not a verdict written after the refusal), no traceback, and the refusal page once.
- In a real headless Chromium, on a queued run (the fragments rerun every 3 s on the browser's timers): the
  page must become the refusal page, get nothing of the run and no traceback, and its timers must stop.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from flare_core.answer.stored import load_verdict, save_verdict
from flare_core.store import shares
from flare_core.store.runs import Run, RunStore
from tests.pages.app_process import BROWSER_MARKS, headless_chromium, start_app, stop_app
from tests.pages.browser_sessions import Session
from tests.support import flare, planted_run

pytestmark = BROWSER_MARKS

REFUSED = "This link is not valid"
FIRST, AFTER_REVOKE, AFTER_EXPIRY = "VERDICTSHOWNFIRST", "NEWAFTERREVOKE", "NEWAFTEREXPIRY"
#: How long a refused page is watched for its timers after the three reruns (more than two periods of 3 s).
WATCH_S = 7.5


@dataclass(frozen=True)
class Outcome:
    """What one session got once its link was no longer valid."""

    refusal_page: bool  # it got the refusal page (its title and the plain sentence)
    full_runs: int  # whole-page runs: 1, the refusal page once
    shown_before: bool  # it had got the verdict's headline before (the counts below can fail)
    old_verdict_after: int
    new_verdict_after: int
    tracebacks: int  # exception elements, and "Traceback" anywhere in what it got
    timer_reruns: int  # fragment reruns its own browser sent once the refusal page was there


def _forward(raw: list[bytes]) -> list:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    messages = []
    for each in raw:
        message = ForwardMsg()
        message.ParseFromString(each)
        messages.append(message)
    return messages


def _fragment_rerun(query: str, page: str, fragment: str) -> bytes:
    """The message a browser sends to rerun ``fragment`` of ``page`` (its script hash) on its timer."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    message = BackMsg()
    message.rerun_script.query_string = query
    message.rerun_script.page_script_hash = page
    message.rerun_script.fragment_id = fragment
    message.rerun_script.is_auto_rerun = True
    message.rerun_script.widget_states.SetInParent()
    return message.SerializeToString()


def _fragment_reruns(raw: list[bytes]) -> int:
    """How many of the browser's messages ``raw`` ask for a fragment rerun."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    found = 0
    for each in raw:
        message = BackMsg()
        message.ParseFromString(each)
        found += message.WhichOneof("type") == "rerun_script" and bool(message.rerun_script.fragment_id)
    return found


def _verdict_fragment(received: list[bytes], marker: str) -> tuple[str, str]:
    """``(page script hash, fragment id)`` of the fragment whose elements showed ``marker``."""
    messages = _forward(received)
    page = [m.new_session.page_script_hash for m in messages if m.WhichOneof("type") == "new_session"][-1]
    for message in messages:
        kind = message.WhichOneof("type")
        if kind == "delta" and message.delta.fragment_id and marker.encode() in message.SerializeToString():
            return page, message.delta.fragment_id
    raise AssertionError(f"no fragment drew {marker!r}")


def _outcome(before: list[bytes], after: list[bytes], old: str, new: str, **extra) -> Outcome:
    """The :class:`Outcome` of a session that got ``before`` then ``after`` (the server's messages)."""
    messages = _forward(after)
    blob = b"".join(after) + extra.pop("page", b"")
    elements = [m.delta.new_element for m in messages if m.WhichOneof("type") == "delta"]
    page = [
        m.SerializeToString() for m in messages if m.WhichOneof("type") == "delta" and not m.delta.fragment_id
    ]
    return Outcome(
        refusal_page=extra.pop(  # the whole page's elements (not a fragment's): its title and the refusal
            "refusal_page",
            any(REFUSED.encode() in e for e in page) and any(b"FLARE Studio" in e for e in page),
        ),
        full_runs=sum(
            1 for m in messages if m.WhichOneof("type") == "new_session" and not m.metadata.run.fragment_ids
        ),
        shown_before=old.encode() in b"".join(before),
        old_verdict_after=blob.count(old.encode()),
        new_verdict_after=blob.count(new.encode()),
        tracebacks=sum(1 for e in elements if e.WhichOneof("type") == "exception") + blob.count(b"Traceback"),
        timer_reruns=extra.pop("timer_reruns", 0),
    )


@dataclass
class Shared:
    """The store's one run with two share links (one to revoke, one expiring), served by ``flare app``."""

    run: Run
    root: Path
    url: str
    revoked: str
    prefix: str
    expiring: str
    expires: dt.datetime

    def revoke(self) -> None:
        flare("share", self.run.id, "--revoke", self.prefix, runs_dir=self.root)

    def expire(self) -> None:
        """Wait until the expiring link has expired (its expiry is kept to the second)."""
        time.sleep(max(0.0, (self.expires - dt.datetime.now(dt.timezone.utc)).total_seconds() + 1))

    def write_verdict(self, marker: str) -> None:
        save_verdict(self.run, {**load_verdict(self.run), "headline": f"Use {marker}"})


@pytest.fixture
def shared(tmp_path, request):
    """A finished run whose verdict reads ``FIRST``, two links (the expiring one ``request.param`` seconds
    from now), and ``flare app`` over the store."""
    planted, _ = planted_run(tmp_path, with_labels=True)
    store = RunStore(planted.path.parent)
    revoked, link = shares.create_link(store, planted.id)
    expires = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=request.param)
    expiring, _ = shares.create_link(store, planted.id, expires=expires)
    save_verdict(planted, {**load_verdict(planted), "headline": f"Use clear {FIRST}"})
    proc, url = start_app(planted.path.parent)
    try:
        yield Shared(planted, planted.path.parent, url, revoked, link.prefix, expiring, expires)
    finally:
        stop_app(proc)


# -- over a plain WebSocket client ----------------------------------------------------------------------------


class Client:
    """A WebSocket client of the dashboard that sends what a browser sends and keeps what it gets."""

    def __init__(self, url: str, query: str) -> None:
        from websockets.sync.client import connect

        address = urlsplit(url)
        self.query = query
        self.ws = connect(f"ws://{address.netloc}/_stcore/stream", origin=url, subprotocols=["streamlit"],
                          open_timeout=30)  # fmt: skip
        self.received: list[bytes] = []

    def send(self, message: bytes) -> None:
        """Send ``message`` and keep what the server answers until its run has finished (60 s at most)."""
        self.ws.send(message)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                raw = self.ws.recv(timeout=15)
            except TimeoutError:
                return  # a message that starts no run gets no answer
            self.received.append(raw)
            got = _forward([raw])[0]
            if (
                got.WhichOneof("type") == "script_finished"
                and got.script_finished != got.FINISHED_EARLY_FOR_RERUN
            ):
                return  # a run finished early for a rerun: the rerun follows
        raise AssertionError("the server did not finish its run within 60 s")

    def open(self) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        message = BackMsg()
        message.rerun_script.query_string = self.query
        message.rerun_script.widget_states.SetInParent()
        self.send(message.SerializeToString())

    def close(self) -> None:
        self.ws.close()


def _client_refused(
    client: Client, refuse: Callable[[], None], old: str, new: str, shared: Shared
) -> Outcome:
    page, fragment = _verdict_fragment(client.received, old)
    mark = len(client.received)
    refuse()
    shared.write_verdict(new)
    for _ in range(3):
        client.send(_fragment_rerun(client.query, page, fragment))
    return _outcome(client.received[:mark], client.received[mark:], old, new)


@pytest.mark.parametrize("shared", [25], indirect=True)
def test_fragment_reruns_over_the_websocket_get_nothing_after_revoke_or_expiry(shared):
    holder, later = (
        Client(shared.url, f"share={shared.revoked}"),
        Client(shared.url, f"share={shared.expiring}"),
    )
    try:
        for client in (holder, later):
            client.open()
        assert dt.datetime.now(dt.timezone.utc) < shared.expires - dt.timedelta(seconds=5), "opened too late"
        outcomes = {
            "revoked": _client_refused(holder, shared.revoke, FIRST, AFTER_REVOKE, shared),
            "expired": _client_refused(later, shared.expire, FIRST, AFTER_EXPIRY, shared),
        }
    finally:
        for client in (holder, later):
            client.close()
    expected = Outcome(True, 1, True, 0, 0, 0, 0)
    assert outcomes == {"revoked": expected, "expired": expected}


# -- in Chromium, on a queued run -----------------------------------------------------------------------------


class Recorded(Session):
    """A :class:`Session` that also keeps what its browser sent (the messages of its own timers)."""

    def __init__(self, browser, url: str) -> None:
        self.sent: list[bytes] = []
        super().__init__(browser, url, [])

    def _route(self, ws) -> None:
        server = ws.connect_to_server()
        self.server = server

        def to_server(message) -> None:
            raw = message if isinstance(message, bytes) else message.encode()
            self.sent.append(raw)
            if self.hold:
                self.held.append(raw)
            else:
                server.send(message)

        def to_page(message) -> None:
            self.received.append(message if isinstance(message, bytes) else message.encode())
            ws.send(message)

        ws.on_message(to_server)
        server.on_message(to_page)

    def waited(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Whether ``condition()`` came true within ``timeout`` seconds (looked at every 50 ms)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                return False
            self.page.wait_for_timeout(50)
        return True

    def quiet(self) -> None:
        """Wait until the page's script is not running and the server has sent nothing for a second."""
        last, since = len(self.received), time.monotonic()
        while time.monotonic() - since < 1.0 or self._script_state() != "notRunning":
            self.page.wait_for_timeout(50)
            if len(self.received) != last:
                last, since = len(self.received), time.monotonic()


def _page_refused(who: Recorded, refuse: Callable[[], None], old: str, new: str, shared: Shared) -> Outcome:
    """``refuse()`` while the page shows the verdict ``old`` (nothing of the browser's reaches the server
    meanwhile), write the verdict ``new``, let the browser's timers run until the page is the refusal page
    (30 s at most), send three reruns of the verdict's fragment as they did, and watch the page
    ``WATCH_S`` seconds more."""
    page, fragment = _verdict_fragment(who.received, old)
    who.hold = True
    who.quiet()
    mark = len(who.received)
    refuse()
    shared.write_verdict(new)
    who.hold = False  # the browser's next timer asks for a fragment rerun
    refused = who.waited(lambda: REFUSED in who.text() and who.ready("FLARE Studio"), 30)
    since = len(who.sent)
    query = urlsplit(who.page.url).query
    for _ in range(3):  # then three more, as the timer sent them, into the refusal page
        who.server.send(_fragment_rerun(query, page, fragment))
        who.waited(lambda: who._script_state() != "notRunning", 1.5)  # its run starts, or none does
        who.waited(lambda: who._script_state() == "notRunning", 20)
    who.page.wait_for_timeout(WATCH_S * 1000)
    return _outcome(who.received[:mark], who.received[mark:], old, new, page=who.page.content().encode(),
                    refusal_page=refused, timer_reruns=_fragment_reruns(who.sent[since:]))  # fmt: skip


@pytest.mark.parametrize("shared", [60], indirect=True)
def test_a_refused_page_in_chromium_gets_nothing_more_and_its_timers_stop(shared):
    shared.run.update(status="queued", pid=None)  # after the server's start: nothing starts it
    with headless_chromium() as browser:
        holder, later = Recorded(browser, shared.url), Recorded(browser, shared.url)
        people = ((holder, shared.revoked), (later, shared.expiring))
        for who, started in [(who, who.start(f"?share={token}")) for who, token in people]:
            who.wait("Overview", started)
        assert holder.waited(lambda: all(FIRST in who.text() for who in (holder, later)), 60), "no verdict"
        assert dt.datetime.now(dt.timezone.utc) < shared.expires - dt.timedelta(seconds=5), "opened too late"
        outcomes = {"revoked": _page_refused(holder, shared.revoke, FIRST, AFTER_REVOKE, shared)}
        # the expiring link's session, valid until then, drew the verdict written after the revocation
        outcomes["expired"] = _page_refused(later, shared.expire, AFTER_REVOKE, AFTER_EXPIRY, shared)
        for who in (holder, later):
            who.close()
    expected = Outcome(True, 1, True, 0, 0, 0, 0)
    assert outcomes == {"revoked": expected, "expired": expected}
