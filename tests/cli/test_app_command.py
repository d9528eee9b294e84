"""``flare app``'s Streamlit command: the file watcher is off outside development."""

from __future__ import annotations

from pathlib import Path

import pytest

from flare_core.cli.commands import app_command
from flare_core.cli.parser import build_parser

APP = Path(__file__).resolve().parents[2] / "app.py"


def _watcher(cmd: list[str]) -> str | None:
    return cmd[cmd.index("--server.fileWatcherType") + 1] if "--server.fileWatcherType" in cmd else None


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [([], "", "none"), ([], "0", "none"), (["--dev"], "", None), ([], "1", None), ([], "true", None)],
)
def test_the_file_watcher_is_off_unless_developing(monkeypatch, argv, env, expected):
    monkeypatch.setenv("FLARE_DEV", env)
    args = build_parser().parse_args(["app", "--headless", "--no-demo", "--port", "8600", *argv])
    cmd = app_command(APP, port=args.port, headless=args.headless, dev=args.dev)
    assert _watcher(cmd) == expected
    assert cmd[cmd.index("run") + 1] == str(APP) and cmd[cmd.index("--server.port") + 1] == "8600"
