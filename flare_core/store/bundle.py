"""Run bundles: one zip file that carries a stored run from one machine to another.

A bundle holds the run folder's manifest and artefacts (``manifest.json``, ``*.parquet``, ``*.npy``,
``*.json``) at the root of the archive, with the folder structure of the run::

    manifest.json
    corpus.parquet
    embeddings/<safe model name>.npy
    sufficiency/flow/scores.parquet
    ...

Worker files (``worker.log``, ``worker.heartbeat``, ``cancel.requested``), the run's share links
(``shares.json``: a link is for this machine's dashboard only), unfinished ``.tmp-*`` files
and every file of another kind (torch checkpoints ``*.pt`` kept for resuming, logs) are left out: a
bundle never contains a pickle.

``import_run`` (:mod:`flare_core.store.bundle_import`) treats a bundle as untrusted input and checks all of it
before anything is written into the store: member names and types, sizes and compression ratios (from the
central directory, and again while decompressing, since headers can lie), the manifest, every array (loaded
without pickles, numeric, one embedding row per text) and every Parquet and JSON file. Only then is the run
extracted into a staging folder inside the store and renamed into place.
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from flare_core.checks import check_bool
from flare_core.errors import BundleError
from flare_core.store import atomic
from flare_core.store.runs import (
    _ARTEFACT_PART,
    MANIFEST,
    Run,
)
from flare_core.store.shares import SHARES
from flare_core.store.texts import strip_frame

ALLOWED_SUFFIXES = (".json", ".parquet", ".npy")
SKIPPED_NAMES = ("worker.log", "worker.heartbeat", "cancel.requested", SHARES)  # share links stay home
MAX_DEPTH = 5
MAX_MEMBERS = 100_000
MAX_RATIO = 200.0
RATIO_MIN_BYTES = 1 << 20  # members (and archives) below 1 MiB cannot be bombs; their ratio is not checked
REQUIRED_MANIFEST_KEYS = ("id", "models", "corpus", "params", "status")
_DRIVE = re.compile(r"^[A-Za-z]:")
_CHUNK = 1 << 20
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed member dates: the same run gives the same bundle


# -- export --------------------------------------------------------------------------------------------------


def _bundle_members(run: Run) -> Iterator[tuple[str, Path]]:
    """``(archive name, file path)`` of every file of the run that belongs in a bundle, sorted."""
    for path in sorted(run.path.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        parts = path.relative_to(run.path).parts
        if path.name in SKIPPED_NAMES or path.suffix not in ALLOWED_SUFFIXES:
            continue  # worker files, torch checkpoints (*.pt) and anything else that is not data
        if len(parts) > MAX_DEPTH or not all(_ARTEFACT_PART.fullmatch(p) and ".." not in p for p in parts):
            continue  # .tmp-* files, staging folders and names the importer would refuse
        yield "/".join(parts), path


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def export_run(run: Run, out: str | os.PathLike, *, include_texts: bool = True) -> Path:
    """Write ``run`` as a zip bundle at ``out`` (atomically) and return its path.

    ``out`` may be a folder, in which case the bundle is ``<out>/<run id>.zip``. With
    ``include_texts=False`` the corpus texts are replaced by ``""`` in ``corpus.parquet``, every text
    column of the other Parquet files (``text``, ``text_a``, ``text_b``..., or any column holding
    corpus texts) is dropped, and the bundled manifest says ``"texts_stripped": true``.

    Raises ``BundleError`` when ``run`` is not a stored run or ``out`` cannot be written.
    """
    if not isinstance(run, Run):
        raise BundleError(f"export_run expects a Run from a RunStore; got {type(run).__name__}")
    check_bool(include_texts, "include_texts", error=BundleError)
    if not (run.path / MANIFEST).is_file():
        raise BundleError(f"run {run.id!r} has no manifest at {run.path / MANIFEST}")
    out = Path(out)
    if out.is_dir():
        out = out / f"{run.id}.zip"
    try:
        out.resolve().relative_to(run.path.resolve())
    except ValueError:
        pass
    else:
        raise BundleError(f"cannot write the bundle of run {run.id!r} inside the run folder ({out})")

    try:
        manifest = run.manifest
        corpus_texts: set[str] = set()
        if not include_texts and run.has("corpus.parquet"):
            corpus_texts = {t for t in run.corpus_frame()["text"].astype(str) if t}
    except OSError as exc:  # a delete renamed the folder after the check above
        raise _export_failed(run, out, exc) from exc
    manifest["texts_stripped"] = bool(manifest.get("texts_stripped")) or not include_texts

    def _write(tmp: str) -> None:
        written = set()
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for name, path in _bundle_members(run):
                written.add(name)
                if name == MANIFEST:
                    data = atomic.to_json(manifest).encode("utf-8")
                elif not include_texts and name.endswith(".parquet"):
                    frame = pd.read_parquet(path)
                    data = _parquet_bytes(
                        strip_frame(frame, corpus_texts, is_corpus=name == "corpus.parquet")
                    )
                else:
                    data = path.read_bytes()
                info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                zf.writestr(info, data)
        if MANIFEST not in written or not (run.path / MANIFEST).is_file():  # deleted (renamed) meanwhile
            raise FileNotFoundError(f"run {run.id!r} vanished while it was being exported")

    try:
        return atomic.atomic_write(out, _write)
    except OSError as exc:
        raise _export_failed(run, out, exc) from exc


def _export_failed(run: Run, out: Path, exc: OSError) -> BundleError:
    """The error of an export that met ``exc``: the run deleted meanwhile, or the bundle not writable."""
    if not (run.path / MANIFEST).is_file():
        return BundleError(f"run {run.id!r} was deleted while it was being exported; no bundle was written")
    return BundleError(f"cannot write the bundle to {out}: {exc}")
