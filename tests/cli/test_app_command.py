"""``flare app``'s Streamlit command: the file watcher is off outside development."""

from __future__ import annotations

from pathlib import Path

import pytest

from flare_core.cli.parser import build_parser
from flare_core.cli.serving import app_command

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


def _option(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def test_the_dashboard_listens_on_this_machine_unless_told_otherwise(monkeypatch):
    monkeypatch.setenv("FLARE_MAX_UPLOAD_MB", "64")
    args = build_parser().parse_args(["app", "--no-demo"])
    assert args.host == "127.0.0.1"
    from flare_core.run.inputs import max_upload_mb

    cmd = app_command(APP, port=args.port, host=args.host, max_upload_mb=max_upload_mb())
    assert _option(cmd, "--server.address") == "127.0.0.1" and _option(cmd, "--server.maxUploadSize") == "64"
    assert _option(cmd, "--server.enableXsrfProtection") == "true" == _option(cmd, "--server.enableCORS")
    assert _option(cmd, "--server.enableStaticServing") == "false"
    assert _option(cmd, "--runner.postScriptGC") == "false"  # no full collection after every page
    assert _option(cmd, "--client.showErrorDetails") == "none"  # tracebacks go to the server's log only
    exposed = app_command(APP, port=8600, host="0.0.0.0")
    assert _option(exposed, "--server.address") == "0.0.0.0"
    assert _option(exposed, "--client.showErrorDetails") == "none"


def test_a_bad_upload_limit_is_refused(monkeypatch):
    from flare_core.run.inputs import max_upload_mb

    for bad in ("0", "-5", "lots"):
        monkeypatch.setenv("FLARE_MAX_UPLOAD_MB", bad)
        with pytest.raises(ValueError, match="FLARE_MAX_UPLOAD_MB must be a positive whole number"):
            max_upload_mb()


def test_an_exposed_dashboard_gets_an_owner_token_and_says_how_to_use_it():
    from flare_core.cli.serving import owner_token, start_lines

    assert owner_token({}, host="127.0.0.1") is None  # this machine only: as before, no token
    env: dict[str, str] = {}
    token = owner_token(env, host="0.0.0.0")
    assert env["FLARE_OWNER_TOKEN"] == token and len(token) >= 43 and token != owner_token({}, host="0.0.0.0")
    lines = "\n".join(start_lines("0.0.0.0", 8600, token, generated=True))
    assert f":8600/?owner={token}" in lines and "others on your network can reach it" in lines
    given = {"FLARE_OWNER_TOKEN": "a-long-enough-owner-token"}
    assert owner_token(given, host="10.0.0.5") == "a-long-enough-owner-token"
    assert "a-long-enough" not in "\n".join(
        start_lines("10.0.0.5", 8600, given["FLARE_OWNER_TOKEN"], generated=False)
    )
    assert owner_token({"FLARE_VIEWER_ONLY": "1"}, host="0.0.0.0") is None  # share links only: no owner
    with pytest.raises(ValueError, match="at least 16 characters"):
        owner_token({"FLARE_OWNER_TOKEN": "short"}, host="0.0.0.0")
    assert start_lines("127.0.0.1", 8501, None, generated=False) == [
        "FLARE Studio: http://127.0.0.1:8501 (this machine only)"
    ]
    local_with_token = start_lines("127.0.0.1", 8501, "a-long-enough-owner-token", generated=False)
    assert "?owner=<the value of FLARE_OWNER_TOKEN>" in local_with_token[-1]
    assert "share links only" in start_lines("0.0.0.0", 8501, None, generated=False, viewer_only=True)[-1]


def test_the_repository_config_holds_the_settings_of_an_exposed_server():
    tomllib = pytest.importorskip("tomllib")
    from flare_core.run.inputs import DEFAULT_MAX_UPLOAD_MB

    config = tomllib.loads((APP.parent / ".streamlit" / "config.toml").read_text())["server"]
    assert config["address"] == "127.0.0.1" and config["maxUploadSize"] == DEFAULT_MAX_UPLOAD_MB
    assert config["enableXsrfProtection"] is True and config["enableCORS"] is True
    assert config["enableStaticServing"] is False
    assert config["allowedHosts"] == ["127.0.0.1", "localhost", "::1"]  # `streamlit run app.py` too
    client = tomllib.loads((APP.parent / ".streamlit" / "config.toml").read_text())["client"]
    assert client["showErrorDetails"] == "none"


def test_the_server_answers_to_its_own_names_and_those_the_owner_adds(tmp_path, capsys, monkeypatch):
    from flare_core.cli.parser import main
    from flare_core.edge import server_names

    args = build_parser().parse_args(
        ["app", "--allow-host", "flare.example.org", "--allow-host", "*.lab.example"]
    )
    names = server_names(args.host, args.allow_host)
    cmd = app_command(APP.parent / "app_server.py", port=8600, host=args.host, allowed_hosts=names)
    given = [cmd[i + 1] for i, part in enumerate(cmd) if part == "--server.allowedHosts"]
    assert given == ["127.0.0.1", "localhost", "::1", "flare.example.org", "*.lab.example"]
    assert server_names("10.0.0.5")[-1] == "10.0.0.5"
    monkeypatch.setenv("FLARE_ALLOWED_HOSTS", "flare.example.org, http://evil.example/")
    code = main(["app", "--headless", "--no-demo", "--runs-dir", str(tmp_path / "runs")])
    assert code == 2 and "'http://evil.example/' is not a host name" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # nothing started
