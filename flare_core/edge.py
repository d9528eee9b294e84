"""The dashboard server's edge: which requests reach the dashboard at all, checked before any session starts.

A web page the owner visits must not drive the dashboard. Two ways a page could, both closed here:

- **DNS rebinding.** A site that makes its own name resolve to 127.0.0.1 turns its pages into pages of
  "the same origin" as the dashboard: the browser sends them the answers. Its requests still carry its
  own name in the ``Host`` header, so every request (HTTP and WebSocket) whose Host is not one of the
  server's names is refused with 403: 127.0.0.1, localhost, ::1, the address ``flare app --host`` listens
  on (on every interface, ``0.0.0.0`` or ``::``: this machine's name and any IP address, which DNS cannot
  rebind), and the names the owner adds (``--allow-host``, ``FLARE_ALLOWED_HOSTS``, e.g. a proxy's).
- **Other origins.** A page served by another program on this machine (``http://localhost:3000``) or by
  any site carries its own ``Origin``. A request that carries an Origin (every WebSocket a browser opens,
  every upload) is refused unless the Origin is the dashboard's own: the very host and port of the
  request's Host.

A page of another site must not show the dashboard either: framed in it (clickjacking), the dashboard's
own WebSocket opens with the dashboard's Origin, and clicks a person makes on the framing page land on the
dashboard's buttons. Every HTTP response (pages, static files, the health check, refusals) and every
answer to a WebSocket handshake (its 101, its 403) carries :data:`SECURITY_HEADERS`: no page may frame the
dashboard (``frame-ancestors 'none'``, ``X-Frame-Options: DENY``; the dashboard frames none of its own pages),
no address of it is sent on as a referrer, and no response is sniffed into another type than it says.

On a server others can reach (one that needs the owner token, or serves share links only), the server's
metrics (:data:`CLOSED_PATHS`) are not served, and every request that writes (any method but GET, HEAD
and OPTIONS: Streamlit's file uploads) must also name a session that holds the owner's access
(:data:`OWNER_SESSIONS`, kept by the dashboard as it decides each session's access); anything else is
refused before its body is read, so nothing of it is kept.

:class:`EdgeGuard` is a plain ASGI middleware (no web framework is imported here); ``app_server.py`` puts
it in front of the dashboard, and ``flare app`` runs that.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

#: The names of this machine that a server on any address answers to.
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")
#: Addresses that mean "every interface".
EVERY_INTERFACE = ("", "0.0.0.0", "::")
#: Where ``flare app`` passes the names to the server (comma-separated), and where the owner may add some.
NAMES_ENV = "FLARE_SERVER_NAMES"
ALLOWED_HOSTS_ENV = "FLARE_ALLOWED_HOSTS"
#: Request methods that read; every other one writes.
READ_METHODS = ("GET", "HEAD", "OPTIONS")
#: The session ids (Streamlit's, one per browser tab) that hold the owner's access right now.
OWNER_SESSIONS: set[str] = set()
#: Addresses of Streamlit's that no page needs, closed on a server others can reach: the server's metrics
#: (how many sessions are open and for how long, the caches' functions and sizes).
CLOSED_PATHS = ("/_stcore/metrics",)
#: The headers every HTTP response gets (replacing any of the same name the app set).
SECURITY_HEADERS = (
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
)

_NAME = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
_UPLOAD = re.compile(r"/_stcore/upload_file/([^/]+)/")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


def check_name(name: str) -> str:
    """``name`` (lower-cased) when it can be a server name: a DNS name (``*.example.org`` for every name
    under one), or an IP address; raises ValueError with what is wrong otherwise."""
    text = str(name).strip().lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        pass
    if not _NAME.fullmatch(text) or len(text) > 253:
        raise ValueError(
            f"{str(name).strip()!r} is not a host name: give a name such as flare.example.org or "
            "*.example.org, or an IP address, without scheme, port or path"
        )
    return text


def split_names(text: str | None) -> list[str]:
    """The checked names of a comma-separated list (``FLARE_ALLOWED_HOSTS``); ``""``/None: none."""
    return [check_name(part) for part in (text or "").split(",") if part.strip()]


def server_names(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The names a server listening on ``host`` answers to: :data:`LOCAL_NAMES`, ``host`` itself (on
    every interface: this machine's host name and fully qualified name), and ``extra`` (checked)."""
    names = list(LOCAL_NAMES)
    given = str(host).strip().strip("[]").lower()
    if given in EVERY_INTERFACE:
        for found in (socket.gethostname(), socket.getfqdn()):
            try:
                names.append(check_name(found))
            except ValueError:
                continue
    else:
        names.append(check_name(given))
    names += [check_name(name) for name in extra]
    return list(dict.fromkeys(names))


