"""Finished runs for the tests that only read one, built once by the code under test and kept on disk.

A fixture run is built by the real pipeline (``create_run`` and ``jobs.run_in_process``) into a folder keyed
by a hash of the package's source, the pinned requirements, the corpus file and the run's parameters. A
file lock makes the pytest-xdist workers of one session, and later sessions on the same checkout, share one
build; each session copies the finished folder into its own store, so a test that changes its run never
changes the stored one. Any change to ``flare_core`` gives a new key, and so a run built by the new code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
#: Where built runs are kept; ``FLARE_TEST_RUNS_CACHE`` moves it.
CACHE = Path(os.environ.get("FLARE_TEST_RUNS_CACHE") or ROOT / ".pytest_cache" / "flare-stored-runs")
_COMPLETE = ".complete"


def code_hash() -> str:
    """sha256 of every source file of ``flare_core`` (path and bytes) and of the pinned requirements."""
    digest = hashlib.sha256()
    files = sorted((ROOT / "flare_core").rglob("*.py")) + sorted((ROOT / "flare_core").rglob("*.json"))
    files += [ROOT / "requirements.txt", ROOT / "requirements-models.txt"]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run_key(corpus_path: Path, params, *, run_id: str, name: str, label_column: str | None) -> str:
    """The key of one fixture run: the code, the corpus file's bytes, the parameters and the names."""
    digest = hashlib.sha256(code_hash().encode())
    digest.update(Path(corpus_path).read_bytes())
    fields = {"params": asdict(params), "run_id": run_id, "name": name, "label_column": label_column}
    digest.update(json.dumps(fields, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:20]


def built_once(name: str, key: str, build: Callable[[Path], str]) -> Path:
    """The folder ``CACHE/<name>-<key>``, made the first time by ``build(staging)`` (which creates the folder
    ``staging`` and returns the status kept in its completion marker) and kept for every later caller. A
    file lock makes the pytest-xdist workers share one build; the folders of other keys (older code) are
    removed when a new one is built."""
    built = CACHE / f"{name}-{key}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / f"{name}.lock"), timeout=1800):
        if not (built / _COMPLETE).is_file():
            for stale in CACHE.glob(f"{name}-*"):
                shutil.rmtree(stale, ignore_errors=True)
            staging = CACHE / f".staging-{name}-{key}"
            shutil.rmtree(staging, ignore_errors=True)
            status = build(staging)
            (staging / _COMPLETE).write_text(status + "\n")
            os.replace(staging, built)
    return built


def stored_run(store, corpus_path: Path, params, *, run_id: str, name: str, label_column: str | None):
    """The finished run ``run_id`` in ``store``: copied from the cache, built there first if needed."""
    from flare_core.data.corpus import load_corpus
    from flare_core.run import jobs
    from flare_core.run.create import create_run
    from flare_core.store.runs import RunStore

    def build(staging: Path) -> str:
        home = staging.with_name(staging.name + "-store")  # the run is made in a store, then moved out
        shutil.rmtree(home, ignore_errors=True)
        corpus = load_corpus(corpus_path, text_column="text", label_column=label_column)
        run = create_run(RunStore(home), corpus, params, name=name, run_id=run_id)
        status = jobs.run_in_process(run)
        os.replace(home / run_id, staging)
        shutil.rmtree(home, ignore_errors=True)
        return status

    key = run_key(corpus_path, params, run_id=run_id, name=name, label_column=label_column)
    built = built_once(run_id, key, build)
    shutil.copytree(built, store.root / run_id, ignore=shutil.ignore_patterns(_COMPLETE, "*.lock"))
    return store.get(run_id)


def labelled_run_params():
    """The parameters of the tests' labelled run (``tests/conftest.py``'s ``labelled_run``, and the run
    ``bench/speed/page_sessions.py`` copies): a transformer, three static models and the default controls,
    both estimators, small token stages."""
    from flare_core.run.params import RunParams

    return RunParams(
        models=["all-MiniLM-L6-v2", "glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"],
        estimators=["gmm", "flow"],
        flow_preset="fast",
        collapse_texts=12,
        concentration_texts=4,
        map_points=200,
    )
