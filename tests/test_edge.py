"""The server's edge (``flare_core.edge``): which Host and Origin reach the dashboard, and who may write."""

from __future__ import annotations

import asyncio

import pytest

from flare_core import edge
from flare_core.edge import EdgeGuard, Names, server_names


def test_a_server_answers_to_its_own_names_only():
    local = Names(server_names("127.0.0.1"))
    for host in ("127.0.0.1:8501", "localhost:8501", "[::1]:8501", "LOCALHOST", "127.0.0.1"):
        assert local.allows_host(host), host
    for host in (
        "attacker-rebind.example:8501",
        "evil.example",
        "127.0.0.2:8501",
        "",
        None,
        "a@127.0.0.1",
        "x/y",
    ):
        assert not local.allows_host(host), host
    named = Names(server_names("10.0.0.5", ["flare.example.org", "*.lab.example"]))
    assert named.allows_host("10.0.0.5:8501") and named.allows_host("flare.example.org")
    assert named.allows_host("a.lab.example:443") and not named.allows_host("lab.example.evil")
    assert not named.allows_host("10.0.0.6:8501")  # one address: no other
    every = Names(server_names("0.0.0.0"), any_address=True)
    assert every.allows_host("192.168.1.20:8501") and every.allows_host("[fe80::1]:8501")  # DNS cannot rebind
    assert not every.allows_host("attacker-rebind.example:8501")
    with pytest.raises(ValueError, match="is not a host name"):
        server_names("127.0.0.1", ["http://flare.example.org/"])


def test_an_origin_must_be_the_requests_own_host_and_port():
    names = Names(server_names("127.0.0.1"))
    assert names.allows_origin(None, "127.0.0.1:8501")  # not sent: not a browser's page
    assert names.allows_origin("http://127.0.0.1:8501", "127.0.0.1:8501")
    assert names.allows_origin("https://flare.example.org", "flare.example.org")  # a proxy on port 443
    for origin in ("http://localhost:3000", "http://127.0.0.1:8502", "http://localhost:8501", "null",
                   "file://", "http://evil.example:8501"):  # fmt: skip
        assert not names.allows_origin(origin, "127.0.0.1:8501"), origin


def _call(guard: EdgeGuard, kind: str, host: str, *, origin: str | None = None, method: str = "GET",
          path: str = "/") -> tuple[int | None, bool]:  # fmt: skip
    """``(status or close code, whether the app behind was reached)`` of one request through ``guard``."""
    reached, sent = [], []
    headers = [(b"host", host.encode())] + ([(b"origin", origin.encode())] if origin else [])

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"x" * 10, "more_body": False}

    guard.app = app
    scope = {"type": kind, "method": method, "path": path, "headers": headers}
    asyncio.run(guard(scope, receive, send))
    code = sent[0].get("status", sent[0].get("code")) if sent else None
    return code, bool(reached)


def test_the_guard_refuses_before_the_app_sees_the_request(monkeypatch):
    monkeypatch.setattr(edge, "OWNER_SESSIONS", {"owner-session"})
    exposed = EdgeGuard(None, Names(server_names("0.0.0.0"), any_address=True), owner_writes=lambda: True)
    assert _call(exposed, "http", "127.0.0.1:8501") == (None, True)
    assert _call(exposed, "http", "evil.example:8501") == (403, False)
    assert _call(exposed, "websocket", "evil.example:8501", origin="http://evil.example:8501") == (
        1008,
        False,
    )
    assert _call(exposed, "websocket", "127.0.0.1:8501", origin="http://localhost:3000") == (1008, False)
    assert _call(exposed, "websocket", "127.0.0.1:8501", origin="http://127.0.0.1:8501") == (None, True)
    upload = "/_stcore/upload_file/{}/file-1"
    put = {"origin": "http://127.0.0.1:8501", "method": "PUT"}
    assert _call(exposed, "http", "127.0.0.1:8501", path=upload.format("owner-session"), **put) == (
        None,
        True,
    )
    assert _call(exposed, "http", "127.0.0.1:8501", path=upload.format("a-stranger"), **put) == (403, False)
    assert _call(exposed, "http", "127.0.0.1:8501", method="POST", path="/_stcore/agent/interact") == (
        403,
        False,
    )
    local = EdgeGuard(None, Names(server_names("127.0.0.1")), owner_writes=lambda: False)
    assert _call(local, "http", "127.0.0.1:8501", path=upload.format("anyone"), **put) == (None, True)
    # the server's metrics: not served where others can reach the server (this machine only: served)
    assert _call(exposed, "http", "127.0.0.1:8501", path="/_stcore/metrics") == (403, False)
    assert _call(exposed, "http", "127.0.0.1:8501", path="/_stcore/metrics/") == (403, False)
    assert _call(exposed, "http", "127.0.0.1:8501", path="/_stcore/health") == (None, True)
    assert _call(local, "http", "127.0.0.1:8501", path="/_stcore/metrics") == (None, True)


