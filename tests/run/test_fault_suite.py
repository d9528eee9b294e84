"""The short form of ``bench/faults.py``: a few real trials of every fault (kill -9 and resume, damaged
files, a full disk (a real tmpfs, when run as root), concurrent resume/delete/export/import, big inputs,
a 10 MB text). The job queue and a restart are left to ``tests/run/test_jobs.py`` (four runs with two
slots, runs beyond the limit started after a restart), which asserts the same outcomes. Every trial must survive with nothing lost; the
bench prints the timings, this test asserts only outcomes."""

from __future__ import annotations

import os

import pytest

from bench.faults import FAULTS, finished_unit, print_table, run_faults


def test_what_counts_as_finished_work_when_a_resume_writes_a_file_again():
    files = {
        "sufficiency/gmm/pairs/a__b.npy": 1,
        "sufficiency/gmm/pairs/a__b.json": 1,
        "sufficiency/gmm/pairs/c__d.npy": 1,
    }
    assert finished_unit("sufficiency/gmm/pairs/a__b.npy", files)  # its record was written: finished
    assert not finished_unit("sufficiency/gmm/pairs/c__d.npy", files)  # cut short before its record
    assert finished_unit("embeddings/glove.npy", files, done_stages=set())  # a model's embeddings: a unit
    # what a stage assembles from its units is finished only once the stage is recorded done
    assert not finished_unit("sufficiency/gmm/result/is_matrix.npy", files, done_stages={"embeddings"})
    assert finished_unit("sufficiency/gmm/result/is_matrix.npy", files, done_stages={"sufficiency_gmm"})
    assert not finished_unit("sufficiency/flow/controls.parquet", files, done_stages={"sufficiency_gmm"})
    assert not finished_unit("sufficiency/gmm/pairs/c__d.npy", files, done_stages={"sufficiency_gmm"})


@pytest.mark.slow
def test_every_injected_fault_is_survived_with_nothing_lost(tmp_path, capsys):
    only = tuple(f for f in FAULTS if f not in ("queue", "load"))  # load: a browser, in the full form only
    rows, ref = run_faults(tmp_path / "faults", short=True, kills=2, seed=0, only=only)
    with capsys.disabled():
        print()
        print_table(rows)
    assert [r.fault for r in rows] == [
        "kill -9 of the worker + flare resume",
        "damaged file in a stored run",
        "disk full during embeddings / IS",
        "concurrent resume / delete / export / import",
        "big inputs",
        "a 10 MB text in the corpus",
    ]
    for row in rows:
        if row.fault.startswith("disk full") and os.geteuid() != 0:
            assert row.trials == 0 and "skipped" in row.notes[0]  # a tmpfs needs root
            continue
        assert row.trials > 0
        assert (row.survived, row.lost) == (row.trials, 0), (row.fault, row.notes)
    assert "embeddings/" not in " ".join(ref.rewritten)  # finished embeddings are never written again
