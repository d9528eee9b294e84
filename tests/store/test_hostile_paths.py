"""The run store against hostile ids and symbolic links: no id names a path outside the store, and no link
is followed out of it.

Bundles with symlink, ``../`` or pickled members are refused by ``tests/store/test_bundle.py``
(``test_refused_bundles_write_nothing``: cases ``symlink``, ``parent``, ``nested-parent``, ``pickled-npy``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from flare_core.answer.stored import VERDICT_FILE
from flare_core.errors import RunNotFound
from flare_core.run import jobs
from flare_core.store import atomic
from flare_core.store.runs import RunStore
from flare_core.view.results import run_results


@pytest.mark.parametrize("bad", ["../../x", "..", "/tmp", "/etc/passwd", "runs/../x"])
def test_store_refuses_ids_that_name_paths(tmp_path, bad):
    store = RunStore(tmp_path / "runs")
    store.create({"name": "kept"}, run_id="kept")
    sentinel = tmp_path / "x"
    sentinel.mkdir()
    (sentinel / "manifest.json").write_text("{}")
    for call in (store.get, store.delete, lambda i: jobs.start(store, i), lambda i: jobs.cancel(store, i)):
        with pytest.raises(ValueError, match="invalid run id"):
            call(bad)
    assert not store.exists(bad)
    assert (sentinel / "manifest.json").exists() and store.exists("kept")


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside the store holding a plausible manifest and a secret file."""
    folder = tmp_path / "outside"
    folder.mkdir()
    manifest = {"id": "planted", "name": "planted", "status": "done", "created": "9999", "models": []}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "secret.json").write_text(json.dumps({"text": "SECRET-CONTENT"}))
    pd.DataFrame({"id": [0], "text": ["SECRET-CONTENT"], "label": [None]}).to_parquet(
        folder / "secret.parquet"
    )
    return folder


def test_a_run_folder_that_is_a_symlink_is_not_followed(tmp_path, outside):
    store = RunStore(tmp_path / "runs")
    real = store.create({"name": "real"})
    (store.root / "planted").symlink_to(outside, target_is_directory=True)
    assert [m["id"] for m in store.list()] == [real.id]
    assert not store.exists("planted")
    with pytest.raises(RunNotFound):
        store.get("planted")
    with pytest.raises(RunNotFound):
        store.delete("planted")
    assert (outside / "secret.json").exists() and (outside / "manifest.json").exists()


def test_a_manifest_that_is_a_symlink_is_not_followed(tmp_path, outside):
    store = RunStore(tmp_path / "runs")
    folder = store.root / "linked"
    folder.mkdir(parents=True)
    (folder / "manifest.json").symlink_to(outside / "manifest.json")
    assert store.list() == []
    with pytest.raises(RunNotFound):
        store.get("linked")


def test_artefacts_that_are_symlinks_are_not_read(tmp_path, outside):
    from flare_core.store.bundle import export_run

    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "r", "status": "done", "models": [], "corpus": {}, "params": {}})
    (run.path / "corpus.parquet").symlink_to(outside / "secret.parquet")
    (run.path / VERDICT_FILE).symlink_to(outside / "secret.json")
    (run.path / "sufficiency").symlink_to(outside, target_is_directory=True)
    for parts in (("corpus.parquet",), (VERDICT_FILE,), ("sufficiency", "secret.json")):
        assert not run.has(*parts)
    with pytest.raises(ValueError, match="symbolic link"):
        run.load_frame("corpus.parquet")
    with pytest.raises(ValueError, match="symbolic link"):
        run.load_json(VERDICT_FILE)
    with pytest.raises(ValueError, match="symbolic link"):
        run.load_json("sufficiency", "secret.json")
    assert "SECRET-CONTENT" not in atomic.to_json(run_results(run))
    bundle = export_run(run, tmp_path / "r.zip")
    assert b"SECRET-CONTENT" not in bundle.read_bytes()
