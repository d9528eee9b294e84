"""The cache of what was read from a run's files: the same object while the file is unchanged, the file's
new content as soon as it changes (its modification time, its size, or the file replaced), and a run's
manifest always as its file holds it, as a dict its caller may change."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from flare_core.errors import DamagedFile
from flare_core.store import atomic
from flare_core.store.file_cache import FileCache
from flare_core.store.runs import MANIFESTS, RunStore


def _reads(cache: FileCache, calls: list[str]):
    def read(path):
        calls.append(path.name)
        return pd.read_parquet(path)

    return lambda path: cache.read(path, read)


def test_same_object_until_the_file_changes(tmp_path) -> None:
    path = tmp_path / "scores.parquet"
    pd.DataFrame({"score": [1.0, 2.0]}).to_parquet(path)
    cache, calls = FileCache(), []
    read = _reads(cache, calls)
    first = read(path)
    assert read(path) is first and calls == ["scores.parquet"]

    stamp = os.stat(path).st_mtime_ns
    pd.DataFrame({"score": [3.0, 4.0]}).to_parquet(path)  # the same size: only the time tells
    os.utime(path, ns=(stamp + 5_000_000, stamp + 5_000_000))
    changed = read(path)
    assert changed is not first and changed["score"].tolist() == [3.0, 4.0]
    assert read(path) is changed and len(calls) == 2

    os.utime(path, ns=(stamp + 9_000_000, stamp + 9_000_000))  # touched, same bytes: read again
    assert read(path) is not changed and len(calls) == 3


def test_a_replaced_file_is_read_again_whatever_its_time(tmp_path) -> None:
    path = tmp_path / "a.json"
    atomic.write_json(path, {"v": 1})
    stamp = os.stat(path).st_mtime_ns
    cache = FileCache()
    assert cache.read(path, lambda p: json.loads(p.read_text())) == {"v": 1}
    atomic.write_json(path, {"v": 2})  # same size, a new file renamed into place, given the old time
    os.utime(path, ns=(stamp, stamp))
    assert cache.read(path, lambda p: json.loads(p.read_text())) == {"v": 2}


def test_errors_are_not_kept_and_entries_are_bounded(tmp_path) -> None:
    cache = FileCache(max_entries=2)
    with pytest.raises(FileNotFoundError):
        cache.read(tmp_path / "missing.json", lambda p: p.read_text())
    paths = [tmp_path / f"{n}.txt" for n in range(3)]
    for path in paths:
        path.write_text(path.stem)
        cache.read(path, lambda p: p.read_text())
    assert len(cache) == 2
    with pytest.raises(ValueError, match="max_entries must be at least 1"):
        FileCache(max_entries=0)


def test_a_runs_manifest_follows_its_file_and_can_be_changed_by_its_caller(tmp_path) -> None:
    run = RunStore(tmp_path / "runs").create({"name": "first"}, run_id="run-1")
    seen = run.manifest
    seen["name"] = "changed by a caller"  # a caller's copy: the next read is not affected
    assert run.manifest["name"] == "first"
    run.update(name="second")
    assert run.manifest["name"] == "second"
    (run.path / "manifest.json").write_text("{not json")
    with pytest.raises(DamagedFile):
        _ = run.manifest
    assert len(MANIFESTS) >= 1
