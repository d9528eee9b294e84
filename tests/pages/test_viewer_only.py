"""A viewer-only dashboard (``FLARE_VIEWER_ONLY=1``) changes nothing: every page, opened with every query
parameter and with every button and widget it shows operated, leaves the run store exactly as it was (no
run started, cancelled, deleted or imported; no file written)."""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from flare_core.run import jobs
from flare_core.store.runs import RunStore

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGES = [
    "dashboard/overview.py",
    "dashboard/sufficiency.py",
    "dashboard/corpus.py",
    "dashboard/collapse.py",
    "dashboard/layers.py",
    "dashboard/validation.py",
    "dashboard/runs.py",
]
MUTATING_KEYS = ("cancel-", "delete-run", "import", "start")


def _snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in (jobs.HEARTBEAT, ".store.lock")
    }


def _copy(run, store: RunStore, run_id: str):
    shutil.copytree(run.path, store.root / run_id)
    copy = store.get(run_id)
    copy.update(id=run_id, name=run_id)
    return copy


@pytest.mark.slow
def test_no_page_parameter_or_widget_changes_anything_in_viewer_only_mode(
    tmp_path, monkeypatch, labelled_run
):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(labelled_run.path, store.root / labelled_run.id)
    waiting, running = (_copy(labelled_run, store, name) for name in ("waiting", "running"))
    waiting.update(
        status="queued", pid=None, queue={"submitted": time.time_ns()}
    )  # a Runs page would start it
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    running.update(status="running", pid=sleeper.pid, host=socket.gethostname(), pid_start_time=None)
    (running.path / jobs.HEARTBEAT).write_text(repr(time.time() + 3600))
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    monkeypatch.setenv("FLARE_VIEWER_ONLY", "1")
    before = _snapshot(store.root)
    hostile = {"delete": running.id, "cancel": running.id, "import": "/etc/passwd", "start": "1",
               "page": "new_run", "resume": running.id}  # fmt: skip
    try:
        for page in PAGES:
            for params in ({"run": labelled_run.id}, {"run": running.id, **hostile}, {"run": "../../etc"}):
                at = AppTest.from_file(APP, default_timeout=120)
                for key, value in params.items():
                    at.query_params[key] = value
                at.run()
                if page != "dashboard/overview.py":
                    at.switch_page(page)
                    at.run()
                assert not at.exception, (page, params, [e.value for e in at.exception])
                keys = [w.key or "" for w in [*at.button, *at.selectbox, *at.checkbox, *at.text_input]]
                assert not [k for k in keys if k.startswith(MUTATING_KEYS)], (page, keys)
                for button in list(at.button):
                    button.click()
                    at.run()
                    assert not at.exception, (page, button.label)
        with pytest.raises(Exception):  # noqa: B017, PT011 - the New run page is not registered at all
            AppTest.from_file(APP, default_timeout=120).run().switch_page("dashboard/new_run.py").run()
        assert _snapshot(store.root) == before
        assert jobs.waiting_runs(store) == [waiting.id] and not waiting.manifest.get("pid")
        assert jobs.effective_status(running) == "running" and not running.cancel_requested()
        assert sorted(r.id for r in store) == sorted([labelled_run.id, waiting.id, running.id])
    finally:
        sleeper.kill()
        sleeper.wait()
