"""Importing a run bundle: every check of the untrusted archive, then an atomic extraction into the store.

The archive is checked before anything is written into the store: member names and types, sizes and
compression ratios (from the central directory, and again while decompressing, since headers can lie),
the manifest, every array (loaded without pickles, numeric, one embedding row per text) and every
Parquet and JSON file. Only then is the run extracted into a staging folder inside the store and renamed
into place. The bundle format is :mod:`flare_core.store.bundle`'s.
"""

from __future__ import annotations

import errno
import io
import json
import os
import secrets
import shutil
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flare_core.checks import check_int
from flare_core.errors import BundleError
from flare_core.store import atomic
from flare_core.store.bundle import (
    _CHUNK,
    _DRIVE,
    ALLOWED_SUFFIXES,
    MAX_DEPTH,
    MAX_MEMBERS,
    MAX_RATIO,
    RATIO_MIN_BYTES,
    REQUIRED_MANIFEST_KEYS,
)
from flare_core.store.runs import (
    _ARTEFACT_PART,
    FINISHED,
    MANIFEST,
    STATUSES,
    Run,
    RunStore,
    safe_name,
    utc_now,
    validate_run_id,
)
from flare_core.store.shares import SHARES

# -- checks of the archive ---


def _open_zip(bundle: str | os.PathLike | bytes) -> zipfile.ZipFile:
    if isinstance(bundle, bytes | bytearray | memoryview):
        source: Any = io.BytesIO(bytes(bundle))
    elif isinstance(bundle, str | os.PathLike):
        path = Path(bundle)
        if not path.is_file():
            raise BundleError(f"no bundle file at {path}")
        source = path
    else:
        raise BundleError(f"bundle must be a path or bytes; got {type(bundle).__name__}")
    try:
        return zipfile.ZipFile(source)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise BundleError(f"the bundle is not a readable zip archive: {exc}") from exc


def _check_name(info: zipfile.ZipInfo) -> tuple[str, ...] | None:
    """Path parts of a member (``None`` for a directory entry); raises ``BundleError`` for a refused one."""
    name = info.filename
    if not name or "\x00" in name:
        raise BundleError(f"bundle member {name!r} has an empty or invalid name")
    if "\\" in name:
        raise BundleError(f"bundle member {name!r} contains a backslash: refused")
    if name.startswith("/"):
        raise BundleError(f"bundle member {name!r} is an absolute path: refused")
    if _DRIVE.match(name):
        raise BundleError(f"bundle member {name!r} names a drive letter: refused")
    is_dir = name.endswith("/")
    parts = tuple(name.rstrip("/").split("/"))
    if any(p in ("..", ".") for p in parts):
        raise BundleError(
            f"bundle member {name!r} contains '..' or '.': refused (it could escape the run folder)"
        )
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise BundleError(f"bundle member {name!r} is a symbolic link: refused")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise BundleError(f"bundle member {name!r} is not a regular file: refused")
    if len(parts) > MAX_DEPTH:
        raise BundleError(f"bundle member {name!r} is nested {len(parts)} levels deep (at most {MAX_DEPTH})")
    for part in parts:
        if not _ARTEFACT_PART.fullmatch(part) or ".." in part:
            raise BundleError(
                f"bundle member {name!r} has an invalid path part {part!r} "
                "(letters, digits, '_', '-', '.', starting with a letter or digit)"
            )
    if is_dir or kind == stat.S_IFDIR:
        if info.file_size:
            raise BundleError(f"bundle member {name!r} is a directory entry with data: refused")
        return None
    if Path(parts[-1]).suffix not in ALLOWED_SUFFIXES:
        raise BundleError(
            f"bundle member {name!r} has a file type that bundles never contain "
            f"(allowed: {', '.join(ALLOWED_SUFFIXES)}): refused"
        )
    if parts == (SHARES,):
        raise BundleError(
            f"bundle member {name!r} holds share links, which never travel in a bundle: refused"
        )
    if info.flag_bits & 0x1:
        raise BundleError(f"bundle member {name!r} is encrypted: refused")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise BundleError(
            f"bundle member {name!r} uses an unsupported compression method ({info.compress_type})"
        )
    return parts


