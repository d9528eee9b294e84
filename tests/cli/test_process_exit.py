"""The ``flare`` process's exit: the Python side of shutdown is done, the native teardown is skipped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flare_core.cli.process_exit import INTERRUPTED, exit_status

PROGRAM = """
import atexit, sys, threading, time
from flare_core.cli.process_exit import leave

class Held:  # finalised only when the interpreter tears itself down
    def __del__(self):
        print("finalized", flush=True)

held = Held()
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.3), print("thread done", flush=True))).start()
print("unflushed", end="")
{exit}
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_leave_does_the_python_shutdown_and_skips_the_interpreter_teardown():
    normal = _python(PROGRAM.format(exit="sys.exit(7)"))
    left = _python(PROGRAM.format(exit="leave(7)"))
    # the reference: a normal exit waits for the thread, runs atexit, then finalises the interpreter
    assert (normal.returncode, normal.stdout) == (7, "unflushedthread done\natexit ran\nfinalized\n")
    # the same order and output up to the teardown, which is where native thread pools abort
    assert (left.returncode, left.stdout) == (7, "unflushedthread done\natexit ran\n")


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (3, 3), (True, 1), ("a message", 1), (INTERRUPTED, 130)]
)
def test_exit_status_follows_sys_exit(code, status):
    assert exit_status(code) == status


def test_the_flare_process_keeps_its_exit_statuses_and_messages(tmp_path: Path):
    def flare(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "flare_core.cli", *args], capture_output=True, text=True, timeout=120
        )

    assert flare("runs", "--runs-dir", str(tmp_path)).returncode == 0
    unknown = flare("nonsense")
    assert unknown.returncode == 2 and "invalid choice: 'nonsense'" in unknown.stderr
    missing = flare("show", "nope", "--runs-dir", str(tmp_path))
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr
    assert flare("--help").returncode == 0
