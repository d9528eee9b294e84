"""Checking stored runs for damage (``flare doctor``) and setting damaged files aside before a resume.

Every file of a run is written atomically, so damage comes from outside: a disk or file system fault, a
copy cut short, a person editing a file. :func:`check_run` reads every data file of a run completely
(JSON parsed, Parquet decoded, ``.npy`` header and size checked against its shape, torch checkpoints'
zip directories checked) and says for each damaged one what it is and what to do. Files that the run's
stages compute (embeddings of registry models, every analysis artefact) are *recomputable*:
:func:`set_aside` moves them to ``<store>/.damaged/`` and ``flare resume`` computes them again. The
manifest, the corpus and precomputed embeddings came from outside the run and cannot be recomputed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from flare_core.errors import DamagedFile
from flare_core.store import locks
from flare_core.store.damage import advice, read_manifest, short_reason
from flare_core.store.runs import MANIFEST, RUN_ID_PATTERN, RunStore, outside_files

DAMAGED_DIR = ".damaged"
_NOT_DATA = {"worker.log", "worker.heartbeat", "cancel.requested", locks.RUN_LOCK}


@dataclasses.dataclass
class Finding:
    """One problem of a run: the file (relative to the run folder), what is wrong and what to do."""

    run_id: str
    file: str
    problem: str
    action: str
    kind: str  # "damaged", "leftover", "stale lock", "not a run"
    recomputable: bool = False

    @property
    def message(self) -> str:
        if not self.run_id:
            return f"{self.file} {self.problem}. {self.action}"
        if not self.file:
            return f"folder {self.run_id} {self.problem}. {self.action}"
        return f"{self.file} of run {self.run_id} {self.problem}. {self.action}"

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "message": self.message}


def check_file(path: Path, n_texts: int | None = None) -> str | None:
    """Why the data file at ``path`` cannot be used, or None when it reads completely."""
    try:
        if path.suffix == ".json":
            with open(path, encoding="utf-8") as fh:
                json.load(fh)
        elif path.suffix == ".parquet":
            pq.ParquetFile(path).read()
        elif path.suffix == ".npy":
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            expected = path.stat().st_size
            header = expected - array.nbytes if array.size else expected
            if header < 0 or header > 65536 + 10:
                return f"holds {expected} bytes, not the {array.nbytes} its {array.shape} header announces"
            embedding = n_texts is not None and path.parent.name == "embeddings"
            if embedding and (array.ndim != 2 or array.shape[0] != n_texts):
                return f"has shape {array.shape}, expected ({n_texts}, d) for the run's {n_texts} texts"
            del array
        elif path.suffix == ".pt":
            with zipfile.ZipFile(path) as zf:
                bad = zf.testzip()
            if bad is not None:
                return f"its member {bad} fails its checksum"
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, RecursionError) as exc:
        if isinstance(exc, FileNotFoundError):
            return None  # removed meanwhile (a resume rewrote it): nothing to report
        return f"cannot be read: {short_reason(exc)}"
    except Exception as exc:  # noqa: BLE001 - pyarrow raises its own types for garbage
        return f"cannot be read: {type(exc).__name__}: {short_reason(exc)}"
    return None


def check_run(run_path: Path) -> list[Finding]:
    """Every problem of the run folder ``run_path`` (empty when the run is sound)."""
    run_id = run_path.name
    findings: list[Finding] = []
    try:
        manifest = read_manifest(run_path / MANIFEST)
    except FileNotFoundError:
        return [
            Finding(
                run_id,
                MANIFEST,
                "is missing: the folder is not a run",
                f"Remove the folder {run_path} if you do not need it.",
                "not a run",
            )
        ]
    except DamagedFile as exc:
        findings.append(Finding(run_id, MANIFEST, _problem(exc), advice(run_id, MANIFEST, False), "damaged"))
        manifest = {}
    n_texts = (manifest.get("corpus") or {}).get("n_texts")
    busy = locks.live_owner(run_path) is not None  # its unfinished writes are in progress, not leftovers
    outside = outside_files(manifest)
    for path in sorted(run_path.rglob("*")):
        rel = path.relative_to(run_path).as_posix()
        if path.is_dir() or rel == MANIFEST or path.name in _NOT_DATA or path.name.startswith(".run.lock"):
            continue
        if path.name.startswith(".tmp-"):
            if busy:
                continue
            findings.append(
                Finding(
                    run_id,
                    rel,
                    "is an unfinished write left by a process that stopped (it is never read)",
                    f"Harmless; `flare doctor {run_id} --repair` or the next resume removes it.",
                    "leftover",
                    recomputable=True,
                )
            )
            continue
        if path.suffix not in (".json", ".parquet", ".npy", ".pt"):
            continue
        why = check_file(path, n_texts if isinstance(n_texts, int) else None)
        if why is not None:
            recomputable = rel not in outside and bool(manifest)
            findings.append(
                Finding(
                    run_id,
                    rel,
                    f"is damaged ({why})",
                    advice(run_id, rel, recomputable),
                    "damaged",
                    recomputable=recomputable,
                )
            )
    owner = locks.read_owner(run_path)
    if owner is not None and not busy:
        findings.append(
            Finding(
                run_id,
                locks.RUN_LOCK,
                f"was left by process {owner.get('pid')}, which no longer runs",
                "Harmless; the next resume takes it over (`--repair` removes it).",
                "stale lock",
                recomputable=True,
            )
        )
    return findings


def _problem(exc: DamagedFile) -> str:
    text = str(exc)
    start = text.find(" is damaged (")
    end = text.find("). ", start)
    return text[start + 1 : end + 1] if start >= 0 and end > start else "is damaged"


def check_store(store: RunStore) -> dict[str, list[Finding]]:
    """Findings of every run folder of ``store`` (sound runs map to ``[]``) and of leftover folders."""
    results: dict[str, list[Finding]] = {}
    if not store.root.is_dir():
        return results
    for path in sorted(store.root.iterdir()):
        if path.is_symlink() or not path.is_dir():
            continue
        if path.name.startswith((".staging-", ".deleting-", ".tmp-")):
            results[path.name] = [
                Finding(
                    path.name,
                    "",
                    "was left by a create, import or delete that was interrupted",
                    "Harmless (never shown as a run); `flare doctor --repair` removes it.",
                    "leftover",
                    recomputable=True,
                )
            ]
        elif RUN_ID_PATTERN.fullmatch(path.name):
            results[path.name] = check_run(path)
    return results


def set_aside(store: RunStore, run_id: str, findings: list[Finding]) -> list[str]:
    """Move the recomputable damaged files of ``run_id`` to ``<store>/.damaged/`` and remove leftovers.

    Returns what was done, one line each. Files that cannot be recomputed are left where they are.
    """
    done: list[str] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for finding in findings:
        if not finding.recomputable:
            continue
        if finding.kind == "leftover" and not finding.file:
            shutil.rmtree(store.root / finding.run_id, ignore_errors=True)
            done.append(f"removed the leftover folder {finding.run_id}")
            continue
        path = store.root / run_id / finding.file
        if finding.kind == "stale lock":
            if locks.live_owner(path.parent) is None:
                path.unlink(missing_ok=True)
                done.append(f"removed the stale lock of run {run_id}")
        elif finding.kind == "leftover":
            path.unlink(missing_ok=True)
            done.append(f"removed {finding.file} (an unfinished write) from run {run_id}")
        elif finding.kind == "damaged" and path.exists():
            target = store.root / DAMAGED_DIR / f"{run_id}-{stamp}" / finding.file
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            done.append(f"set {finding.file} of run {run_id} aside in {target}; it will be computed again")
    return done


def prepare_resume(store: RunStore, run_id: str) -> list[str]:
    """Before a resume: raise ``DamagedFile`` for damage the run cannot recompute, set the rest aside."""
    findings = check_run(store.root / run_id)
    fatal = [f for f in findings if f.kind == "damaged" and not f.recomputable]
    if fatal:
        first = fatal[0]
        raise DamagedFile(
            f"{first.file} of run {run_id} {first.problem}. {first.action}",
            path=store.root / run_id / first.file,
            recomputable=False,
        )
    return set_aside(store, run_id, [f for f in findings if f.kind != "stale lock"])
