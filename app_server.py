"""The dashboard as ``flare app`` serves it: ``app.py`` behind the checks at the server's edge.

``flare app`` runs ``streamlit run app_server.py``: Streamlit finds the ASGI app below and serves it, with
:class:`flare_core.edge.EdgeGuard` in front of every request. The guard refuses (403) what does not come
from the server's own names and origin, and on a server others can reach, any upload that does not come
from the owner's session (see docs/sharing.md, "Sharing safely"). ``streamlit run app.py`` serves the
pages without it, for development on this machine only.

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

import streamlit as st
from starlette.middleware import Middleware

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


threading.Thread(target=_import_page_modules, name="flare-page-imports", daemon=True).start()

app = st.App(
    "app.py",
    middleware=[
        Middleware(
            EdgeGuard,
            names=Names.from_env(st.get_option("server.address") or ""),
            owner_writes=lambda: owner_mode() != "open",
        )
    ],
)
