from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flare_core.store import atomic
from flare_core.store.runs import RunNotFound, RunStore, safe_name, validate_run_id

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path / "runs")


@pytest.mark.parametrize(
    "bad",
    [
        "../../etc",
        "..",
        ".",
        "",
        "/etc/passwd",
        "a/b",
        "a\\b",
        "run id",
        "x" * 81,
        ".hidden",
        "-rf",
        "a\x00b",
        "ü",
    ],
)
def test_unsafe_run_ids_are_refused(store, bad):
    with pytest.raises(ValueError, match="invalid run id"):
        validate_run_id(bad)
    with pytest.raises(ValueError, match="invalid run id"):
        store.get(bad)
    assert not store.exists(bad)


def test_round_trip_manifest_and_artefacts(store):
    run = store.create({"name": "t", "models": [{"id": "m/1"}]})
    assert store.get(run.id).manifest["name"] == "t"
    assert run.status == "queued"
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    run.save_frame(frame, "sub", "f.parquet")
    pd.testing.assert_frame_equal(run.load_frame("sub", "f.parquet"), frame)
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    run.save_embeddings("m/1", arr)
    np.testing.assert_array_equal(run.load_embeddings("m/1"), arr)
    assert run.embedded_models() == ["m/1"]
    run.save_json({"x": float("nan"), "y": [1.5]}, "v.json")
    assert run.load_json("v.json") == {"x": None, "y": [1.5]}
    run.update(status="done")
    assert [m["id"] for m in store.list()] == [run.id]
    store.delete(run.id)
    with pytest.raises(RunNotFound):
        store.get(run.id)
    assert [p.name for p in store.root.iterdir()] == [".store.lock"]  # the queue's lock file stays


@pytest.mark.parametrize("part", ["..", "../x", "/abs", "a/b", ""])
def test_artefact_names_cannot_escape(store, part):
    run = store.create({"name": "t"})
    with pytest.raises(ValueError, match="invalid artefact name"):
        run.artefact(part)


def test_safe_name_is_stable_and_distinct():
    assert safe_name("a/b c") == safe_name("a/b c")
    assert safe_name("a/b") != safe_name("a_b")
    assert "/" not in safe_name("../../etc/passwd")


def test_create_refuses_existing_id(store):
    store.create({"name": "a"}, run_id="fixed")
    with pytest.raises(ValueError, match="already exists"):
        store.create({"name": "b"}, run_id="fixed")
    assert store.get("fixed").manifest["name"] == "a"


#: A writer that replaces ``argv[1]`` for ever, alternating two 5 MB documents, and adds a byte to ``argv[2]``
#: after each complete write. A process of its own, whatever this test process has imported or run.
_WRITER = """
import sys
from flare_core.store import atomic
blobs = [{"blob": "a" * 5_000_000}, {"blob": "b" * 5_000_000}]
with open(sys.argv[2], "ab", buffering=0) as done:
    while True:
        for blob in blobs:
            atomic.write_json(sys.argv[1], blob)
            done.write(b".")
"""


def _kill_mid_write(path, deadline: float) -> bool:
    """Start a writer, kill it with SIGKILL while one of its temporary files exists; whether one was left."""
    done = path.parent / "writes-done"
    done.write_bytes(b"")
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(done)], cwd=ROOT)
    try:
        while done.stat().st_size < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # it has replaced the file twice
        while not list(path.parent.glob(".tmp-*")) and proc.poll() is None and time.monotonic() < deadline:
            pass  # a write is under way
    finally:
        proc.kill()
        proc.wait()
    assert done.stat().st_size >= 2, "the writer never finished a write"
    return bool(list(path.parent.glob(".tmp-*")))


def test_killed_writer_leaves_no_partial_manifest(tmp_path):
    """A writer killed mid-write leaves the old complete file, never a truncated one, and its temporary file
    is never taken for a run."""
    path = tmp_path / "manifest.json"
    atomic.write_json(path, {"blob": "old"})
    deadline = time.monotonic() + 120
    cut_short = 0
    while cut_short == 0 and time.monotonic() < deadline:
        cut_short += _kill_mid_write(path, deadline)
        content = json.loads(path.read_text())  # never a truncated document
        assert content["blob"] in ("a" * 5_000_000, "b" * 5_000_000)
    assert cut_short, "no write was cut short: the test did not test a kill mid-write"
    store = RunStore(tmp_path)
    assert store.list() == []  # temporary files are never taken for runs


def test_list_skips_unreadable_and_foreign_folders(store):
    run = store.create({"name": "ok"})
    (store.root / "not-a-run").mkdir()
    (store.root / ".staging-x").mkdir()
    broken = store.root / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    assert [m["id"] for m in store.list()] == [run.id]
