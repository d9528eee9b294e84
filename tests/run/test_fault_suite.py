"""The short form of ``bench/faults.py``: a few real trials of every fault (kill -9 and resume, damaged
files, the job queue and a restart, concurrent resume/delete/export/import, big inputs). Every trial must
survive with nothing lost; the bench prints the timings, this test asserts only outcomes."""

from __future__ import annotations

import pytest

from bench.faults import print_table, run_faults


@pytest.mark.slow
def test_every_injected_fault_is_survived_with_nothing_lost(tmp_path, capsys):
    rows, ref = run_faults(tmp_path / "faults", short=True, kills=2, seed=0)
    with capsys.disabled():
        print()
        print_table(rows)
    assert [r.fault for r in rows] == [
        "kill -9 of the worker + flare resume",
        "damaged file in a stored run",
        "4 runs, FLARE_MAX_JOBS=2 (+ restart)",
        "concurrent resume / delete / export / import",
        "big inputs",
    ]
    for row in rows:
        assert row.trials > 0
        assert (row.survived, row.lost) == (row.trials, 0), (row.fault, row.notes)
    assert "embeddings/" not in " ".join(ref.rewritten)  # finished embeddings are never written again
