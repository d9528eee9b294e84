"""Damaged files in a stored run: every reader names the file and says what to do, ``flare doctor`` finds
them, ``flare resume`` sets aside and recomputes what the run can compute, and other runs are untouched."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from flare_core.cli.parser import main
from flare_core.data.corpus import load_corpus
from flare_core.errors import DamagedFile
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store import doctor
from flare_core.store.atomic import to_json
from flare_core.store.runs import RunStore, safe_name
from flare_core.view.results import run_results
from tests.support import STATIC, check_run_files, fast_params

EMBEDDING = f"embeddings/{safe_name(STATIC[0])}.npy"
SCORES = "sufficiency/gmm/scores.parquet"


@pytest.fixture(scope="module")
def sound_run(tmp_path_factory, small_corpus_path):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    run = create_run(RunStore(tmp_path_factory.mktemp("sound")), corpus, fast_params(STATIC))
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    return run


def _copy(sound_run, tmp_path):
    """The sound run and a second, healthy run in a fresh store."""
    store = RunStore(tmp_path / "runs")
    shutil.copytree(sound_run.path, store.root / sound_run.id)
    shutil.copytree(sound_run.path, store.root / "healthy-neighbour")
    (store.root / "healthy-neighbour" / "manifest.json").write_text(
        json.dumps({**sound_run.manifest, "id": "healthy-neighbour"})
    )
    return store, store.get(sound_run.id)


def _truncate(path):
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def _garbage(path):
    path.write_bytes(np.random.default_rng(0).bytes(max(64, path.stat().st_size)))


def _unit_file(run):
    return sorted((run.path / "sufficiency" / "gmm" / "pairs").rglob("s*_t*.json"))[0]


def _doctor(capsys, *args):
    code = main(["doctor", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("file", "damage"),
    [(EMBEDDING, _truncate), (SCORES, _garbage), ("unit", _garbage), (SCORES, _truncate)],
)
def test_a_damaged_computed_file_is_named_set_aside_and_recomputed(sound_run, tmp_path, capsys, file, damage):
    store, run = _copy(sound_run, tmp_path)
    path = _unit_file(run) if file == "unit" else run.path / file
    file = path.relative_to(run.path).as_posix()
    damage(path)

    code, report = _doctor(capsys, "--runs-dir", str(store.root))
    assert code == 1 and report["checked"] == 2 and report["sound"] == ["healthy-neighbour"]
    [finding] = report["findings"]
    assert (finding["run_id"], finding["file"], finding["kind"]) == (run.id, file, "damaged")
    assert finding["recomputable"] and f"flare resume {run.id}" in finding["message"]
    if file.endswith((".parquet", ".npy")):
        with pytest.raises(DamagedFile, match=rf"{file} of run {run.id} is damaged .*flare resume {run.id}"):
            run.load_frame(*file.split("/")) if file.endswith(".parquet") else run.load_array(
                *file.split("/")
            )

    code = main(["resume", run.id, "--json", "--runs-dir", str(store.root)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert out["status"] == "done", out
    assert out["repairs"] == [
        f"set {file} of run {run.id} aside in "
        f"{next((store.root / doctor.DAMAGED_DIR).glob(f'{run.id}-*')) / file}; it will be computed again"
    ]
    assert doctor.check_run(run.path) == []
    check_run_files(run.path)
    again, before = run_results(run)["sufficiency"]["gmm"], run_results(sound_run)["sufficiency"]["gmm"]
    assert to_json([again["scores"], again["is_matrix"]]) == to_json([before["scores"], before["is_matrix"]])


@pytest.mark.parametrize(
    ("file", "damage", "advice"),
    [
        ("manifest.json", _truncate, "import the run again from a bundle"),
        ("manifest.json", _garbage, "import the run again from a bundle"),
        ("corpus.parquet", _truncate, "start a new run from your corpus file"),
    ],
)
def test_damage_a_run_cannot_recompute_is_named_and_nothing_else_suffers(
    sound_run, tmp_path, capsys, file, damage, advice
):
    store, run = _copy(sound_run, tmp_path)
    damage(run.path / file)

    code, report = _doctor(capsys, run.id, "--runs-dir", str(store.root))
    assert code == 1
    [finding] = report["findings"]
    assert finding["file"] == file and not finding["recomputable"] and advice in finding["message"]

    code = main(["resume", run.id, "--runs-dir", str(store.root)])
    err = capsys.readouterr().err
    assert code == 4 and f"{file} of run {run.id} is damaged" in err and advice in err, err
    assert (run.path / file).exists()  # nothing was moved or rewritten
    with pytest.raises(DamagedFile, match=file):
        run.corpus_frame() if file == "corpus.parquet" else run.manifest

    # the other run of the store lists, shows and checks as before
    assert [m["id"] for m in store.list()] == ["healthy-neighbour"] or file != "manifest.json"
    assert main(["show", "healthy-neighbour", "--runs-dir", str(store.root)]) == 0
    assert main(["runs", "--runs-dir", str(store.root)]) == 0
    captured = capsys.readouterr()
    assert "healthy-neighbour" in captured.out
    if file == "manifest.json":
        assert f"warning: manifest.json of run {run.id} is damaged" in captured.err
    assert doctor.check_run(store.root / "healthy-neighbour") == []
    assert main(["delete", run.id, "--runs-dir", str(store.root)]) == 0
    assert not store.exists(run.id)


def test_doctor_reports_and_repairs_leftovers_and_stale_locks(sound_run, tmp_path, capsys):
    store, run = _copy(sound_run, tmp_path)
    (run.path / "sufficiency" / ".tmp-abc.parquet").write_bytes(b"half")
    (run.path / "run.lock").write_text(json.dumps({"pid": 2**22 + 12345, "host": None}))
    (store.root / ".staging-x-1234").mkdir()
    code, report = _doctor(capsys, "--runs-dir", str(store.root))
    assert code == 0  # nothing damaged: leftovers are harmless
    kinds = sorted((f["run_id"], f["kind"]) for f in report["findings"])
    assert kinds == [(".staging-x-1234", "leftover"), (run.id, "leftover"), (run.id, "stale lock")]
    code, report = _doctor(capsys, "--repair", "--runs-dir", str(store.root))
    assert len(report["repaired"]) == 3
    code, report = _doctor(capsys, "--runs-dir", str(store.root))
    assert report["findings"] == [] and code == 0
    check_run_files(run.path)
