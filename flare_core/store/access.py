"""Who may do what in a run store: the owner, a share link's viewer, or nobody; enforced where data is read.

Every session of the dashboard holds one :class:`Access`. Its :meth:`Access.store` is the only store the
session reads, and every action asks first::

    access.require("delete", run_id)        # AccessDenied unless this session may
    if access.allows("label", run.id): ...  # to show or hide a control

- The **owner** may do everything (``ACTIONS``).
- A **viewer** (a share link) may ``read`` its one run, and see its corpus ``texts`` only when the link
  says so. Its store (:class:`ViewerStore`) knows no other run (an id of another run is "not found",
  like one that does not exist), lists nothing else, and refuses every write: creating, deleting,
  importing, queueing, cancelling and sharing reach the store's folder or a run's files, and both refuse
  (:class:`ViewerRun`). A "figures only" viewer's run blanks the corpus texts and drops text columns from
  every table, and replaces any corpus text in the manifest and JSON artefacts
  (:mod:`flare_core.store.texts`).
- **Nobody** (no credential, or a refused one) may do nothing and sees no run.

:func:`resolve_access` decides a session's access from what it presents (a share token, an owner token)
and what it held before; a session never gains more than its credential gives.
"""

from __future__ import annotations

import datetime as _dt
import hmac
import ipaddress
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.checks import check_choice
from flare_core.errors import AccessDenied, RunNotFound
from flare_core.store import shares
from flare_core.store.damage import MANIFEST
from flare_core.store.runs import Run, RunStore, is_linked_run, validate_run_id
from flare_core.store.texts import TextMatcher, strip_frame

#: Everything a session may be allowed: look at a run, see its corpus texts, see the list of runs, and the
#: actions that change the store.
ACTIONS = ("read", "texts", "list", "start", "cancel", "delete", "resume", "import", "label", "share")
#: The actions a share link can ever give (``texts`` only when the link says so), on its one run.
VIEWER_ACTIONS = ("read", "texts")
#: How a session without a credential is treated: ``open`` (the server listens on this machine only:
#: it is the owner), ``token`` (the owner must present the owner token), ``off`` (no owner: share links only).
OWNER_MODES = ("open", "token", "off")
#: The shortest owner token accepted (``flare app`` makes 43-character ones).
MIN_OWNER_TOKEN_CHARS = 16

_WORDS = {
    "read": "open this run",
    "texts": "show this run's texts",
    "list": "list the runs of this dashboard",
    "start": "start runs",
    "cancel": "cancel runs",
    "delete": "delete runs",
    "resume": "resume runs",
    "import": "import runs",
    "label": "label texts",
    "share": "create or revoke share links",
}


@dataclass(frozen=True)
class Access:
    """One session's rights: ``role`` is ``owner``, ``viewer`` or ``none``; a viewer's ``run_id``, whether
    it sees corpus ``texts``, and the ``digest`` and public ``prefix`` of its link; ``refused`` says that
    a credential was presented and refused (the page says so, and nothing more)."""

    role: str
    run_id: str | None = None
    texts: bool = False
    digest: str | None = None
    prefix: str | None = None
    refused: bool = False

    @classmethod
    def owner(cls) -> Access:
        return cls("owner", texts=True)

    @classmethod
    def viewer(cls, run_id: str, *, texts: bool, digest: str, prefix: str | None = None) -> Access:
        return cls("viewer", validate_run_id(run_id), bool(texts), digest, prefix)

    @classmethod
    def nobody(cls, *, refused: bool = False) -> Access:
        return cls("none", refused=refused)

    def allows(self, action: str, run_id: str | None = None) -> bool:
        """Whether this session may do ``action`` (one of ``ACTIONS``), on ``run_id`` when it names one."""
        check_choice(action, "action", ACTIONS)
        if self.role == "owner":
            return True
        if self.role != "viewer" or action not in VIEWER_ACTIONS:
            return False
        if run_id is not None and run_id != self.run_id:
            return False
        return action != "texts" or self.texts

    def require(self, action: str, run_id: str | None = None) -> None:
        """Raise ``AccessDenied`` unless :meth:`allows` (the message says what, in words)."""
        if not self.allows(action, run_id):
            who = "A share link" if self.role == "viewer" else "This session"
            raise AccessDenied(f"{who} cannot {_WORDS[action]}.")

    @property
    def scope(self) -> str:
        """A key naming what this access sees (for caches shared between sessions)."""
        return "owner" if self.role == "owner" else f"{self.role}:{self.run_id}:{int(self.texts)}"

    def store(self, store: RunStore) -> RunStore:
        """The store this session reads: ``store`` itself for the owner, else a :class:`ViewerStore`."""
        if self.role == "owner":
            return store
        root = store._root if isinstance(store, ViewerStore) else store.root
        return ViewerStore(root, self.run_id if self.role == "viewer" else None, texts=self.texts)


def is_local_address(host: str | None) -> bool:
    """Whether a server listening on ``host`` can be reached from this machine only (``localhost``, a
    loopback address). None or ``""`` (every interface, Streamlit's default) and ``0.0.0.0`` are not."""
    if not host:
        return False
    if str(host).strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host).strip().strip("[]")).is_loopback
    except ValueError:
        return False


def owner_token_matches(given: str | None, expected: str | None) -> bool:
    """Whether ``given`` is the owner token, compared in constant time (of digests, so the length of the
    token does not show either); False when there is no owner token."""
    if not given or not expected:
        return False
    return hmac.compare_digest(shares.digest(given), shares.digest(expected))


