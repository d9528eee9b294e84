"""Helpers of the tests that drive FLARE Studio end to end: the ``flare`` command in a subprocess, small
runs that compute only information sufficiency, and checks that every file of a run folder loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from flare_core.run.params import RunParams

EVIL = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
STATIC = ["glove-6b-50d", "tokenlearn-static-64d"]


def flare(
    *args: str, runs_dir: Path, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess:
    """``flare ARGS`` with ``FLARE_RUNS_DIR=runs_dir``; with ``check`` its exit status must be 0."""
    env = dict(os.environ, FLARE_RUNS_DIR=str(runs_dir))
    proc = subprocess.run(
        [sys.executable, "-m", "flare_core.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def fast_params(models: list[str], **overrides) -> RunParams:
    """Only the information-sufficiency stage (plus the summary): the stages these tests are about."""
    values = dict(
        models=models,
        estimators=["gmm"],
        flow_preset="fast",
        geometry=False,
        maps=False,
        downstream=False,
        validation=[],
        collapse=False,
        concentration=False,
        controls=[],
    )
    values.update(overrides)
    return RunParams(**values)


def check_run_files(run_path: Path, *, killed: bool = False) -> int:
    """Every data file of a run folder loads completely; returns how many were checked.

    No temporary file is left, except after a SIGKILL (``killed``), when the ``.tmp-*`` file of the write
    that was cut short may remain: it is never read under a real name.
    """
    leftovers = [p for p in run_path.rglob(".tmp-*")]
    if not killed:
        assert leftovers == [], leftovers
    checked = 0
    for path in run_path.rglob("*"):
        if not path.is_file() or path.name.startswith(".tmp-"):
            continue
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".parquet":
            pd.read_parquet(path)
        elif path.suffix == ".npy":
            np.load(path, allow_pickle=False)
        else:
            continue
        checked += 1
    return checked
