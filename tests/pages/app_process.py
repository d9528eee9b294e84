"""The dashboard as a real process for the browser tests: ``flare app`` started on a free port over a run
store and waited for until it answers, stopped with its Streamlit child, and the headless Chromium that
drives it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT = Path(__file__).resolve().parents[2]
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-background-timer-throttling",  # a page left open in a background tab keeps refreshing
    "--disable-renderer-backgrounding",
]
#: The marks of every browser test: slow, and skipped where Chromium is not installed.
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (bash install.sh --with-browser)"),
]
#: Settings of the developer's shell that would change what the app exposes.
APP_SETTINGS = ("FLARE_DEV", "FLARE_OWNER_TOKEN", "FLARE_VIEWER_ONLY", "FLARE_OWNER_EMAILS")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(
    runs_dir: Path, *args: str, stderr: int = subprocess.DEVNULL, timeout: float = 90.0
) -> tuple[subprocess.Popen, str]:
    """``(process, url)`` of ``flare app --headless --no-demo [args]`` over ``runs_dir`` on a free port,
    once its health check answers (the test fails after ``timeout`` seconds). The process leads its own
    session, so :func:`stop_app` reaches Streamlit too; ``stderr=subprocess.PIPE`` gives its text."""
    proc, url = launch_app(runs_dir, *args, stderr=stderr)
    wait_until_up(proc, url, timeout)
    return proc, url


def launch_app(runs_dir: Path, *args: str, stderr: int = subprocess.DEVNULL) -> tuple[subprocess.Popen, str]:
    """``(process, url)`` of ``flare app`` as :func:`start_app` starts it, without waiting for it to answer
    (several servers start at once, then :func:`wait_until_up` waits for each)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in APP_SETTINGS} | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "flare_core.cli", "app", "--headless", "--no-demo", "--port", str(port),
         "--runs-dir", str(runs_dir), *args],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True, start_new_session=True,
    )  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def wait_until_up(proc: subprocess.Popen, url: str, timeout: float = 90.0) -> None:
    """Return once the health check of ``flare app`` at ``url`` answers; after ``timeout`` seconds, or when
    the process has ended, stop it and fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"the dashboard at {url} did not start within {timeout:.0f} s (exit code {proc.poll()})")


def stop_app(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to ``flare app`` and its Streamlit process (run workers have their own sessions); a
    server that has already gone is only waited for."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    proc.wait(timeout=20)


@contextlib.contextmanager
def headless_chromium(*args: str) -> Iterator:
    """A headless Chromium (playwright ``Browser``) with :data:`FLAGS` and ``args``, closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[*FLAGS, *args])
        try:
            yield browser
        finally:
            browser.close()