def check_owner_token(token: str) -> str:
    """``token`` when it can serve as an owner token (``MIN_OWNER_TOKEN_CHARS`` or more, no spaces)."""
    if not isinstance(token, str) or len(token) < MIN_OWNER_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ValueError(
            f"the owner token must be at least {MIN_OWNER_TOKEN_CHARS} characters without spaces "
            "(leave FLARE_OWNER_TOKEN unset and `flare app` makes one)"
        )
    return token


def resolve_access(
    store: RunStore,
    *,
    mode: str,
    held: Access | None = None,
    share: str | None = None,
    owner: str | None = None,
    owner_token: str | None = None,
    now: _dt.datetime | None = None,
) -> Access:
    """The access of a session that holds ``held`` (None: a new session) and presents the share token
    ``share`` and/or the owner token ``owner`` (the ``owner_token`` of the server), in owner ``mode``.

    An owner token is checked first (refused in mode ``off``, or when wrong); then a share token (a
    viewer of its run, or refused); a session that presents neither keeps what it held, a viewer's link
    checked again (revoked or expired: refused). A new session without a credential is the owner in
    mode ``open``, else nobody."""
    check_choice(mode, "mode", OWNER_MODES)
    if owner:
        ok = mode != "off" and owner_token_matches(owner, owner_token)
        return Access.owner() if ok else Access.nobody(refused=True)
    if share:
        if (
            held is not None
            and held.role == "viewer"
            and hmac.compare_digest(held.digest or "", shares.digest(share))
        ):
            return _still_valid(store, held, now)
        found = shares.find_link(store, share, now)
        if found is None:
            return Access.nobody(refused=True)
        run_id, link = found
        return Access.viewer(run_id, texts=link.texts, digest=link.digest, prefix=link.prefix)
    if held is not None:
        return _still_valid(store, held, now) if held.role == "viewer" else held
    return Access.owner() if mode == "open" else Access.nobody()


def _still_valid(store: RunStore, held: Access, now: _dt.datetime | None) -> Access:
    try:
        link = shares.check_link(store.get(held.run_id), held.digest or "", now)
    except (RunNotFound, ValueError, OSError):
        link = None
    return held if link is not None else Access.nobody(refused=True)


# -- the store a viewer reads -------------------------------------------------------------------------------


class ViewerStore(RunStore):
    """The run store as a share link sees it: its one run (``run_id``; None: none), read-only, its corpus
    texts hidden unless ``texts``. Other ids are "not found"; the store's folder is out of reach
    (``root`` raises ``AccessDenied``), so nothing that writes to the store can run."""

    def __init__(self, root: str | os.PathLike, run_id: str | None, *, texts: bool) -> None:
        self._root = Path(root)
        self.run_id = run_id
        self.texts = bool(texts)

    def __repr__(self) -> str:
        return f"ViewerStore(run={self.run_id!r}, texts={self.texts})"

    @property
    def root(self) -> Path:  # type: ignore[override]
        raise AccessDenied("A share link cannot reach the run store.")

    def _path(self, run_id: str) -> Path:
        return self._root / validate_run_id(run_id)

    def get(self, run_id: str) -> Run:
        path = self._path(run_id)
        if run_id != self.run_id or is_linked_run(path) or not (path / MANIFEST).is_file():
            raise RunNotFound(f"no run {run_id!r} here")
        return ViewerRun(path, texts=self.texts)

    def __iter__(self):
        if self.run_id is not None and self.exists(self.run_id):
            yield self.get(self.run_id)

    def create(self, manifest: dict[str, Any], run_id: str | None = None) -> Run:
        raise AccessDenied("A share link cannot start runs.")

    def delete(self, run_id: str) -> None:
        raise AccessDenied("A share link cannot delete runs.")


def _refuse(self: ViewerRun, *args: Any, **kwargs: Any) -> Any:
    raise AccessDenied(f"Run {self.id} is shared read-only: a share link cannot change it.")


class ViewerRun(Run):
    """A run opened through a share link: every write refused; without ``texts``, every read of a table,
    the manifest or a JSON artefact comes without corpus texts (the corpus's ``text`` column blanked, with
    the length of each text in ``n_chars``)."""

    def __init__(self, path: Path, *, texts: bool) -> None:
        super().__init__(path)
        self.texts = bool(texts)

    update = set_progress = request_cancel = _refuse
    save_frame = save_array = save_json = save_embeddings = copy_embeddings = _refuse

    def _matcher(self) -> TextMatcher:
        path = Run.artefact(self, "corpus.parquet")
        try:
            stat = path.stat()
        except FileNotFoundError:
            return TextMatcher([])
        return _corpus_matcher(str(path), stat.st_mtime_ns, stat.st_size)

    @property
    def manifest(self) -> dict[str, Any]:
        manifest = super().manifest
        return manifest if self.texts else self._matcher().scrub(manifest)

    def load_frame(self, *parts: str) -> pd.DataFrame:
        frame = super().load_frame(*parts)
        if self.texts:
            return frame
        if parts == ("corpus.parquet",):
            stripped = strip_frame(frame, set(), is_corpus=True)
            if "text" in frame.columns:
                stripped["n_chars"] = frame["text"].fillna("").astype(str).str.len().to_numpy()
            return stripped
        return strip_frame(frame, self._matcher().exact, is_corpus=False)

    def load_json(self, *parts: str) -> Any:
        loaded = super().load_json(*parts)
        return loaded if self.texts else self._matcher().scrub(loaded)


@lru_cache(maxsize=4)
def _corpus_matcher(path: str, mtime_ns: int, size: int) -> TextMatcher:
    """The corpus texts of one ``corpus.parquet`` (cached while the file stays the same)."""
    frame = pd.read_parquet(path, columns=["text"])
    return TextMatcher(frame["text"].fillna("").astype(str).tolist())
