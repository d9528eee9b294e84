"""What every session is sent as its page starts (Streamlit's ``new_session`` message), tried in a real
headless Chromium against ``flare app --host 0.0.0.0``: neither a stranger (no link, no token) nor the owner
receives the server's script path, its Streamlit or Python version, its system or the installation's ids,
and both pages still work."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import streamlit
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

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


def test_no_session_is_sent_the_servers_path_versions_or_ids(tmp_path):
    from streamlit.runtime.metrics_util import Installation

    proc, url = launch_app(tmp_path / "runs", "--host", "0.0.0.0", stderr=subprocess.PIPE)
    try:
        wait_until_up(proc, url)
        token = _owner_token(proc)
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
                    assert (
                        environment.streamlit_version,
                        environment.python_version,
                        environment.server_os,
                    ) == (
                        "",
                        "",
                        "",
                    )
                    assert (user.installation_id, user.installation_id_v3, user.installation_id_v4) == (
                        "",
                        "",
                        "",
                    )
                    assert session.initialize.session_id  # what the page needs is still there
                leaked = [name for name, value in secrets.items() if any(value in m for m in who.received)]
                assert leaked == [], f"{len(who.received)} messages hold {leaked}"
    finally:
        stop_app(proc)
