"""``flare app`` starts without asking anything of the outside world: on ``--host 0.0.0.0`` Streamlit would
look its external IP up (``net_util.get_external_ip``: an HTTP request to checkip.amazonaws.com) to print
an "External URL". The server runs with a proxy that is a local listener, so any such request reaches the
listener whether or not this machine has a network."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.pages.app_process import APP_SETTINGS, ROOT, free_port, stop_app, wait_until_up


class _Listener(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def _answer(self) -> None:
        type(self).seen.append(f"{self.command} {self.path}")
        self.send_response(502)
        self.end_headers()

    do_GET = do_CONNECT = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.mark.slow
def test_an_exposed_server_makes_no_external_lookup_at_start(tmp_path):
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    address = f"http://127.0.0.1:{proxy.server_address[1]}"
    env = {k: v for k, v in os.environ.items() if k not in APP_SETTINGS} | {
        "PYTHONPATH": str(ROOT),
        **{name: address for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
        "NO_PROXY": "",
        "no_proxy": "",
    }
    port = free_port()
    log = tmp_path / "app.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flare_core.cli", "app", "--headless", "--no-demo", "--host", "0.0.0.0",
             "--port", str(port), "--runs-dir", str(tmp_path / "runs")],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            wait_until_up(proc, f"http://127.0.0.1:{port}", timeout=90)
            deadline = time.monotonic() + 15  # Streamlit prints its addresses once the server has started
            while "URL:" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2.5)  # a lookup takes up to 2 s (two tries of 1 s) before its warning is written
        finally:
            stop_app(proc)
            proxy.shutdown()
    printed = log.read_text()
    assert "URL:" in printed, printed
    assert _Listener.seen == [], f"the server asked the network: {_Listener.seen}"
    assert "external ip" not in printed.lower() and "External URL" not in printed, printed


def test_the_tables_offer_no_csv_of_their_own_wherever_the_dashboard_starts():
    """``flare app`` and ``streamlit run app.py`` (the repository's config) both turn Streamlit's own table
    download off; the server's address is given, on every interface this machine's name."""
    from flare_core.cli.serving import app_command

    tomllib = pytest.importorskip("tomllib")

    for host, shown in (("127.0.0.1", "127.0.0.1"), ("0.0.0.0", socket.gethostname())):
        cmd = app_command(ROOT / "app_server.py", port=8600, host=host)
        assert cmd[cmd.index("--client.disableDataExport") + 1] == "true"
        assert cmd[cmd.index("--browser.serverAddress") + 1] == shown
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["disableDataExport"] is True
