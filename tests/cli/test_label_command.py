"""``flare label``: texts to label out as a CSV, labels back in, the updated answer printed; bad files refused
with a message and nothing saved."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from flare_core.answer.labels import load_labels

try:
    from tests.support import flare_here, planted_run
except ImportError:  # pytest put tests/ itself on sys.path
    from support import flare_here, planted_run  # type: ignore[no-redef]


@pytest.mark.slow
def test_a_spreadsheet_round_trip_settles_the_answer(tmp_path):
    run, truth = planted_run(tmp_path, with_labels=False)
    runs = run.path.parent
    for _ in range(3):
        flare_here("label", run.id, "--next", "16", "-o", str(tmp_path / "todo.csv"), runs_dir=runs)
        todo = pd.read_csv(tmp_path / "todo.csv")
        assert (
            list(todo.columns) == ["row", "text", "label"] and todo["label"].isna().all() and len(todo) == 16
        )
        todo["label"] = [truth[r] for r in todo["row"]]
        todo.loc[0, "label"] = None  # a blank label is skipped, not an error
        todo.to_csv(tmp_path / "labels.csv", index=False)
        out = flare_here("label", run.id, str(tmp_path / "labels.csv"), "--json", runs_dir=runs)
        verdict = json.loads(out.stdout)
        assert "15 labels read" in out.stderr
        if verdict["settled"]:
            break
    assert verdict["basis"] == "few labels" and verdict["recommended"] == "clear"
    shown = json.loads(flare_here("show", run.id, "--json", runs_dir=runs).stdout)
    assert shown["verdict"]["recommended"] == "clear"  # the same field as before labels existed
    assert len(shown["labels_given"]["entries"]) == len(load_labels(run).entries)


@pytest.mark.slow
def test_bad_labels_files_are_refused_and_change_nothing(tmp_path):
    run, _ = planted_run(tmp_path, with_labels=False)
    runs = run.path.parent
    cases = {
        "unknown.csv": (b"row,label\n5000,sport\n", "row 5,000 is not in this run"),
        "latin.csv": ("row,label\n1,café\n".encode("cp1252"), "is not UTF-8 text"),
        "columns.csv": (b"id,category\n1,sport\n", "has no column 'row'"),
        "blank.csv": (b"row,label\n1,\n", "has no label to read"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        out = flare_here("label", run.id, str(tmp_path / name), runs_dir=runs, check=False)
        assert out.returncode == 2 and message in out.stderr, (name, out.stderr)
        assert not run.has("labels", "labels.json")
    (tmp_path / "with-labels").mkdir()
    labelled, _ = planted_run(tmp_path / "with-labels", with_labels=True)
    out = flare_here("label", labelled.id, "--next", "8", runs_dir=labelled.path.parent, check=False)
    assert out.returncode == 2 and "has labels of its own (column 'label')" in out.stderr
