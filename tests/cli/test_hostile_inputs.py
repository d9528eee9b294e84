"""The ``flare`` command against hostile input: ids that name paths and pickled arrays are refused with a
clear message, no traceback, and nothing written."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support import flare_here, write


@pytest.mark.parametrize(
    "args", [("show", "/etc"), ("delete", "../../x"), ("resume", ".."), ("cancel", "../runs")]
)
def test_cli_refuses_ids_that_name_paths(tmp_path, args):
    sentinel = tmp_path / "x"
    sentinel.mkdir()
    (sentinel / "manifest.json").write_text('{"id": "x"}')
    proc = flare_here(*args, runs_dir=tmp_path / "runs", check=False)
    assert proc.returncode == 2 and "invalid run id" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (sentinel / "manifest.json").exists()
    assert not (tmp_path / "runs").exists()


def test_cli_refuses_a_pickled_npy_and_creates_nothing(tmp_path):
    corpus = write(tmp_path / "c.csv", "text\nhello world\nanother text\nthird one\n")
    evil = tmp_path / "evil.npy"
    np.save(evil, np.array([{"a": 1}, None, [1, 2]], dtype=object), allow_pickle=True)
    runs = tmp_path / "runs"
    proc = flare_here(
        "run",
        str(corpus),
        "--models",
        "glove-6b-50d",
        "--embeddings",
        f"x={evil}",
        runs_dir=runs,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "pickle" in proc.stderr and "Traceback" not in proc.stderr
    assert not runs.exists() or list(runs.iterdir()) == []
