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


@pytest.mark.slow
def test_a_corrected_label_replaces_the_old_one_and_the_answer_says_it_was_a_correction(tmp_path):
    run, truth = planted_run(tmp_path, with_labels=False)
    runs = run.path.parent
    for _ in range(2):
        flare_here("label", run.id, "--next", "12", "-o", str(tmp_path / "todo.csv"), runs_dir=runs)
        todo = pd.read_csv(tmp_path / "todo.csv").assign(label=lambda f: [truth[r] for r in f["row"]])
        todo.to_csv(tmp_path / "labels.csv", index=False)
        out = flare_here("label", run.id, str(tmp_path / "labels.csv"), "--json", runs_dir=runs)
    assert "before your last batch" in json.loads(out.stdout)["few_labels"]["movement"]
    row = int(todo["row"].iloc[0])
    wrong = next(c for c in sorted(set(truth)) if c != truth[row])
    out = flare_here("label", run.id, "--correct", f"{row}={wrong}", "--json", runs_dir=runs)
    assert f"Corrected 1 label(s): row {row} {truth[row]!r} → {wrong!r}." in out.stderr
    block = json.loads(out.stdout)["few_labels"]
    assert "before your correction" in block["movement"] and "last batch" not in block["movement"]
    saved = load_labels(run)
    others = sum(truth[r] == wrong for r in saved.latest())  # the corrected row's truth is not `wrong`
    assert block["batches"] == 2 and block["n_labels"] == 24 and block["counts"][wrong] == others + 1
    assert saved.latest()[row] == wrong and saved.upto(1).latest().get(row, wrong) == wrong
    # the same file read again corrects it back, and says so
    out = flare_here("label", run.id, str(tmp_path / "labels.csv"), "--json", runs_dir=runs)
    assert "12 labels read (0 new, 1 corrected)" in out.stderr
    assert "before your correction" in json.loads(out.stdout)["few_labels"]["movement"]
    assert load_labels(run).latest()[row] == truth[row]
    out = flare_here("label", run.id, "--correct", "500=sport", runs_dir=runs, check=False)
    assert out.returncode == 2 and "row 500 has no saved label to correct" in out.stderr


@pytest.mark.slow
def test_an_old_file_after_a_rename_keeps_the_new_name(tmp_path):
    run, truth = planted_run(tmp_path, with_labels=False)
    runs = run.path.parent
    flare_here("label", run.id, "--next", "14", "-o", str(tmp_path / "todo.csv"), runs_dir=runs)
    todo = pd.read_csv(tmp_path / "todo.csv").assign(label=lambda f: [truth[r] for r in f["row"]])
    todo.to_csv(tmp_path / "labels.csv", index=False)
    flare_here("label", run.id, str(tmp_path / "labels.csv"), runs_dir=runs)
    old = truth[int(todo["row"].iloc[0])]
    flare_here("label", run.id, "--rename", f"{old}=money", runs_dir=runs)
    out = flare_here("label", run.id, str(tmp_path / "labels.csv"), runs_dir=runs)
    n = int((todo["label"] == old).sum())
    assert f"{old!r} was renamed 'money': {n} label(s) given as {old!r} were saved as 'money'." in out.stderr
    assert old not in load_labels(run).categories and load_labels(run).counts()["money"] == n
