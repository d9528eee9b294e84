"""What every session is sent as its page starts (Streamlit's ``new_session`` message), tried in a real
headless Chromium against ``flare app --host 0.0.0.0``: neither a stranger (no link, no token) nor the owner
receives the server's script path, its Streamlit or Python version, its system or the installation's ids,
and both pages still work. And the answer to a WebSocket handshake, accepted (101) or refused (403),
carries the security headers every HTTP response carries."""

from __future__ import annotations

import base64
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import streamlit
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from flare_core.edge import SECURITY_HEADERS
from tests.pages.app_process import (
    BROWSER_MARKS,
    ROOT,
    headless_chromium,
    launch_app,
    stop_app,
    wait_until_up,
)
from tests.pages.browser_sessions import Session

pytestmark = BROWSER_MARKS


def _owner_token(proc: subprocess.Popen) -> str:
    printed: list[str] = []
    threading.Thread(target=lambda: printed.extend(proc.stderr), daemon=True).start()
    deadline = time.monotonic() + 30
    while not (found := re.search(r"\?owner=([A-Za-z0-9_-]{40,})", "".join(printed))):
        assert time.monotonic() < deadline, f"no owner link printed: {printed}"
        time.sleep(0.05)
    return found.group(1)


def _new_sessions(received: list[bytes]) -> list:
    found = []
    for data in received:
        message = ForwardMsg()
        message.ParseFromString(data)
        if message.HasField("new_session"):
            found.append(message.new_session)
    return found


@pytest.fixture(scope="module")
def exposed(tmp_path_factory):
    """``(url, owner token)`` of ``flare app --host 0.0.0.0`` over an empty store."""
    proc, url = launch_app(tmp_path_factory.mktemp("runs"), "--host", "0.0.0.0", stderr=subprocess.PIPE)
    try:
        wait_until_up(proc, url)
        yield url, _owner_token(proc)
    finally:
        stop_app(proc)


def _handshake(url: str, host: str) -> tuple[int, dict[str, str]]:
    """``(status, headers)`` of the answer to a browser's WebSocket handshake on the page's stream, with
    ``host`` as its Host and the dashboard's own Origin."""
    port = int(url.rsplit(":", 1)[1])
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {base64.b64encode(b'0123456789abcdef').decode()}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: http://{host}\r\nSec-WebSocket-Protocol: streamlit\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(request.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
    return int(head[0].split()[1]), {k.lower(): v for k, v in headers.items()}


def test_a_websocket_handshake_is_answered_with_the_security_headers(exposed):
    url, _ = exposed
    expected = {name.decode(): value.decode() for name, value in SECURITY_HEADERS}
    port = url.rsplit(":", 1)[1]
    for host, status in ((f"127.0.0.1:{port}", 101), (f"evil.example:{port}", 403)):
        got, headers = _handshake(url, host)
        assert got == status, (host, got, headers)
        assert {k: headers.get(k) for k in expected} == expected, (host, headers)


def test_a_stranger_gets_no_metrics_of_the_server(exposed):
    """Streamlit's metrics (open sessions, their time, the caches' functions): 403 where others can reach
    the server; what the page itself needs still answers."""
    url, _ = exposed
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=20)
    assert refused.value.code == 403 and b"session" not in refused.value.read()
    for path in ("/_stcore/health", "/_stcore/host-config"):
        with urllib.request.urlopen(f"{url}{path}", timeout=20) as answer:
            assert answer.status == 200


def test_no_session_is_sent_the_servers_path_versions_or_ids(exposed):
    from streamlit.runtime.metrics_util import Installation

    url, token = exposed
    with headless_chromium() as browser:
        stranger, owner = Session(browser, url, []), Session(browser, url, [])
        stranger.open("", "FLARE Studio")
        assert "This dashboard opens with a share link from its owner." in stranger.text()
        owner.open(f"?owner={token}", "Overview")
        assert "New run" in owner.sidebar()
        secrets = {
            "the server's folder": str(ROOT).encode(),
            "the Streamlit version": streamlit.__version__.encode(),
            "the Python version": ".".join(map(str, sys.version_info)).encode(),
            "the installation id": Installation.instance().installation_id.encode(),
        }
        for who in (stranger, owner):
            sessions = _new_sessions(who.received)
            assert sessions, "no new_session message was received"
            for session in sessions:
                assert session.main_script_path in ("app.py", "app_server.py"), session.main_script_path
                environment, user = session.initialize.environment_info, session.initialize.user_info
                versions = (environment.streamlit_version, environment.python_version, environment.server_os)
                ids = (user.installation_id, user.installation_id_v3, user.installation_id_v4)
                assert versions == ("", "", "") and ids == ("", "", "")
                assert session.initialize.session_id  # what the page needs is still there
            leaked = [name for name, value in secrets.items() if any(value in m for m in who.received)]
            assert leaked == [], f"{len(who.received)} messages hold {leaked}"