def _split_host(host: str) -> tuple[str, str] | None:
    """``(name, port)`` of a Host header value (port ``""`` when absent), lower-cased; None when malformed."""
    try:
        parts = urlsplit(f"//{host}")
        port = parts.port
    except ValueError:
        return None
    if parts.hostname is None or parts.username is not None or parts.password is not None or parts.path:
        return None
    return parts.hostname.lower().rstrip("."), "" if port is None else str(port)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Names:
    """The names one server answers to, and the decisions made with them."""

    def __init__(self, names: Iterable[str], *, any_address: bool = False) -> None:
        self.names = [check_name(name) for name in names]
        self.any_address = bool(any_address)

    @classmethod
    def from_env(cls, address: str, env: MutableMapping[str, str] | None = None) -> Names:
        """The names of a server listening on ``address``: those ``flare app`` passed in :data:`NAMES_ENV`,
        else :func:`server_names` of ``address`` with the owner's :data:`ALLOWED_HOSTS_ENV`."""
        env = os.environ if env is None else env
        names = split_names(env.get(NAMES_ENV)) or server_names(
            address, split_names(env.get(ALLOWED_HOSTS_ENV))
        )
        return cls(names, any_address=str(address).strip().strip("[]") in EVERY_INTERFACE)

    def allows_name(self, name: str) -> bool:
        name = name.strip("[]")
        if _is_ip(name):
            name = str(ipaddress.ip_address(name))
            if self.any_address:
                return True
        for allowed in self.names:
            if allowed.startswith("*.") and name.endswith(allowed[1:]):
                return True
            if name == allowed:
                return True
        return False

    def allows_host(self, host: str | None) -> bool:
        """Whether a request whose Host header is ``host`` may reach the dashboard (its port aside)."""
        split = _split_host(host) if host else None
        return split is not None and self.allows_name(split[0])

    def allows_origin(self, origin: str | None, host: str | None) -> bool:
        """Whether the Origin header ``origin`` (None: none sent) is the dashboard's own: scheme http or
        https, and the same host and port as the request's Host, which must be allowed itself."""
        if origin is None:
            return True
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            return False
        default = {"http": 80, "https": 443}[parts.scheme]
        split = _split_host(host) if host else None
        if split is None:
            return False
        origin_port = "" if port in (None, default) else str(port)
        host_port = "" if split[1] in ("", "80", "443") else split[1]
        return parts.hostname.lower().rstrip(".") == split[0] and origin_port == host_port


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def with_security_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` (an ASGI response's) without any of :data:`SECURITY_HEADERS`' names, then those."""
    ours = {name for name, _ in SECURITY_HEADERS}
    return [(k, v) for k, v in headers if bytes(k).lower() not in ours] + list(SECURITY_HEADERS)


def upload_session(path: str) -> str | None:
    """The session id of an upload address (``/_stcore/upload_file/SESSION/FILE``); None for others."""
    match = _UPLOAD.search(path)
    return match.group(1) if match else None


class EdgeGuard:
    """ASGI middleware: refuses (403, before the app sees it) every HTTP request and WebSocket whose Host
    is not one of ``names``, or whose Origin is another site's; with ``owner_writes()`` true, every write
    that does not come from a session in :data:`OWNER_SESSIONS`. ``owner_writes`` is asked per request
    (the server's settings are read once it runs). Every HTTP response, the app's and its own refusals,
    and every WebSocket handshake's answer (101 or 403) carries :data:`SECURITY_HEADERS`."""

    def __init__(
        self, app: ASGIApp, names: Names | None = None, owner_writes: Callable[[], bool] | None = None
    ):
        self.app = app
        self.names = names or Names.from_env("127.0.0.1")
        self.owner_writes = owner_writes or (lambda: False)

    def refusal(self, scope: Scope) -> str | None:
        """Why the request of ``scope`` is refused (for the server's log), or None when it may pass."""
        host = _header(scope, b"host")
        if not self.names.allows_host(host):
            return f"Host {host!r} is not a name of this server"
        origin = _header(scope, b"origin")
        if not self.names.allows_origin(origin, host):
            return f"Origin {origin!r} is not this server's own ({host})"
        method = scope.get("method", "GET").upper()
        path = scope.get("path", "")
        if scope["type"] == "http" and path.rstrip("/") in CLOSED_PATHS and self.owner_writes():
            return f"{path} is not served on a server others can reach"
        if scope["type"] == "http" and method not in READ_METHODS and self.owner_writes():
            session = upload_session(scope.get("path", ""))
            if session is None or session not in OWNER_SESSIONS:
                return f"{method} {scope.get('path')} does not come from the owner's session"
        return None

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        send = _headed(send)
        why = self.refusal(scope)
        if why is None:
            await self.app(scope, receive, send)
            return
        import logging

        logging.getLogger("flare.edge").warning("refused: %s", why)
        websocket = scope["type"] == "websocket"
        if websocket and "websocket.http.response" not in (scope.get("extensions") or {}):
            await send({"type": "websocket.close", "code": 1008})  # before accept: the handshake gets 403
            return
        body = (
            b"Forbidden: FLARE Studio does not accept this request. Open the address `flare app` printed.\n"
        )
        kind = "websocket.http.response" if websocket else "http.response"  # a WebSocket's 403, headed
        await send(
            {
                "type": f"{kind}.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", b"%d" % len(body)),
                ],
            }
        )
        await send({"type": f"{kind}.body", "body": body})


def _headed(send: Callable[[Message], Awaitable[None]]) -> Callable[[Message], Awaitable[None]]:
    """``send`` that adds :data:`SECURITY_HEADERS` to the start of an HTTP response, and to a WebSocket's
    handshake answer (its 101, or its refusal)."""

    async def send_headed(message: Message) -> None:
        if message.get("type") in (
            "http.response.start",
            "websocket.accept",
            "websocket.http.response.start",
        ):
            message = {**message, "headers": with_security_headers(message.get("headers") or ())}
        await send(message)

    return send_headed
