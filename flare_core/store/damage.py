"""Words for damaged run files, and reading a manifest that may be damaged (used by the store and
``doctor``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flare_core.errors import DamagedFile

MANIFEST = "manifest.json"
STATUSES = ("queued", "running", "done", "failed", "cancelled")


def damaged_message(run_id: str, file: str, why: str, *, recomputable: bool) -> str:
    """Words for a person who met a damaged file: which one, why, and what to do."""
    return f"{file} of run {run_id} is damaged ({why}). {advice(run_id, file, recomputable)}"


def advice(run_id: str, file: str, recomputable: bool) -> str:
    if recomputable:
        return (
            f"Run `flare resume {run_id}`: it sets the file aside and computes it again "
            f"(`flare doctor {run_id}` lists every damaged file)."
        )
    if file == MANIFEST:
        return (
            "The run's record (parameters, models, status) is lost: import the run again from a bundle "
            f"(`flare import`) if you have one, or remove it with `flare delete {run_id}`. Other runs are "
            "not affected."
        )
    if file in ("corpus.parquet", "pairs.parquet", "judgements.parquet"):
        return (
            "The texts cannot be recovered from the run: start a new run from your corpus file, then "
            f"remove this one with `flare delete {run_id}`."
        )
    return (
        "These embeddings were given to the run (--embeddings): start a new run with the original "
        f"file, then remove this one with `flare delete {run_id}`."
    )


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest at ``path``; raises ``DamagedFile`` (not a JSON error) when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _damaged(
            path.parent.name, MANIFEST, f"not valid JSON: {short_reason(exc)}", False, path
        ) from None
    if not isinstance(manifest, dict):
        raise _damaged(path.parent.name, MANIFEST, "not a JSON object", False, path)
    if manifest.get("status", "queued") not in STATUSES:
        raise _damaged(path.parent.name, MANIFEST, f"unknown status {manifest.get('status')!r}", False, path)
    return manifest


def _damaged(run_id: str, file: str, why: str, recomputable: bool, path: Path) -> DamagedFile:
    return DamagedFile(
        damaged_message(run_id, file, why, recomputable=recomputable), path=path, recomputable=recomputable
    )


def short_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
