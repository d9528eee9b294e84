"""Page times with the owner and two share-link viewers on one server at once (real Chromium, real server).

A store of 50 runs (copies of one finished run, made through the store's own bundle import), ``flare app``
on an address others could reach (the owner presents its token), two share links of the first run (one
with the texts, one "figures only"), then the three sessions go through the menu's analysis pages
together for ``--rounds`` rounds: each page is clicked in the three sessions, then each is timed from its
click to its page drawn (its title shown, no placeholder left, Streamlit idle). Prints the median and the
95th percentile per session kind. ``--profile FILE`` also profiles every script run of the server
(cProfile, one profile per run merged into FILE) and prints the dashboard's and the package's top costs.

.venv/bin/python bench/speed/page_sessions.py --rounds 3
.venv/bin/python bench/speed/page_sessions.py --runs-dir /tmp/store50 --rounds 3 --profile /tmp/pages.prof
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pstats
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.pages.browser_sessions import READY  # noqa: E402  (the tests' own test of a drawn page)

N_RUNS = 50
SHARED_RUN = "run-a"
#: The menu's analysis pages, as they are named in the menu and titled on the page (the Overview last, as a
#: person comes back to it).
MENU = [
    ("Information sufficiency", "Information sufficiency"),
    ("Corpus & embedding map", "Corpus & embeddings"),
    ("Mean-pooling collapse", "Mean-pooling collapse"),
    ("Layer-wise concentration", "Layer-wise concentration"),
    ("Validation", "Validation"),
    ("Overview", "Overview"),
]
#: Installed in the server's processes with ``--profile``: every script run (full or fragment) is
#: profiled in its own thread and written to the folder ``FLARE_BENCH_PROFILE_DIR``.
PROFILE_HOOK = textwrap.dedent(
    """
    import os
    if os.environ.get("FLARE_BENCH_PROFILE_DIR"):
        import cProfile, itertools, threading
        from streamlit.runtime.scriptrunner import script_runner as _sr

        _original = _sr.ScriptRunner._run_script
        _count = itertools.count()

        def _profiled(self, *args, **kwargs):
            profile = cProfile.Profile()
            profile.enable()
            try:
                return _original(self, *args, **kwargs)
            finally:
                profile.disable()
                folder = os.environ["FLARE_BENCH_PROFILE_DIR"]
                profile.dump_stats(os.path.join(folder, f"{os.getpid()}-{next(_count)}.prof"))

        _sr.ScriptRunner._run_script = _profiled
    """
)


def source_run(work: Path) -> Path:
    """A finished labelled run (the tests' fixture run: four models, both estimators), built once and kept
    in the tests' cache of stored runs."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from flare_core.data.demo import bbc_news_frame
    from flare_core.store.runs import RunStore
    from tests.stored_runs import labelled_run_params, stored_run

    corpus = work / "bbc50.csv"
    bbc_news_frame(n_per_topic=10, seed=0)[["text", "label"]].to_csv(corpus, index=False)
    params = labelled_run_params()
    run = stored_run(RunStore(work / "source"), corpus, params, run_id="fixture-labelled",
                     name="labelled fixture", label_column="label")  # fmt: skip
    return run.path


def build_store(runs_dir: Path, source: Path | None) -> None:
    """``N_RUNS`` copies of ``source`` (or of the tests' labelled run) in ``runs_dir``, unless it holds
    them already."""
    from flare_core.store.bundle import export_run
    from flare_core.store.bundle_import import import_run
    from flare_core.store.runs import Run, RunStore

    store = RunStore(runs_dir)
    if len(store.list()) >= N_RUNS:
        return
    if store.root.exists() and any(store.root.iterdir()):
        raise SystemExit(f"{runs_dir} holds {len(store.list())} runs, not {N_RUNS}: give an empty folder")
    with tempfile.TemporaryDirectory() as work:
        path = source or source_run(Path(work))
        bundle = export_run(Run(path), Path(work) / "run.zip").read_bytes()
        import_run(store, bundle, run_id=SHARED_RUN).update(name="Run A shared")
        for index in range(1, N_RUNS):
            import_run(store, bundle, run_id=f"run-{index:02d}").update(name=f"Another run {index:02d}")


def start_server(runs_dir: Path, owner_token: str, profile_dir: Path | None) -> tuple[subprocess.Popen, str]:
    from tests.pages.app_process import APP_SETTINGS, free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in APP_SETTINGS}
    env |= {"FLARE_OWNER_TOKEN": owner_token, "PYTHONPATH": str(ROOT)}
    if profile_dir is not None:
        hook = profile_dir / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(PROFILE_HOOK)
        env |= {"PYTHONPATH": f"{hook}{os.pathsep}{ROOT}", "FLARE_BENCH_PROFILE_DIR": str(profile_dir)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "flare_core.cli", "app", "--headless", "--no-demo", "--port", str(port),
         "--runs-dir", str(runs_dir), "--host", "0.0.0.0"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    stop_server(proc)
    raise SystemExit("the dashboard did not start within 90 s")


def stop_server(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


class Person:
    """One session (its own browser context) and the times of its pages."""

    def __init__(self, browser, kind: str) -> None:
        self.kind = kind
        self.context = browser.new_context(viewport={"width": 1400, "height": 2000})
        self.page = self.context.new_page()
        self.times: list[float] = []
        self.pages: list[tuple[int, str, float]] = []  # (round, title, seconds)

    def ready(self, title: str) -> bool:
        return bool(self.page.evaluate(READY, title))


def wait_all(
    people: list[Person], title: str, started: dict[str, float], keep: bool, round_: int = 0
) -> None:
    """Poll every session until each shows ``title``; each time is taken when its page is first seen drawn."""
    pending = list(people)
    deadline = time.monotonic() + 120
    while pending:
        for who in list(pending):
            if who.ready(title):
                if keep:
                    who.times.append(time.monotonic() - started[who.kind])
                    who.pages.append((round_, title, who.times[-1]))
                pending.remove(who)
        if time.monotonic() > deadline:
            raise SystemExit(f"{title!r} was not drawn within 120 s for {[p.kind for p in pending]}")
        if pending:
            pending[0].page.wait_for_timeout(15)


def drive(url: str, owner_token: str, links: dict[str, str], rounds: int) -> list[Person]:
    from tests.pages.app_process import headless_chromium

    with headless_chromium() as browser:
        people = [Person(browser, kind) for kind in ("owner", "viewer", "figures-only viewer")]
        addresses = {
            "owner": f"?owner={owner_token}&run={SHARED_RUN}",
            "viewer": f"?share={links['texts']}",
            "figures-only viewer": f"?share={links['figures']}",
        }
        started = {}
        for who in people:
            started[who.kind] = time.monotonic()
            who.page.goto(f"{url}/{addresses[who.kind]}", wait_until="commit", timeout=60_000)
        wait_all(people, "Overview", started, keep=False)
        for round_ in range(rounds):
            for menu, title in MENU:
                for who in people:
                    started[who.kind] = time.monotonic()
                    nav = who.page.locator("[data-testid='stSidebarNav']")
                    nav.get_by_text(menu, exact=True).click()
                wait_all(people, title, started, keep=True, round_=round_)
        for who in people:
            who.context.close()
    return people


def print_profile(profile_dir: Path, top: int) -> None:
    files = sorted(profile_dir.glob("*.prof"))
    if not files:
        print("no script run was profiled")
        return
    stats = pstats.Stats(str(files[0]))
    for file in files[1:]:
        stats.add(str(file))
    total = sum(t for (_, _, t, _, _) in stats.stats.values())  # type: ignore[attr-defined]
    own = [
        (key, cumulative)
        for key, (_, _, _, cumulative, _) in stats.stats.items()  # type: ignore[attr-defined]
        if any(part in key[0] for part in ("/dashboard/", "/flare_core/"))
    ]
    own.sort(key=lambda item: -item[1])
    print(
        f"\n{len(files)} script runs profiled, {total:.1f} s of server CPU in all; the project's functions by"
    )
    print("cumulative time (a function's callees included):")
    for (file, line, name), cumulative in own[:top]:
        where = Path(file).relative_to(ROOT) if file.startswith(str(ROOT)) else Path(file).name
        print(f"{cumulative:8.2f} s  {cumulative / total:5.1%}  {where}:{line} {name}")
    stats.dump_stats(str(profile_dir / "all.pstats"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs-dir", type=Path, help="a store of 50 runs to reuse, or an empty folder to fill"
    )
    parser.add_argument(
        "--source", type=Path, help="the finished run to copy (default: the tests' labelled run)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="times the three go through the menu")
    parser.add_argument("--profile", type=Path, help="folder for the server's profiles (cProfile)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    from flare_core.store import shares
    from flare_core.store.runs import RunStore

    with tempfile.TemporaryDirectory() as scratch:
        runs_dir = args.runs_dir or Path(scratch) / "runs"
        built = time.monotonic()
        build_store(runs_dir, args.source)
        print(f"store: {runs_dir} ({len(RunStore(runs_dir).list())} runs, {time.monotonic() - built:.0f} s)")
        store = RunStore(runs_dir)
        links = {
            "texts": shares.create_link(store, SHARED_RUN)[0],
            "figures": shares.create_link(store, SHARED_RUN, texts=False)[0],
        }
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            for old in args.profile.glob("*.prof"):
                old.unlink()
        owner_token = secrets.token_urlsafe(32)
        proc, url = start_server(runs_dir, owner_token, args.profile)
        try:
            load = os.getloadavg()[0]
            people = drive(url, owner_token, links, args.rounds)
            load = max(load, os.getloadavg()[0])
        finally:
            stop_server(proc)
            for prefix in (links["texts"][:6], links["figures"][:6]):
                shares.revoke_links(store, SHARED_RUN, prefix)
    pages = len(people[0].times)
    print(f"{pages} pages per session ({args.rounds} rounds of {len(MENU)}), three sessions at once, "
          f"{os.cpu_count()} cores, load average up to {load:.1f}")  # fmt: skip
    print(f"{'session':<22} {'median (s)':>10} {'p95 (s)':>8} {'max (s)':>8}")
    every = []
    for who in people:
        every += who.times
        print(f"{who.kind:<22} {statistics.median(who.times):>10.2f} {np.percentile(who.times, 95):>8.2f} "
              f"{max(who.times):>8.2f}")  # fmt: skip
    print(
        f"{'all three':<22} {statistics.median(every):>10.2f} {np.percentile(every, 95):>8.2f} {max(every):>8.2f}"
    )
    print(f"\n{'page (median of the three sessions)':<38} {'first round (s)':>15} {'later rounds (s)':>16}")
    for _, title in MENU:
        first = [t for who in people for r, p, t in who.pages if p == title and r == 0]
        later = [t for who in people for r, p, t in who.pages if p == title and r > 0]
        shown = f"{statistics.median(later):>16.2f}" if later else f"{'-':>16}"
        print(f"{title:<38} {statistics.median(first):>15.2f} {shown}")
    if args.profile:
        print_profile(args.profile, args.top)


if __name__ == "__main__":
    main()
