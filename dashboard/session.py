"""This browser session's access (owner, a share link's viewer, or nobody) and the run store it reads.

The access is decided on every full rerun (and checked again at the start of every fragment run,
:func:`access_fragment`) from the link the session presents (``?share=TOKEN``,
``?owner=TOKEN``) and what it held before (:func:`flare_core.store.access.resolve_access`), and kept in
the session's state, which lives on the server: a widget, a query parameter or a replayed message can
change what the session presents, never what a credential gives. Every page reads runs through
:func:`store`, the store of this access.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import streamlit as st
from streamlit.logger import get_logger
from streamlit.runtime.scriptrunner import get_script_run_ctx

from flare_core.edge import OWNER_SESSIONS
from flare_core.store.access import Access, is_local_address, owner_token_matches, resolve_access
from flare_core.store.runs import RunStore

SHARE_PARAM = "share"
OWNER_PARAM = "owner"
_ACCESS = "flare-access"
_CREDENTIAL = "flare-credential"
_LOGGER = get_logger("flare.dashboard")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def root_store() -> RunStore:
    """The whole run store, unscoped: only for deciding a session's access."""
    return RunStore(os.environ.get("FLARE_RUNS_DIR") or "runs")


def owner_mode() -> str:
    """``off`` with ``FLARE_VIEWER_ONLY=1`` (share links only); ``token`` when an owner token is set or the
    server listens on an address others can reach; else ``open`` (this machine only: the owner)."""
    if _truthy("FLARE_VIEWER_ONLY"):
        return "off"
    if os.environ.get("FLARE_OWNER_TOKEN") or not is_local_address(st.get_option("server.address")):
        return "token"
    return "open"


def session_access() -> Access:
    """Decide this session's access now (app.py calls it once per full rerun) and keep the credential in
    the address, so that a reload or another page keeps it."""
    held = st.session_state.get(_ACCESS)
    share = st.query_params.get(SHARE_PARAM)
    owner = st.query_params.get(OWNER_PARAM)
    mode = owner_mode()
    access = resolve_access(
        root_store(),
        mode=mode,
        held=held,
        share=share,
        owner=owner,
        owner_token=os.environ.get("FLARE_OWNER_TOKEN"),
    )
    if access.role == "none" and _logged_in_owner(mode):
        access = Access.owner()
    _hold(access)
    if share or owner:
        st.session_state[_CREDENTIAL] = (OWNER_PARAM, owner) if owner else (SHARE_PARAM, share)  # as resolved
    credential = st.session_state.get(_CREDENTIAL)
    if access.role == "none":  # a refused credential leaves the address too
        st.session_state.pop(_CREDENTIAL, None)
        for name in (SHARE_PARAM, OWNER_PARAM):
            if name in st.query_params:
                del st.query_params[name]
    elif credential and st.query_params.get(credential[0]) != credential[1]:
        st.query_params[credential[0]] = credential[1]
    return access


def _hold(access: Access) -> None:
    """Keep ``access`` as this session's, and tell the server's edge whether the session is the owner's
    (only the owner's session may upload on a server others can reach)."""
    st.session_state[_ACCESS] = access
    ctx = get_script_run_ctx()
    if ctx is not None:
        if access.role == "owner":
            OWNER_SESSIONS.add(ctx.session_id)
        else:
            OWNER_SESSIONS.discard(ctx.session_id)


