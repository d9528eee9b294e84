"""``flare app`` and ``flare share``: serving the dashboard, and giving one run to someone else.

``flare app`` listens on 127.0.0.1 unless ``--host`` says otherwise. On any other address the server is
reachable by others: it then needs the owner token (``FLARE_OWNER_TOKEN``, or one made and printed at
start-up) for everything but share links. Streamlit gets the settings of an exposed server from the
command line as well as from ``.streamlit/config.toml`` (see :func:`app_command`). Whatever the address,
it serves ``app_server.py``: every request must name the server by one of its names (those of the address,
and those of ``--allow-host`` and ``FLARE_ALLOWED_HOSTS``) and come from its own origin
(:mod:`flare_core.edge`).
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd

from flare_core.edge import ALLOWED_HOSTS_ENV, EVERY_INTERFACE, NAMES_ENV, server_names, split_names
from flare_core.store import shares
from flare_core.store.access import check_owner_token, is_local_address
from flare_core.store.atomic import to_json
from flare_core.store.runs import RunStore

#: ``flare share`` prints links to this dashboard address unless ``--url`` or ``FLARE_PUBLIC_URL`` says
#: otherwise.
DEFAULT_URL = "http://127.0.0.1:8501"


# -- flare share ---------------------------------------------------------------------------------------------


def cmd_share(args: argparse.Namespace) -> int:
    store = RunStore(args.runs_dir)
    if args.list:
        return _list_links(store, args)
    if args.revoke:
        link = shares.revoke_links(store, args.run_id, args.revoke)
        print(f"revoked link {link.prefix} of run {args.run_id}: it no longer opens the run")
        return 0
    expires = shares.parse_expiry(args.expires)
    token, link = shares.create_link(store, args.run_id, texts=not args.no_texts, expires=expires)
    base = (args.url or os.environ.get("FLARE_PUBLIC_URL") or DEFAULT_URL).rstrip("/")
    url = f"{base}/?share={token}"
    if args.json:
        print(to_json({"run_id": args.run_id, "url": url, "token": token, **link.public()}))
        return 0
    what = "with its texts" if link.texts else "figures only (no corpus text)"
    until = f"until {link.expires}" if link.expires else "until revoked"
    print(f"share link to run {args.run_id}, {what}, {until}:", file=sys.stderr)
    print(url)
    print(
        f"It is shown only now. Revoke it with: flare share {args.run_id} --revoke {link.prefix}",
        file=sys.stderr,
    )
    return 0


def _list_links(store: RunStore, args: argparse.Namespace) -> int:
    rows = [link.public() for link in shares.list_links(store, args.run_id)]
    if args.json:
        print(to_json(rows))
        return 0
    if not rows:
        print(f"run {args.run_id} has no share links")
        return 0
    frame = pd.DataFrame(rows)
    frame["shows"] = frame.pop("texts").map({True: "texts and figures", False: "figures only"})
    frame["expires"] = frame["expires"].fillna("never")
    print(frame[["prefix", "shows", "created", "expires", "state"]].to_string(index=False))
    return 0


# -- flare app -----------------------------------------------------------------------------------------------


def cmd_app(args: argparse.Namespace) -> int:
    app = Path(__file__).resolve().parents[2] / "app_server.py"
    if not app.is_file():
        raise FileNotFoundError(f"the dashboard script {app} is missing; run from a source checkout")
    names = server_names(
        args.host, [*split_names(os.environ.get(ALLOWED_HOSTS_ENV)), *(args.allow_host or [])]
    )
    from flare_core.run import jobs
    from flare_core.run.inputs import max_upload_mb

    store = RunStore(args.runs_dir)
    env = dict(os.environ)
    env["FLARE_RUNS_DIR"] = str(store.root.resolve())
    env[NAMES_ENV] = ",".join(names)
    token = owner_token(env, host=args.host)
    upload_mb = max_upload_mb()
    jobs.dispatch(store)  # runs that waited in the queue while nothing ran start now
    if not args.no_demo:
        from flare_core.encoders.prepare import prepare_log, start_in_background
        from flare_core.run.demo import ensure_demo_run

        run_id = ensure_demo_run(store, background=True)
        print(f"demo run: {run_id} (it pauses while a run you start works)", file=sys.stderr)
        if start_in_background() is not None:  # a first launch: the pool's models are built meanwhile
            print(
                "making every model of the pool ready in the background (a few minutes, once; "
                f"progress in {prepare_log()})",
                file=sys.stderr,
            )
    generated = token != os.environ.get("FLARE_OWNER_TOKEN")
    viewer_only = _truthy_in(env, "FLARE_VIEWER_ONLY")
    for line in start_lines(args.host, args.port, token, generated=generated, viewer_only=viewer_only):
        print(line, file=sys.stderr)
    cmd = app_command(
        app,
        port=args.port,
        headless=args.headless,
        dev=args.dev,
        host=args.host,
        max_upload_mb=upload_mb,
        allowed_hosts=["*"] if args.host.strip().strip("[]") in EVERY_INTERFACE else names,
    )
    return subprocess.call(cmd, env=env)


def owner_token(env: dict[str, str], *, host: str) -> str | None:
    """The owner token of a server on ``host``: ``FLARE_OWNER_TOKEN`` when set (checked), else on an
    address others can reach a new random one (256 bits), written into ``env`` for the dashboard; None
    on this machine only, or when the dashboard serves share links only (``FLARE_VIEWER_ONLY``)."""
    given = env.get("FLARE_OWNER_TOKEN")
    if given:
        return check_owner_token(given)
    if is_local_address(host) or _truthy_in(env, "FLARE_VIEWER_ONLY"):
        return None
    env["FLARE_OWNER_TOKEN"] = secrets.token_urlsafe(32)
    return env["FLARE_OWNER_TOKEN"]


def shown_host(host: str) -> str:
    """The name a person reaches the server on ``host`` by: this machine's name on every interface."""
    return socket.gethostname() if host.strip().strip("[]") in ("0.0.0.0", "::", "") else host


