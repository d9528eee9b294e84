"""The Runs page's table of worker processes, as a person reads it."""

from __future__ import annotations

from flare_core.run.progress import WORKER_COLUMNS, worker_table


def test_workers_are_numbered_not_named_by_machine_and_process_id():
    workers = {
        "vm:4168": {"stage": "embeddings", "units": 3, "failed": 0, "busy_s": 12.5},
        "vm:4170": {"stage": "sufficiency_flow", "units": 1, "failed": 1, "busy_s": 4.0},
    }
    table = worker_table(workers)
    assert table.columns.tolist() == list(WORKER_COLUMNS)
    assert table["worker"].tolist() == ["worker 1", "worker 2"]
    assert not table.astype(str).apply(lambda c: c.str.contains("vm:")).any().any()
    assert table["stage"].tolist() == [
        "reading your texts with each model",
        "learning how well each model predicts the others",
    ]
    assert table["units"].tolist() == [3, 1]  # each row keeps its own process's figures
