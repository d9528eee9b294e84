"""The dashboard as ``flare app`` serves it: ``app.py`` behind the checks at the server's edge.

``flare app`` runs ``streamlit run app_server.py``: Streamlit finds the ASGI app below and serves it, with
:class:`flare_core.edge.EdgeGuard` in front of every request. The guard refuses (403) what does not come
from the server's own names and origin, and on a server others can reach, any upload that does not come
from the owner's session (see docs/sharing.md, "Sharing safely"). ``streamlit run app.py`` serves the
pages without it, for development on this machine only.

Every session, a stranger's included, is sent Streamlit's ``new_session`` message as its page starts; as
Streamlit writes it, it names the server's script path, the Streamlit and Python versions, the operating
system and the installation's ids. :class:`SessionInfoFilter` rewrites it on its way out: the script by
its file name only, the versions, system and ids empty (the page needs none of them).

As the server starts, a background thread imports what the pages import (:func:`page_modules`), so that
the first visit of a page does not wait for its libraries (torch alone, which the collapse page's table
of pairs needs, takes seconds on a loaded machine).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import threading
from pathlib import Path
from typing import Any

import streamlit as st
from starlette.middleware import Middleware
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from dashboard.session import owner_mode
from flare_core.edge import EdgeGuard, Names

#: Imported by the pages inside functions, so not seen in their import statements.
LATER_IMPORTS = ("flare_core.analyses.collapse", "flare_core.store.export")


def page_modules(folder: Path = Path(__file__).resolve().parent / "dashboard") -> list[str]:
    """The project's modules that the dashboard's files import (at any depth of the file; a name imported
    from a module counts as a module too, the import of those that are not fails quietly), then
    :data:`LATER_IMPORTS`."""
    found: list[str] = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [n for n in names if n.split(".")[0] in ("flare_core", "dashboard") and n not in found]
    return found + [n for n in LATER_IMPORTS if n not in found]


def _import_page_modules() -> None:
    for name in page_modules():
        with contextlib.suppress(Exception):  # a page reports its own import error when it is opened
            importlib.import_module(name)


#: What every ``new_session`` message holds (the Streamlit version, the server's folder): a message that
#: holds one of them is read to see whether it is one.
MARKERS = (st.__version__.encode(), str(Path(__file__).resolve().parent).encode())


def scrubbed_new_session(data: bytes) -> bytes:
    """``data`` (a serialized ``ForwardMsg``) with nothing of the server in it when it is a ``new_session``
    message: the main script by its file name, versions, system and installation ids empty; any other
    message as it is."""
    message = ForwardMsg()
    message.ParseFromString(data)
    if not message.HasField("new_session"):
        return data
    session = message.new_session
    session.main_script_path = Path(session.main_script_path).name
    environment = session.initialize.environment_info
    environment.streamlit_version = environment.python_version = environment.server_os = ""
    user = session.initialize.user_info
    user.installation_id = user.installation_id_v3 = user.installation_id_v4 = ""
    return message.SerializeToString()


class SessionInfoFilter:
    """ASGI middleware: each WebSocket message that holds one of :data:`MARKERS` is rewritten by
    :func:`scrubbed_new_session` (every ``new_session`` message does; other messages pass as they are)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        async def filtered(message: Any) -> None:
            data = message.get("bytes") if message.get("type") == "websocket.send" else None
            if data and any(marker in data for marker in MARKERS):
                message = {**message, "bytes": scrubbed_new_session(data)}
            await send(message)

        await self.app(scope, receive, filtered)


threading.Thread(target=_import_page_modules, name="flare-page-imports", daemon=True).start()

app = st.App(
    "app.py",
    middleware=[
        Middleware(
            EdgeGuard,
            names=Names.from_env(st.get_option("server.address") or ""),
            owner_writes=lambda: owner_mode() != "open",
        ),
        Middleware(SessionInfoFilter),
    ],
)