def _truthy_in(env: dict[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in ("1", "true", "yes")


def start_lines(
    host: str, port: int, token: str | None, *, generated: bool, viewer_only: bool = False
) -> list[str]:
    """What ``flare app`` says at start-up about who can reach the dashboard and how the owner gets in."""
    shown = shown_host(host)
    if is_local_address(host):
        lines = [f"FLARE Studio: http://{host}:{port} (this machine only)"]
    else:
        lines = [
            f"FLARE Studio listens on {host}:{port}: others on your network can reach it.",
            "They see nothing without a share link (flare share RUN_ID).",
        ]
    if token and generated:
        lines.append(f"Owner link (keep it private, like a password): http://{shown}:{port}/?owner={token}")
    elif token:
        lines.append(f"Owner link: http://{shown}:{port}/?owner=<the value of FLARE_OWNER_TOKEN>")
    if viewer_only:
        lines.append("FLARE_VIEWER_ONLY is set: no one is the owner here; share links only.")
    return lines


def app_command(
    app: Path,
    *,
    port: int,
    headless: bool = False,
    dev: bool = False,
    host: str = "127.0.0.1",
    max_upload_mb: int = 200,
    allowed_hosts: list[str] | None = None,
) -> list[str]:
    """The ``streamlit run`` command of the dashboard on ``host``:``port``.

    Outside development (``dev`` False and ``FLARE_DEV`` unset) Streamlit's file watcher is off: it would
    otherwise watch the run store, whose files change all through a run. The server settings of
    ``.streamlit/config.toml`` are repeated here so that they hold wherever ``flare app`` starts:
    XSRF protection and CORS on, uploads limited to what the New run page reads, static file serving
    off (nothing of the run store is ever served as a file), and error details kept in the server's log
    instead of the browser (``client.showErrorDetails`` ``none``: whoever opens the page, owner or viewer,
    sees no traceback, type or server path; the pages show a plain sentence with an id to quote).
    ``allowed_hosts`` (the names of :func:`flare_core.edge.server_names`) go to Streamlit's own Host
    check of its WebSocket (``server.allowedHosts``); ``app_server.py`` checks every request against them.
    On every interface (``["*"]``) the check is ``app_server.py``'s alone, as it accepts any IP address
    there too.
    Streamlit's full garbage collection after every script run is off (``runner.postScriptGC``): with
    the models' libraries loaded it held the interpreter for 0.1 to 0.3 s after each page of each
    session, while the other sessions' pages waited; Python's own collector still runs as objects pile up.
    ``browser.serverAddress`` is the name ``flare app`` prints, so that Streamlit never looks the
    machine's external IP up. The tables offer no CSV download of their own (``client.disableDataExport``:
    Streamlit's writes formulas as they are; the pages' "Download CSV" neutralises them).
    """
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port)]
    cmd += ["--server.address", host, "--server.maxUploadSize", str(int(max_upload_mb))]
    cmd += ["--server.enableXsrfProtection", "true", "--server.enableCORS", "true"]
    cmd += ["--server.enableStaticServing", "false", "--browser.gatherUsageStats", "false"]
    cmd += ["--runner.postScriptGC", "false"]
    for name in allowed_hosts or ():
        cmd += ["--server.allowedHosts", name]
    cmd += ["--client.showErrorDetails", "none"]
    # an address of its own, so that Streamlit never looks the machine's external IP up on the network
    cmd += ["--browser.serverAddress", shown_host(host)]
    # the tables' own "Download as CSV" writes formulas as they are: the pages' Download CSV neutralises them
    cmd += ["--client.disableDataExport", "true"]
    if not (dev or _truthy_in(os.environ, "FLARE_DEV")):
        cmd += ["--server.fileWatcherType", "none"]
    if headless:
        cmd += ["--server.headless", "true"]
    return cmd
