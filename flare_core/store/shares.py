"""Share links: an unguessable, revocable, optionally expiring capability to view one run.

A link carries a random token of ``TOKEN_BYTES`` bytes (192 bits, :func:`secrets.token_urlsafe`). The run
keeps only its SHA-256 digest, with the link's options, in ``<run>/shares.json`` (written atomically under
the store's lock), plus the token's first ``PREFIX_CHARS`` characters as the link's public name: enough
to list and revoke it, far too few to rebuild it (the other 26 characters carry 156 random bits). A
token is never stored or printed again after it is created.

The token of a link is looked up by its digest, compared with :func:`hmac.compare_digest`. A link that
is revoked, expired, damaged or unknown is refused the same way (``None``): nothing tells them apart.
Share links never travel in a run bundle.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from flare_core.checks import check_bool
from flare_core.errors import RunNotFound
from flare_core.store import atomic, locks
from flare_core.store.runs import Run, RunStore

SHARES = "shares.json"
TOKEN_BYTES = 24
#: The length of a token (base64 of ``TOKEN_BYTES`` bytes).
TOKEN_CHARS = 32
PREFIX_CHARS = 6
MIN_REVOKE_CHARS = 4
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
_DURATION = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True)
class ShareLink:
    """One link of a run as stored (never its token): its public ``prefix``, whether it shows the
    corpus ``texts``, and ISO times (UTC) of creation, expiry (None: never) and revocation (None: live)."""

    prefix: str
    digest: str
    texts: bool
    created: str
    expires: str | None = None
    revoked: str | None = None

    def state(self, now: _dt.datetime | None = None) -> str:
        """``"active"``, ``"expired"`` or ``"revoked"``."""
        if self.revoked:
            return "revoked"
        if self.expires and _parse_time(self.expires) <= (now or _now()):
            return "expired"
        return "active"

    def public(self) -> dict[str, Any]:
        """What may be listed: everything but the digest, and the state."""
        row = {k: v for k, v in asdict(self).items() if k != "digest"}
        row["state"] = self.state()
        return row


def digest(token: str) -> str:
    """SHA-256 (hex) of a token: what a run stores, and what a presented token is compared by."""
    return hashlib.sha256(str(token).encode("utf-8")).hexdigest()


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _parse_time(text: str) -> _dt.datetime:
    moment = _dt.datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)


def parse_expiry(value: str | None, now: _dt.datetime | None = None) -> _dt.datetime | None:
    """An expiry moment (UTC) from ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"`` (from ``now``) or an ISO date or
    time (``"2026-12-31"``: the start of that day, UTC); None or ``""``/``"never"``: no expiry. The moment
    must lie in the future."""
    if value is None or str(value).strip().lower() in ("", "never", "none"):
        return None
    now = now or _now()
    text = str(value).strip()
    match = _DURATION.fullmatch(text)
    if match:
        amount = int(match.group(1))
        if amount < 1:
            raise ValueError(f"expiry {value!r} must be at least 1 {_UNITS[match.group(2)][:-1]}")
        moment = now + _dt.timedelta(**{_UNITS[match.group(2)]: amount})
    else:
        try:
            moment = _parse_time(text)
        except ValueError:
            raise ValueError(
                f"expiry {value!r} is neither a duration (30m, 12h, 7d, 2w) nor a date (2026-12-31)"
            ) from None
    if moment <= now:
        raise ValueError(f"expiry {value!r} lies in the past ({moment.isoformat(timespec='minutes')})")
    return moment


def _read(run: Run) -> list[ShareLink]:
    """The links stored with ``run`` ([] when it has none; a damaged file counts as none: links fail
    closed)."""
    path = run.artefact(SHARES)
    try:
        with open(path, encoding="utf-8") as fh:
            rows = json.load(fh)["links"]
        return [ShareLink(**row) for row in rows]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _write(store: RunStore, run: Run, links: list[ShareLink]) -> None:
    atomic.write_json(run.artefact(SHARES), {"links": [asdict(link) for link in links]})


def create_link(
    store: RunStore, run_id: str, *, texts: bool = True, expires: _dt.datetime | None = None
) -> tuple[str, ShareLink]:
    """A new link to ``run_id``: ``(token, link)``. ``texts=False`` makes a "figures only" link (no corpus
    text on any page, hover, table or download). The token is returned once and never stored."""
    check_bool(texts, "texts")
    if expires is not None and (not isinstance(expires, _dt.datetime) or expires.tzinfo is None):
        raise ValueError(f"expires must be a timezone-aware datetime or None, got {expires!r}")
    with locks.store_lock(store.root):
        run = store.get(run_id)
        links = _read(run)
        token = _new_token({link.prefix for link in links})
        link = ShareLink(
            prefix=token[:PREFIX_CHARS],
            digest=digest(token),
            texts=bool(texts),
            created=_now().isoformat(timespec="seconds"),
            expires=expires.astimezone(_dt.timezone.utc).isoformat(timespec="seconds") if expires else None,
        )
        _write(store, run, [*links, link])
    return token, link


def _new_token(taken: set[str]) -> str:
    """A random token whose name (prefix) is new to the run and starts with a letter or digit (a name
    starting with ``-`` would read as an option on a command line)."""
    while True:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if token[0].isalnum() and token[:PREFIX_CHARS] not in taken:
            return token


def list_links(store: RunStore, run_id: str) -> list[ShareLink]:
    """Every link of ``run_id`` (active, expired and revoked), oldest first."""
    return _read(store.get(run_id))


def revoke_links(store: RunStore, run_id: str, prefix: str) -> ShareLink:
    """Revoke the link of ``run_id`` named by ``prefix`` and return it. ``prefix`` is the link's name
    (its first ``PREFIX_CHARS`` characters) or any beginning of its token of at least ``MIN_REVOKE_CHARS``
    characters, the whole token, or the whole link (``http://HOST/?share=TOKEN``). A beginning names the
    link by its first ``PREFIX_CHARS`` characters (the run keeps no more of a token than that); the whole
    token, or a link, must match the token in full. Unknown or ambiguous names raise ValueError."""
    given = _token_given(prefix)
    if len(given) < MIN_REVOKE_CHARS:
        raise ValueError(f"give at least {MIN_REVOKE_CHARS} characters of the link's token, got {given!r}")
    whole = len(given) >= TOKEN_CHARS or given != str(prefix).strip()
    with locks.store_lock(store.root):
        run = store.get(run_id)
        links = _read(run)
        head = given[:PREFIX_CHARS]
        matches = [
            i
            for i, link in enumerate(links)
            if link.prefix.startswith(head) and (not whole or hmac.compare_digest(link.digest, digest(given)))
        ]
        if not matches:
            what = "with this whole token" if whole else f"starting with {given!r}"
            raise ValueError(f"run {run_id} has no share link {what} (flare share {run_id} --list)")
        if len(matches) > 1:
            names = ", ".join(links[i].prefix for i in matches)
            raise ValueError(f"{given!r} names several links of run {run_id} ({names}): give more characters")
        (index,) = matches
        if links[index].revoked is None:
            links[index] = ShareLink(
                **{**asdict(links[index]), "revoked": _now().isoformat(timespec="seconds")}
            )
            _write(store, run, links)
        return links[index]


def _token_given(text: str) -> str:
    """The token, or beginning of one, that ``text`` gives: ``text`` itself, or the ``share`` value of a
    link (an address with ``share=``)."""
    given = str(text).strip()
    if "share=" not in given:
        if not re.fullmatch(r"[A-Za-z0-9_-]*", given):
            raise ValueError(
                f"{given!r} is neither a link's name, a beginning of its token, nor a share link "
                "(http://HOST/?share=TOKEN)"
            )
        return given
    found = parse_qs(urlsplit(given).query or given.split("?", 1)[-1]).get("share") or [""]
    if not _TOKEN.fullmatch(found[0]):
        raise ValueError(f"the link {given!r} carries no valid share token")
    return found[0]


def check_link(run: Run, token_digest: str, now: _dt.datetime | None = None) -> ShareLink | None:
    """The active link of ``run`` whose digest is ``token_digest``; None when none is (revoked, expired,
    unknown)."""
    found = None
    for link in _read(run):
        if hmac.compare_digest(link.digest, str(token_digest)):
            found = link
    return found if found is not None and found.state(now) == "active" else None


def find_link(store: RunStore, token: str, now: _dt.datetime | None = None) -> tuple[str, ShareLink] | None:
    """``(run id, link)`` of the active link whose token is ``token``, searched in every run; None for a
    malformed, unknown, revoked or expired token."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    wanted = digest(token)
    for run in store:
        try:
            link = check_link(run, wanted, now)
        except (RunNotFound, OSError, ValueError):
            continue
        if link is not None:
            return run.id, link
    return None
