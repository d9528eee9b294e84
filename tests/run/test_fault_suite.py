"""The short form of ``bench/faults/faults.py``: a few real trials of every fault (kill -9 and resume, damaged
files, a full disk (a real tmpfs, when run as root), concurrent resume/delete/export/import, big inputs,
a 10 MB text). The job queue and a restart are left to ``tests/run/test_jobs.py`` (four runs with two
slots, runs beyond the limit started after a restart), which asserts the same outcomes. Every trial must
survive with nothing lost; the bench prints the timings, this test asserts only outcomes. One test per fault,
so that the pytest-xdist workers share them."""

from __future__ import annotations

import os

import pytest

from bench.faults.faults import FAULTS, finished_unit, run_faults
from tests.stored_runs import stored_run


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


#: The faults of the short form, by the name ``run_faults`` knows them, with the row each one prints.
ROWS = {
    "kill": "kill -9 of the worker + flare resume",
    "corrupt": "damaged file in a stored run",
    "disk": "disk full during embeddings / IS",
    "concurrent": "concurrent resume / delete / export / import",
    "big": "big inputs",
    "long": "a 10 MB text in the corpus",
}


def test_every_fault_of_the_bench_but_the_queue_and_the_load_has_a_test_here():
    assert set(ROWS) == set(FAULTS) - {"queue", "load"}  # queue: tests/run/test_jobs.py; load: a browser


def _reference(store, corpus_path, params):
    """The uninterrupted run every fault is compared with, built once by the code under test and kept for
    every fault and the next session (``tests/stored_runs.py``)."""
    return stored_run(store, corpus_path, params, run_id="reference", name="", label_column="label")


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(ROWS))
def test_every_injected_fault_is_survived_with_nothing_lost(fault, tmp_path):
    if fault == "disk" and os.geteuid() != 0:
        pytest.skip("a full disk is a real tmpfs here, which needs root")
    # one kill, aimed at the embeddings; a kill in the middle of the information-sufficiency units, then
    # resumed to the same numbers with those units reused, is tests/run/test_faults.py's killed worker
    rows, ref = run_faults(
        tmp_path / "faults", short=True, kills=1, seed=0, only=(fault,), reference=_reference
    )
    assert [r.fault for r in rows] == [ROWS[fault]]
    (row,) = rows
    assert row.trials > 0, row.notes
    assert (row.survived, row.lost) == (row.trials, 0), (row.fault, row.notes)
    if ref.built:  # every fault but a big input and a long text compares its runs with the reference
        assert "embeddings/" not in " ".join(ref.rewritten)  # finished embeddings are never written again
    else:
        assert fault in ("big", "long")
