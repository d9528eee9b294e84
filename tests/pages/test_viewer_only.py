"""Sessions that may only look change nothing: a dashboard with ``FLARE_VIEWER_ONLY=1`` (share links only,
no owner), opened with share links (with texts and figures only), with every query parameter and with
every button and widget it shows operated, leaves the run store exactly as it was (no run started,
cancelled, deleted, imported or shared; no file written). Without a link, or with the owner token, it
opens nothing."""

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

from dashboard.page_list import SHARED_PAGES as PAGES
from flare_core.run import jobs
from flare_core.store import shares
from flare_core.store.runs import RunStore
from tests.pages.test_access_pages import _opens_nothing

APP = str(Path(__file__).resolve().parents[2] / "app.py")
MUTATING_KEYS = ("cancel-", "delete-run", "import", "start", "share-")
OWNER_TOKEN = "owner-token-that-must-not-work-here"


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


def _open(page: str, params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    if page != "dashboard/overview.py":  # opened at its own address, as a link to it would open it
        at.switch_page(page)
    at.run()
    assert not at.exception, (page, params, [e.value for e in at.exception])
    return at


@pytest.mark.slow
def test_no_page_parameter_or_widget_of_a_share_link_changes_anything(tmp_path, monkeypatch, labelled_run):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(labelled_run.path, store.root / labelled_run.id)
    waiting, running = (_copy(labelled_run, store, name) for name in ("waiting", "running"))
    waiting.update(
        status="queued", pid=None, queue={"submitted": time.time_ns()}
    )  # the Runs page would start it
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    running.update(status="running", pid=sleeper.pid, host=socket.gethostname(), pid_start_time=None)
    (running.path / jobs.HEARTBEAT).write_text(repr(time.time() + 3600))
    links = {texts: shares.create_link(store, labelled_run.id, texts=texts)[0] for texts in (True, False)}
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    monkeypatch.setenv("FLARE_VIEWER_ONLY", "1")
    monkeypatch.setenv("FLARE_OWNER_TOKEN", OWNER_TOKEN)
    before = _snapshot(store.root)
    hostile = {"delete": running.id, "cancel": running.id, "import": "/etc/passwd", "start": "1",
               "page": "new_run", "resume": running.id, "run": running.id}  # fmt: skip
    try:
        for token in links.values():
            built, titles = False, set()
            for page in PAGES:
                for params in (
                    {"share": token},
                    {"share": token, **hostile},
                    {"share": token, "run": "../../etc"},
                ):
                    at = _open(page, params)
                    assert [t.value for t in at.title] == [at.title[0].value] and at.title[
                        0
                    ].value != "FLARE Studio"
                    titles.add(at.title[0].value)
                    assert at.session_state["run_id"] == labelled_run.id  # the link's run, whatever was asked
                    keys = [w.key or "" for w in [*at.button, *at.selectbox, *at.checkbox, *at.text_input]]
                    assert not [k for k in keys if k.startswith(MUTATING_KEYS)], (page, keys)
                    assert not at.sidebar.selectbox  # no picker of runs
                    for button in list(at.button):
                        if button.key == "build-report" and built:
                            continue  # the report is built once per link (below: downloaded, not written)
                        built = built or button.key == "build-report"
                        button.click()
                        at.run()
                        assert not at.exception, (page, button.label)
                    for page_off_limits in ("dashboard/runs.py", "dashboard/new_run.py"):
                        with pytest.raises(ValueError, match="Could not find a navigation page"):
                            at.switch_page(page_off_limits)
            assert built, "a link's session offers its run's report"
            assert len(titles) == len(PAGES), titles  # each page opened itself, not the Overview in its place
        for params in ({}, {"run": labelled_run.id}, {"owner": OWNER_TOKEN}):  # no link: nothing opens
            at = _open("dashboard/overview.py", params)
            assert [t.value for t in at.title] == ["FLARE Studio"]
            assert not at.text_input and _opens_nothing(at)  # no owner login here, and no page
        assert _snapshot(store.root) == before
        assert jobs.waiting_runs(store) == [waiting.id] and not waiting.manifest.get("pid")
        assert jobs.effective_status(running) == "running" and not running.cancel_requested()
        assert sorted(r.id for r in store) == sorted([labelled_run.id, waiting.id, running.id])
    finally:
        sleeper.kill()
        sleeper.wait()