def _check_sizes(files: list[zipfile.ZipInfo], max_bytes: int) -> None:
    """Zip-bomb checks on the sizes the central directory declares."""
    total = compressed = 0
    for info in files:
        if info.file_size > max_bytes:
            raise BundleError(
                f"bundle member {info.filename!r} declares {info.file_size:,} bytes uncompressed, "
                f"more than the limit of {max_bytes:,} bytes (possible zip bomb)"
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_MIN_BYTES and ratio > MAX_RATIO:
            raise BundleError(
                f"bundle member {info.filename!r} has a compression ratio of {ratio:,.0f} "
                f"(more than {MAX_RATIO:.0f}): refused as a possible zip bomb"
            )
        total += info.file_size
        compressed += info.compress_size
    if total > max_bytes:
        raise BundleError(
            f"the bundle holds {total:,} bytes uncompressed, more than the limit of {max_bytes:,} bytes"
        )
    ratio = total / max(compressed, 1)
    if total > RATIO_MIN_BYTES and ratio > MAX_RATIO:
        raise BundleError(
            f"the bundle has a compression ratio of {ratio:,.0f} (more than {MAX_RATIO:.0f}): "
            "refused as a possible zip bomb"
        )


class _Budget:
    """Bytes that may still be decompressed in all (enforced while streaming, whatever the headers say)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0

    def chunks(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """Decompressed chunks of ``info``; raises once it yields more than declared or than the budget."""
        produced = 0
        try:
            with zf.open(info) as fh:
                while True:
                    chunk = fh.read(_CHUNK)
                    if not chunk:
                        break
                    produced += len(chunk)
                    self.used += len(chunk)
                    if produced > info.file_size:
                        raise BundleError(
                            f"bundle member {info.filename!r} decompresses to more than the "
                            f"{info.file_size:,} bytes its header declares: refused"
                        )
                    if self.used > self.max_bytes:
                        raise BundleError(
                            f"the bundle decompresses to more than the limit of {self.max_bytes:,} bytes "
                            "(possible zip bomb)"
                        )
                    yield chunk
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
            raise BundleError(f"bundle member {info.filename!r} cannot be decompressed: {exc}") from exc
        if produced != info.file_size:
            raise BundleError(
                f"bundle member {info.filename!r} decompresses to {produced:,} bytes, "
                f"not the {info.file_size:,} its header declares: refused"
            )

    def read(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
        return b"".join(self.chunks(zf, info))


#: A check of a manifest's run settings: returns when they are valid, raises ``ValueError`` or
#: ``TypeError`` naming the one refused (:func:`flare_core.run.params.check_stored_params`).
ParamsCheck = Callable[[Mapping[str, Any]], object]


def _check_manifest(data: bytes, check_params: ParamsCheck | None = None) -> dict[str, Any]:
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"the bundle's manifest.json is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise BundleError(f"the bundle's manifest.json must be a JSON object; got {type(manifest).__name__}")
    missing = [k for k in REQUIRED_MANIFEST_KEYS if k not in manifest]
    if missing:
        raise BundleError(f"the bundle's manifest.json lacks the required keys {missing}")
    try:
        validate_run_id(manifest["id"])
    except ValueError as exc:
        raise BundleError(f"the bundle's manifest names an invalid run id: {exc}") from exc
    models = manifest["models"]
    if not isinstance(models, list) or not all(
        isinstance(m, dict) and isinstance(m.get("id"), str) for m in models
    ):
        raise BundleError("the bundle's manifest 'models' must be a list of objects with a string 'id'")
    if not isinstance(manifest["corpus"], dict):
        raise BundleError("the bundle's manifest 'corpus' must be an object")
    if not isinstance(manifest["params"], dict):
        raise BundleError("the bundle's manifest 'params' must be an object")
    if check_params is not None:
        try:
            check_params(manifest["params"])
        except (ValueError, TypeError) as exc:
            raise BundleError(f"the bundle's run settings are refused: {exc}; nothing was imported") from exc
    if manifest["status"] not in STATUSES:
        raise BundleError(
            f"the bundle's manifest has an unknown status {manifest['status']!r} (one of {STATUSES})"
        )
    n_texts = manifest["corpus"].get("n_texts")
    check_int(n_texts, "the bundle's manifest corpus 'n_texts'", min_value=0, error=BundleError)
    return manifest


def _check_npy(name: str, data: bytes, manifest: dict[str, Any], embedding_files: set[str]) -> None:
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise BundleError(
                f"bundle member {name!r} holds a pickled (object) array: pickles are never loaded; refused"
            ) from exc
        raise BundleError(f"bundle member {name!r} is not a readable .npy array: {exc}") from exc
    except (OSError, EOFError) as exc:
        raise BundleError(f"bundle member {name!r} is not a readable .npy array: {exc}") from exc
    if not isinstance(array, np.ndarray):
        raise BundleError(f"bundle member {name!r} is not a single .npy array")
    if array.dtype.kind not in "biufc":
        raise BundleError(f"bundle member {name!r} holds {array.dtype} data, not numbers: refused")
    if name.startswith("embeddings/"):
        if name not in embedding_files:
            raise BundleError(
                f"bundle member {name!r} is not the embeddings file of any model of the manifest"
            )
        n_texts = manifest["corpus"]["n_texts"]
        if array.ndim != 2 or array.shape[0] != n_texts:
            raise BundleError(
                f"bundle member {name!r} has shape {array.shape}; the manifest's corpus has {n_texts} texts, "
                f"so embeddings must be ({n_texts}, d)"
            )


def _check_parquet(name: str, data: bytes, manifest: dict[str, Any]) -> None:
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise BundleError(f"bundle member {name!r} is not a readable Parquet file: {exc}") from exc
    if name == "corpus.parquet":
        if "text" not in table.column_names:
            raise BundleError("the bundle's corpus.parquet has no 'text' column")
        n_texts = manifest["corpus"]["n_texts"]
        if table.num_rows != n_texts:
            raise BundleError(
                f"the bundle's corpus.parquet has {table.num_rows} rows but the manifest says {n_texts} texts"
            )


def _check_json(name: str, data: bytes) -> None:
    try:
        json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"bundle member {name!r} is not valid JSON: {exc}") from exc


def import_run(
    store: RunStore,
    bundle: str | os.PathLike | bytes,
    *,
    run_id: str | None = None,
    max_bytes: int = 2 * 1024**3,
    check_params: ParamsCheck | None = None,
) -> Run:
    """Check ``bundle`` (a path or the bytes of a zip made by ``export_run``) and add its run to ``store``.

    The run keeps the manifest's id unless ``run_id`` is given; an id already in the store is refused.
    A run that was ``queued`` or ``running`` when it was bundled is imported as ``failed`` with the
    error ``"imported while still running"`` (no worker exists for it here). Nothing is written into
    the store unless every check passes; the run appears at once (rename of a staging folder).
    ``check_params`` checks the run's settings as a new run's (:func:`flare_core.run.create.import_bundle`).

    Raises ``BundleError`` (a ``ValueError``) with the reason for any refused bundle.
    """
    if not isinstance(store, RunStore):
        raise BundleError(f"import_run expects a RunStore; got {type(store).__name__}")
    check_int(max_bytes, "max_bytes", min_value=1, error=BundleError)
    if run_id is not None:
        try:
            validate_run_id(run_id)
        except ValueError as exc:
            raise BundleError(str(exc)) from exc

    with _open_zip(bundle) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise BundleError(f"the bundle has {len(infos):,} members (at most {MAX_MEMBERS:,})")
        files: list[tuple[zipfile.ZipInfo, tuple[str, ...]]] = []
        seen: set[str] = set()
        for info in infos:
            parts = _check_name(info)
            if parts is None:
                continue
            key = "/".join(parts).lower()
            if key in seen:
                raise BundleError(f"bundle member {info.filename!r} appears twice: refused")
            seen.add(key)
            files.append((info, parts))
        _check_sizes([info for info, _ in files], max_bytes)
        names = {"/".join(parts): info for info, parts in files}
        dirs = {"/".join(parts[:k]).lower() for _, parts in files for k in range(1, len(parts))}
        clash = sorted(n for n in names if n.lower() in dirs)
        if clash:
            raise BundleError(f"bundle member {clash[0]!r} is both a file and a folder: refused")
        if MANIFEST not in names:
            raise BundleError("the bundle has no manifest.json: it is not a FLARE Studio run bundle")
        if "corpus.parquet" not in names:
            raise BundleError("the bundle has no corpus.parquet: it is not a complete FLARE Studio run")

        budget = _Budget(max_bytes)
        manifest = _check_manifest(budget.read(zf, names[MANIFEST]), check_params)
        embedding_files = {f"embeddings/{safe_name(m['id'])}.npy" for m in manifest["models"]}
        for name, info in sorted(names.items()):
            if name == MANIFEST:
                continue
            data = budget.read(zf, info)
            if name.endswith(".npy"):
                _check_npy(name, data, manifest, embedding_files)
            elif name.endswith(".parquet"):
                _check_parquet(name, data, manifest)
            else:
                _check_json(name, data)
            del data

        target = run_id or manifest["id"]
        if (store.root / target).exists():
            hint = "" if run_id else "; import it under another id (run_id=..., or flare import --run-id ID)"
            raise BundleError(f"run {target!r} already exists in {store.root}{hint}")

        manifest = dict(manifest)
        manifest["imported"] = {"at": utc_now(), "from_id": manifest["id"]}
        manifest["id"] = target
        if manifest["status"] not in FINISHED:
            manifest.update(status="failed", error="imported while still running", finished=utc_now())
        manifest["updated"] = utc_now()
        return _extract(store, zf, names, manifest, target, max_bytes)


def _extract(
    store: RunStore,
    zf: zipfile.ZipFile,
    names: dict[str, zipfile.ZipInfo],
    manifest: dict[str, Any],
    target: str,
    max_bytes: int,
) -> Run:
    """Extract the checked members into a staging folder inside the store, then rename it into place."""
    store.root.mkdir(parents=True, exist_ok=True)
    staging = store.root / f".staging-import-{target}-{secrets.token_hex(4)}"
    staging.mkdir()
    budget = _Budget(max_bytes)
    try:
        for name, info in sorted(names.items()):
            if name == MANIFEST:
                continue
            path = staging.joinpath(*name.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "xb") as fh:
                for chunk in budget.chunks(zf, info):
                    fh.write(chunk)
        atomic.write_json(staging / MANIFEST, manifest)
        final = store.root / target
        if final.exists():
            raise BundleError(f"run {target!r} already exists in {store.root}")
        try:
            os.rename(staging, final)
        except OSError as exc:  # the same bundle imported at the same moment by another process
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise BundleError(f"run {target!r} already exists in {store.root}") from None
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Run(final)
