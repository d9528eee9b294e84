"""The run store: one folder per run holding a manifest and its artefacts.

Layout::

    <root>/<run_id>/manifest.json      corpus info, models, parameters, versions, seeds, status, timings
    <root>/<run_id>/corpus.parquet     id, text, label (the texts the run analysed)
    <root>/<run_id>/embeddings/*.npy   one float32 (N, d) matrix per model
    <root>/<run_id>/...                artefacts of each analysis (Parquet, NPY, JSON)

Every file is written atomically (``flare_core.store.atomic``). Run ids are validated so that no id can
reach outside the store (``../../etc``, absolute paths, separators).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import marshal
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from flare_core.errors import Cancelled, DamagedFile, RunNotFound, SymlinkRefused
from flare_core.store import atomic, locks
from flare_core.store.damage import MANIFEST, damaged_message, read_manifest
from flare_core.store.damage import STATUSES as _STATUSES
from flare_core.store.file_cache import FileCache

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")
_ARTEFACT_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
STATUSES = _STATUSES  # the statuses a manifest may hold (defined with the manifest reader)
FINISHED = ("done", "failed", "cancelled")
CANCEL_FLAG = "cancel.requested"


def outside_files(manifest: dict[str, Any]) -> set[str]:
    """Files the run cannot recompute: its corpus and the embeddings it was given."""
    files = {MANIFEST, "corpus.parquet", "pairs.parquet", "judgements.parquet"}
    for model in manifest.get("models", []) or []:
        if isinstance(model, dict) and model.get("kind") == "precomputed":
            files.add(f"embeddings/{safe_name(str(model.get('id')))}.npy")
    return files


def is_linked_run(path: Path) -> bool:
    """Whether the run folder ``path`` or its manifest is a symbolic link (such a run is never opened)."""
    return path.is_symlink() or (path / MANIFEST).is_symlink()


def validate_run_id(run_id: str) -> str:
    """Return ``run_id`` if it is a safe run id, else raise ``ValueError``.

    Safe ids are 1–80 characters of letters, digits, ``_`` and ``-``, starting with a letter or digit:
    no separators, no dots, so no id can name a path outside the store.
    """
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise ValueError(
            f"invalid run id {run_id!r}: use 1-80 letters, digits, '_' or '-', starting with a letter or "
            "digit"
        )
    return run_id


def safe_name(name: str) -> str:
    """A file-name-safe, collision-free stem for a model id or any label (``a/b c`` → ``a_b_c-1f2e3d4c``)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._-")[:60] or "x"
    return f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def new_run_id(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def default_root() -> Path:
    """``$FLARE_RUNS_DIR`` if set, else ``./runs``."""
    return Path(os.environ.get("FLARE_RUNS_DIR") or "runs")


#: The manifests read, serialised (each read gives a copy that its caller may change).
MANIFESTS = FileCache()


def _manifest_bytes(path: Path) -> bytes:
    return marshal.dumps(read_manifest(path))


class Run:
    """One stored run. Reads give what its files hold now; writes are atomic."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.id = path.name

    def __repr__(self) -> str:
        return f"Run({self.id!r})"

    # -- manifest -------------------------------------------------------------------------------------
    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest as the file holds it now (a new dict each time, parsed again only when the file
        has changed); ``DamagedFile`` (naming the file and what to do) when it is unreadable."""
        return marshal.loads(MANIFESTS.read(self.path / MANIFEST, _manifest_bytes))

    def update(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the manifest (top level) and write it back atomically."""
        manifest = self.manifest
        manifest.update(fields)
        manifest["updated"] = utc_now()
        atomic.write_json(self.path / MANIFEST, manifest)
        return manifest

    def set_progress(self, stage: str, done: int, total: int, message: str = "", **extra: Any) -> None:
        """Record the current stage's progress (read by the dashboard and ``flare runs``)."""
        progress = {
            "stage": stage,
            "done": int(done),
            "total": int(total),
            "message": message,
            "at": utc_now(),
        }
        progress.update(extra)
        manifest = self.manifest
        stages = manifest.setdefault("stages", {})
        before = stages.get(stage, {})
        entry = {k: progress[k] for k in ("done", "total", "message", "at")}
        entry["started"] = before.get("started", progress["at"])
        for key in ("work_done", "work_total"):  # weighted progress of a stage whose units differ in cost
            if key in extra:
                entry[key] = extra[key]
        if progress["done"] >= progress["total"]:
            entry["finished"] = before.get("finished", progress["at"])
        stages[stage] = entry
        manifest["progress"] = progress
        manifest["updated"] = progress["at"]
        atomic.write_json(self.path / MANIFEST, manifest)

    @property
    def status(self) -> str:
        return self.manifest.get("status", "queued")

    # -- cancellation ---------------------------------------------------------------------------------
    def request_cancel(self) -> None:
        atomic.write_text(self.path / CANCEL_FLAG, utc_now())

    def cancel_requested(self) -> bool:
        return (self.path / CANCEL_FLAG).exists()

    def check_cancelled(self) -> None:
        """Raise :class:`~flare_core.errors.Cancelled` when this run's cancellation was requested."""
        if self.cancel_requested():
            raise Cancelled(f"run {self.id} was cancelled")

    # -- artefacts ------------------------------------------------------------------------------------
    def artefact(self, *parts: str) -> Path:
        """Path of an artefact inside the run folder; every part is checked (no separators, no ``..``)."""
        path = self.path
        for part in parts:
            if not isinstance(part, str) or not _ARTEFACT_PART.fullmatch(part) or ".." in part:
                raise ValueError(f"invalid artefact name {part!r}")
            path = path / part
            if path.is_symlink():
                raise SymlinkRefused(
                    f"artefact {'/'.join(parts)!r} of run {self.id!r} is a symbolic link: refused"
                )
        return path

    def has(self, *parts: str) -> bool:
        """Whether the artefact exists (a symbolic link counts as missing)."""
        try:
            return self.artefact(*parts).exists()
        except SymlinkRefused:
            return False

    def save_frame(self, frame: pd.DataFrame, *parts: str) -> Path:
        return atomic.write_parquet(self.artefact(*parts), frame)

    def _read(self, parts: tuple[str, ...], read: Any) -> Any:
        """``read(path)`` of an artefact; a file that exists but cannot be read raises ``DamagedFile``."""
        path = self.artefact(*parts)
        try:
            return read(path)
        except FileNotFoundError:
            raise
        except (ValueError, OSError, EOFError, pa.ArrowException) as exc:
            raise self.damaged("/".join(parts), exc) from exc

    def damaged(self, file: str, exc: BaseException) -> DamagedFile:
        """The ``DamagedFile`` error for the artefact ``file`` (relative path) that failed with ``exc``."""
        try:
            recomputable = file not in outside_files(self.manifest)
        except DamagedFile:
            recomputable = False
        why = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        return DamagedFile(
            damaged_message(self.id, file, f"cannot be read: {why}", recomputable=recomputable),
            path=self.path / file,
            recomputable=recomputable,
        )

    def load_frame(self, *parts: str) -> pd.DataFrame:
        return self._read(parts, pd.read_parquet)

    def save_array(self, array: np.ndarray, *parts: str) -> Path:
        return atomic.write_npy(self.artefact(*parts), array)

    def load_array(self, *parts: str, mmap: bool = False) -> np.ndarray:
        return self._read(parts, lambda p: np.load(p, allow_pickle=False, mmap_mode="r" if mmap else None))

    def save_json(self, obj: Any, *parts: str) -> Path:
        return atomic.write_json(self.artefact(*parts), obj)

    def load_json(self, *parts: str) -> Any:
        def read(path: Path) -> Any:
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)

        return self._read(parts, read)

    # -- common artefacts -----------------------------------------------------------------------------
    def corpus_frame(self) -> pd.DataFrame:
        """Columns ``id``, ``text``, ``label`` (label is None/NaN when the corpus has none)."""
        return self.load_frame("corpus.parquet")

    def embedding_path(self, model_id: str) -> Path:
        return self.artefact("embeddings", f"{safe_name(model_id)}.npy")

    def save_embeddings(self, model_id: str, array: np.ndarray) -> Path:
        return atomic.write_npy(self.embedding_path(model_id), np.asarray(array, dtype=np.float32))

    def copy_embeddings(self, model_id: str, source: str | os.PathLike) -> Path:
        """Store the ``.npy`` file ``source`` (float32 (N, d), e.g. an embedding-cache entry) as the model's
        embeddings; the kernel copies it, so no array of that size passes through this process."""
        array = np.load(source, mmap_mode="r", allow_pickle=False)
        n_texts = self.manifest.get("corpus", {}).get("n_texts")
        if (
            array.ndim != 2
            or array.dtype != np.float32
            or (n_texts is not None and array.shape[0] != n_texts)
        ):
            raise ValueError(
                f"{source} holds {array.dtype} {array.shape}, expected float32 embeddings of {n_texts} texts"
            )
        del array
        return atomic.copy_file(source, self.embedding_path(model_id))

    def load_embeddings(self, model_id: str, mmap: bool = False) -> np.ndarray:
        return self.load_array("embeddings", self.embedding_path(model_id).name, mmap=mmap)

    def embedded_models(self) -> list[str]:
        """Models of the manifest whose embeddings are stored, in manifest order."""
        return [m["id"] for m in self.manifest.get("models", []) if self.embedding_path(m["id"]).exists()]


class RunStore:
    """All runs under one root folder (``--runs-dir`` / ``$FLARE_RUNS_DIR`` / ``./runs``)."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    def _path(self, run_id: str) -> Path:
        return self.root / validate_run_id(run_id)

    def create(self, manifest: dict[str, Any], run_id: str | None = None) -> Run:
        """Create a run folder with ``manifest`` (status ``queued``) and return it.

        The folder is assembled under a temporary name and renamed into place, so a run is either
        absent or complete with its manifest.
        """
        run_id = validate_run_id(run_id) if run_id else new_run_id()
        final = self.root / run_id
        if final.exists():
            raise ValueError(f"run {run_id!r} already exists")
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".staging-{run_id}-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            body = {"status": "queued", "created": utc_now(), **manifest, "id": run_id}
            body["updated"] = body["created"]
            atomic.write_json(staging / MANIFEST, body)
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return Run(final)

    def get(self, run_id: str) -> Run:
        path = self._path(run_id)
        if is_linked_run(path) or not (path / MANIFEST).is_file():
            raise RunNotFound(f"no run {run_id!r} in {self.root}")
        return Run(path)

    def exists(self, run_id: str) -> bool:
        try:
            self.get(run_id)
        except (RunNotFound, ValueError):
            return False
        return True

    def __iter__(self) -> Iterator[Run]:
        if not self.root.is_dir():
            return
        for path in sorted(self.root.iterdir()):
            if (
                RUN_ID_PATTERN.fullmatch(path.name)
                and not is_linked_run(path)
                and (path / MANIFEST).is_file()
            ):
                yield Run(path)

    def list(self) -> list[dict[str, Any]]:
        """Manifests of all readable runs, newest first."""
        manifests = []
        for run in self:
            try:
                manifests.append(run.manifest)
            except (OSError, DamagedFile):
                continue  # listed by unreadable()
        return sorted(manifests, key=lambda m: m.get("created", ""), reverse=True)

    def unreadable(self) -> list[tuple[str, str]]:
        """``(run id, message)`` of every run whose manifest cannot be read (left out of :meth:`list`)."""
        found = []
        for run in self:
            try:
                _ = run.manifest
            except DamagedFile as exc:
                found.append((run.id, str(exc)))
            except OSError as exc:
                found.append((run.id, f"manifest.json of run {run.id} cannot be read: {exc}"))
        return found

    def delete(self, run_id: str) -> None:
        """Delete a run; refused with ``RunBusy`` while another live process computes or resumes it."""
        run = self.get(run_id)
        with locks.store_lock(self.root):  # the queue cannot start it meanwhile
            locks.acquire(run.path, "deleting it", doing="delete it")
            trash = self.root / f".deleting-{run.id}-{secrets.token_hex(4)}"
            try:
                os.rename(run.path, trash)
            finally:
                locks.release(run.path)  # renamed away: nobody can take it any more
        shutil.rmtree(trash, ignore_errors=True)