def _response_headers(guard: EdgeGuard, host: str, *, app_headers: list[tuple[bytes, bytes]]) -> dict:
    """The headers (lower-cased names, each name's values) of the one HTTP response ``guard`` sends for a
    GET with Host ``host`` in front of an app that answers 200 with ``app_headers``."""
    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": list(app_headers)})
        await send({"type": "http.response.body", "body": b"<html></html>"})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    guard.app = app
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"host", host.encode())]}
    asyncio.run(guard(scope, receive, send))
    start = [m for m in sent if m["type"] == "http.response.start"]
    assert len(start) == 1 and sent[-1]["type"] == "http.response.body"
    found: dict[bytes, list[bytes]] = {}
    for name, value in start[0]["headers"]:
        found.setdefault(bytes(name).lower(), []).append(bytes(value))
    return {"status": start[0]["status"], **{k.decode(): v for k, v in found.items()}}


def test_every_response_forbids_framing_referrers_and_sniffing():
    expected = {
        "content-security-policy": [b"frame-ancestors 'none'"],
        "x-frame-options": [b"DENY"],
        "referrer-policy": [b"no-referrer"],
        "x-content-type-options": [b"nosniff"],
    }
    guard = EdgeGuard(None, Names(server_names("127.0.0.1")))
    page = _response_headers(guard, "127.0.0.1:8501", app_headers=[(b"content-type", b"text/html")])
    assert page["status"] == 200 and page["content-type"] == [b"text/html"]
    assert {k: page[k] for k in expected} == expected
    # an app's own weaker value of one of them is replaced, not sent beside ours
    weaker = [(b"X-Frame-Options", b"SAMEORIGIN"), (b"Content-Security-Policy", b"frame-ancestors *")]
    replaced = _response_headers(guard, "127.0.0.1:8501", app_headers=weaker)
    assert {k: replaced[k] for k in expected} == expected
    refused = _response_headers(guard, "evil.example:8501", app_headers=[])  # the guard's own 403
    assert refused["status"] == 403 and {k: refused[k] for k in expected} == expected


def test_a_websocket_handshake_answer_carries_the_security_headers():
    """Accepted (the app's ``websocket.accept``) or refused (a 403 through the server's denial response),
    the answer to a WebSocket handshake carries :data:`edge.SECURITY_HEADERS`; a server without the denial
    response gets the close before accept (its own 403)."""
    guard = EdgeGuard(None, Names(server_names("127.0.0.1")))
    expected = dict(edge.SECURITY_HEADERS)

    def answer(host: str, extensions: dict) -> list[dict]:
        sent = []

        async def app(scope, receive, send):
            await send({"type": "websocket.accept", "subprotocol": "streamlit"})

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "websocket.connect"}

        guard.app = app
        scope = {"type": "websocket", "path": "/_stcore/stream", "extensions": extensions,
                 "headers": [(b"host", host.encode()), (b"origin", f"http://{host}".encode())]}  # fmt: skip
        asyncio.run(guard(scope, receive, send))
        return sent

    accepted = answer("127.0.0.1:8501", {"websocket.http.response": {}})
    assert accepted[0]["type"] == "websocket.accept" and dict(accepted[0]["headers"]) == expected
    refused = answer("evil.example:8501", {"websocket.http.response": {}})
    assert [m["type"] for m in refused] == ["websocket.http.response.start", "websocket.http.response.body"]
    assert refused[0]["status"] == 403 and expected.items() <= dict(refused[0]["headers"]).items()
    assert answer("evil.example:8501", {}) == [{"type": "websocket.close", "code": 1008}]
