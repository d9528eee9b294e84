"""Faults of many runs and people at once (``bench/faults/faults.py``): the job queue (``queue``), a browser
reloading pages while queued runs compute (``load``), and commands on one run at the same moment
(``concurrent``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from bench.faults.fault_support import Reference, Row, flare, flare_popen, kill_group
from dashboard.page_list import STORED_RUN_PAGES, url_path
from flare_core.run import jobs
from flare_core.store import doctor
from flare_core.store.runs import RunStore

# -- queue --------------------------------------------------------------------------------------------------


def queue_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("4 runs, FLARE_MAX_JOBS=2 (+ restart)")
    old = os.environ.get("FLARE_MAX_JOBS")
    os.environ["FLARE_MAX_JOBS"] = "2"
    try:
        for trial in range(1 if short else 2):
            store = RunStore(work / f"queue-{trial}")
            runs = [ref.new_run(store) for _ in range(4)]
            started = time.perf_counter()
            submitted = [jobs.submit(store, r.id) for r in runs]
            positions = [s["position"] for s in submitted]
            most = 0
            restarted = None
            while True:
                active = jobs.active_runs(store)
                most = max(most, len(active))
                if trial == 1 and restarted is None and jobs.waiting_runs(store) and active:
                    for run_id in active:  # the machine stops: every worker dies, nobody dispatches
                        kill_group(store.get(run_id).manifest["pid"])
                    restart, _ = flare("runs", runs_dir=store.root)  # the app comes back
                    restarted = restart.returncode
                    for run_id in active:  # and the killed runs are resumed through the queue
                        flare("resume", run_id, "--background", runs_dir=store.root)
                statuses = [jobs.effective_status(r) for r in runs]
                if all(s in ("done", "failed", "cancelled") for s in statuses):
                    break
                time.sleep(0.05)
            seconds = time.perf_counter() - started
            launched = [r.manifest.get("launched_ns", 0) for r in runs]
            differ = [f for r in runs for f in ref.same(r)]
            ok = (
                positions == [None, None, 1, 2]
                and all(s == "done" for s in statuses)
                and most <= 2
                and (trial == 1 or launched == sorted(launched))
                and not differ
                and (trial == 0 or restarted == 0)
            )
            row.add(
                ok,
                bool(differ),
                seconds if trial == 1 else None,
                f"trial {trial}: positions {positions}, statuses {statuses}, at most {most} at once, "
                f"launch order ok {launched == sorted(launched)}, differ {differ[:3]}",
            )
    finally:
        if old is None:
            os.environ.pop("FLARE_MAX_JOBS", None)
        else:
            os.environ["FLARE_MAX_JOBS"] = old
    return row


# -- load: a browser reloading the pages while queued runs compute -------------------------------------------

LOAD_PAGES = [url_path(p) for p in STORED_RUN_PAGES]


def _serve_app(store: RunStore) -> tuple[subprocess.Popen, str]:
    """The dashboard over ``store`` with ``FLARE_MAX_JOBS=2`` on a free port, served as ``flare app`` serves
    it (no file watcher outside development): the process and its URL."""
    import socket

    from flare_core.cli.commands import app_command

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "FLARE_RUNS_DIR": str(store.root), "FLARE_MAX_JOBS": "2"}
    app = subprocess.Popen(
        [*app_command(root / "app.py", port=port, headless=True),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return app, f"http://127.0.0.1:{port}"


def _wait_healthy(url: str, seconds: float = 120) -> None:
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
            break
        time.sleep(0.5)


def _open_page(page, url: str, path: str, run_id: str, timeout: int) -> None:
    """Navigate to one page of the run and wait until its script has finished."""
    page.goto(f"{url}/{path}?run={run_id}", wait_until="domcontentloaded", timeout=timeout)
    page.locator("h1").first.wait_for(timeout=timeout)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=timeout)


def _reload_pages(page, url: str, run_id: str, runs: list, seconds_between: float, row: Row):
    """Each page of :data:`LOAD_PAGES` in turn, one every ``seconds_between`` seconds, until every run of
    ``runs`` has ended: the render times and the pages they are of."""
    times: list[float] = []
    pages: list[str] = []
    k = 0
    while True:
        path = LOAD_PAGES[k % len(LOAD_PAGES)]
        k += 1
        started = time.perf_counter()
        _open_page(page, url, path, run_id, 60_000)
        times.append(time.perf_counter() - started)
        pages.append(path or "overview")
        if page.locator("[data-testid='stException']").count():
            row.notes.append(f"exception on /{path}")
        if all(jobs.effective_status(r) in ("done", "failed", "cancelled") for r in runs):
            return times, pages
        time.sleep(max(0.0, seconds_between - (time.perf_counter() - started)))


def load_trials(ref: Reference, work: Path, seconds_between: float = 2.0) -> Row:
    """4 runs with ``FLARE_MAX_JOBS=2`` started from the dashboard's process while Chromium reloads each
    analysis page of a finished run every ``seconds_between`` seconds; p95 of the page render times."""
    row = Row("4 runs + a browser reloading pages every 2 s")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        row.notes.append("Chromium is not installed: skipped (bash install.sh --with-browser)")
        return row
    from playwright.sync_api import sync_playwright

    store = RunStore(work / "load")
    shutil.copytree(ref.run.path, store.root / ref.run.id)
    app, url = _serve_app(store)
    old = os.environ.get("FLARE_MAX_JOBS")
    os.environ["FLARE_MAX_JOBS"] = "2"
    try:
        _wait_healthy(url)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--headless=new", "--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            for path in LOAD_PAGES:  # warm-up, not timed: the app's first imports and caches
                _open_page(page, url, path, ref.run.id, 120_000)
            runs = [ref.new_run(store) for _ in range(4)]
            for run in runs:
                jobs.submit(store, run.id)
            times, pages = _reload_pages(page, url, ref.run.id, runs, seconds_between, row)
            browser.close()
        statuses = [jobs.effective_status(r) for r in runs]
        differ = [f for r in runs for f in ref.same(r)]
        p95 = float(sorted(times)[max(0, int(round(0.95 * len(times))) - 1)])
        row.add(
            all(s == "done" for s in statuses) and not differ and p95 < 2.0,
            bool(differ),
            None,
            f"statuses {statuses}, differ {differ[:3]}, p95 {p95:.2f} s",
        )
        row.notes.append(
            f"{len(times)} page loads while 4 runs computed: median {statistics.median(times):.2f} s, "
            f"p95 {p95:.2f} s, max {max(times):.2f} s; slowest: "
            + ", ".join(
                f"/{pages[k]} {times[k]:.2f} s" for k in sorted(range(len(times)), key=times.__getitem__)[-4:]
            )
        )
    finally:
        if old is None:
            os.environ.pop("FLARE_MAX_JOBS", None)
        else:
            os.environ["FLARE_MAX_JOBS"] = old
        app.terminate()
        app.wait(timeout=30)
    return row


# -- concurrent edits ---------------------------------------------------------------------------------------


def concurrent_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("concurrent resume / delete / export / import")
    repeats = 1 if short else 3
    for trial in range(repeats):
        store = RunStore(work / f"concurrent-{trial}")
        # two `flare resume` of one run at the same moment
        run = ref.new_run(store)
        a = flare_popen("resume", run.id, "--json", runs_dir=store.root)
        b = flare_popen("resume", run.id, "--json", runs_dir=store.root)
        started = time.perf_counter()
        outs = [(p.wait(600), *p.communicate()) for p in (a, b)]
        seconds = time.perf_counter() - started
        codes = sorted(o[0] for o in outs)
        told = any(o[0] == 3 and f"run {run.id} is busy: process" in o[2] for o in outs)
        late = any(o[0] == 0 and "already done" in o[2] for o in outs)  # the loser started after
        differ = ref.same(run)
        row.add(
            run.status == "done" and not differ and (codes == [0, 3] and told or codes == [0, 0] and late),
            bool(differ),
            seconds,
            f"two resumes: exit codes {codes}, {[o[2][-160:] for o in outs]}",
        )
        # delete of a running run is refused; it finishes
        running = ref.new_run(store)
        jobs.start(store, running.id)
        while running.status == "queued" and jobs.effective_status(running) != "failed":
            time.sleep(0.02)
        refused, _ = flare("delete", running.id, runs_dir=store.root)
        final = jobs.wait(store, running.id, timeout=600, poll=0.1)
        ok = (refused.returncode == 3 and "is busy" in refused.stderr) or (
            refused.returncode == 0 and not store.exists(running.id)  # it had finished already
        )
        row.add(ok and (final == "done" or not store.exists(running.id)), False, None,
                f"delete while running: rc {refused.returncode} {refused.stderr[-200:]!r}, final {final}")  # fmt: skip
        # export and delete at the same moment
        out = work / f"bundle-{trial}.zip"
        exp = flare_popen("export", running.id, "-o", str(out), runs_dir=store.root)
        dele = flare_popen("delete", running.id, runs_dir=store.root)
        exp_rc, dele_rc = exp.wait(600), dele.wait(600)
        exp_err = exp.communicate()[1]
        if exp_rc == 0:  # the export won: its bundle is complete
            imported, _ = flare("import", str(out), "--run-id", "reimported", runs_dir=store.root)
            differ = ref.same(store.get("reimported")) if imported.returncode == 0 else ["(import failed)"]
            complete = not differ
        else:  # the delete won: the export says so and leaves no file
            said = "deleted while it was being exported" in exp_err or f"no run '{running.id}'" in exp_err
            complete, differ = said and not out.exists(), []
        leftovers = [p.name for p in store.root.iterdir() if p.name.startswith((".deleting-", ".staging-"))]
        row.add(
            dele_rc == 0 and complete and not leftovers and not store.exists(running.id),
            not complete,
            None,
            f"export+delete: export rc {exp_rc} {exp_err[-200:]!r}, delete rc {dele_rc}, leftovers {leftovers}, "
            f"bundle differs in {differ[:3]}",
        )
        # the same bundle imported twice at the same moment
        if not out.exists():
            from flare_core.store.bundle import export_run

            export_run(run, out)
        target = RunStore(work / f"import-{trial}")
        procs = [flare_popen("import", str(out), runs_dir=target.root) for _ in range(2)]
        results = [(p.wait(600), *p.communicate()) for p in procs]
        codes = sorted(r[0] for r in results)
        imported = [r for r in target]
        leftovers = [p.name for p in target.root.glob(".staging-*")]
        ok = (
            codes == [0, 2]
            and any("already exists" in r[2] for r in results)
            and len(imported) == 1
            and not leftovers
            and doctor.check_run(imported[0].path) == []
        )
        row.add(
            ok, not ok and len(imported) != 1, None, f"import twice: {codes} {[r[2][-160:] for r in results]}"
        )
    return row