def access_fragment(run_every: float | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``st.fragment(run_every=...)`` whose every run first decides the session's access afresh (a share
    link revoked or expired since the page was drawn, or a link's run deleted, is refused) and draws the
    fragment only while the session may read; the fragment reads what it shows through :func:`store` in
    that run, never through objects its page captured before. The first refused run makes the whole app
    run again: the refusal page, which has no fragments, so the page's timers (``run_every``) stop; any
    later fragment run draws the plain refusal in the fragment's place and nothing else. An error inside
    the fragment is shown plainly with an id, its traceback kept in the server's log
    (:func:`errors_shown_plainly`). Every fragment of the dashboard is made with this."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            held = current_access()
            now = resolve_access(root_store(), mode=owner_mode(), held=held)
            if now != held:
                _hold(now)
            if now.role == "none":
                if held.role != "none":  # refused on this run: the whole page becomes the refusal page
                    st.rerun(scope="app")
                refusal_message(now)
                st.stop()
            with errors_shown_plainly(func.__name__):
                return func(*args, **kwargs)

        return st.fragment(checked, run_every=run_every)

    return decorate


@contextlib.contextmanager
def errors_shown_plainly(where: str) -> Iterator[None]:
    """Run the block; an uncaught error in it is shown to the person as one plain sentence with an id to
    quote (no traceback, no type, no server path), and written with its traceback and that id to the
    server's log (logger ``flare.dashboard``). ``st.stop()`` and ``st.rerun()`` pass through."""
    try:
        yield
    except Exception:  # noqa: BLE001 - every error of a page
        # Streamlit's own stop and rerun are not Exceptions: they pass through
        error_id = secrets.token_hex(4)
        _LOGGER.error("error %s in %s", error_id, where, exc_info=True)
        st.error(
            f"Something went wrong on this page. The error is recorded with the id {error_id}: give this id "
            "to the owner of this dashboard.",
            icon=":material/error:",
        )


def credential_query() -> str:
    """``&owner=TOKEN`` when this session came in with the owner token (a link it opens in a new tab is a
    new session, which needs it again), else ``""``. Share-link sessions never see links to other runs."""
    credential = st.session_state.get(_CREDENTIAL)
    if current_access().role == "owner" and credential and credential[0] == OWNER_PARAM:
        return f"&{OWNER_PARAM}={credential[1]}"
    return ""


def current_access() -> Access:
    """The access this session holds (decided by :func:`session_access`; nobody before that)."""
    return st.session_state.get(_ACCESS) or Access.nobody()


def store() -> RunStore:
    """The run store as this session may see it: all of it for the owner, one run for a share link."""
    return current_access().store(root_store())


def texts_shown(run_id: str) -> bool:
    """Whether this session sees the corpus texts of ``run_id`` (not through a "figures only" link)."""
    return current_access().allows("texts", run_id)


def owner_emails() -> list[str]:
    """The e-mail addresses of ``FLARE_OWNER_EMAILS`` (comma-separated), lower-cased."""
    return [e.strip().lower() for e in os.environ.get("FLARE_OWNER_EMAILS", "").split(",") if e.strip()]


def _logged_in_owner(mode: str) -> bool:
    """Whether an identity provider (Streamlit's ``st.login``) signed in one of ``FLARE_OWNER_EMAILS``."""
    if mode != "token" or not owner_emails():
        return False
    try:
        user = st.user.to_dict()
    except Exception:  # noqa: BLE001 - no [auth] section configured: no login
        return False
    return bool(user.get("is_logged_in")) and str(user.get("email", "")).lower() in owner_emails()


def refusal_message(access: Access) -> None:
    """Why a session may see nothing, in one plain sentence."""
    if access.refused:
        st.error(
            "This link is not valid. Ask the person who shared it for a new one.", icon=":material/block:"
        )
    else:
        st.info("This dashboard opens with a share link from its owner.", icon=":material/lock:")


def refusal_page(access: Access) -> None:
    """The whole page of a session that may see nothing: why in one plain sentence, and the owner's way in."""
    st.title("FLARE Studio")
    refusal_message(access)
    mode = owner_mode()
    if mode != "token":
        return
    if owner_emails():
        st.button("Log in", on_click=st.login, help="Sign in with the identity provider of this dashboard.")
    with st.form("owner-login", clear_on_submit=True, border=False):
        token = st.text_input("Owner token", type="password", help="Printed by `flare app` when it started.")
        if st.form_submit_button("Open") and token:
            if owner_token_matches(token, os.environ.get("FLARE_OWNER_TOKEN")):
                st.query_params[OWNER_PARAM] = token
                st.rerun()
            st.error("This token is not valid.", icon=":material/block:")
