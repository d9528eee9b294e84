"""The ``flare`` process's way out: run the command, finish the Python side of shutdown, then leave.

pyarrow's C++ thread pools can abort the interpreter while it tears down native libraries after the
command's work is done ("terminate called without an active exception", SIGABRT, apache/arrow#34314):
a ``flare import`` that had printed its correct answer then exited −6 in about one suite run in five.
:func:`console` therefore does everything a normal exit does on the Python side (waits for non-daemon
threads, runs the ``atexit`` handlers, flushes the standard streams) and ends the process with
``os._exit``, which skips only the native libraries' own teardown. :func:`flare_core.cli.parser.main`
stays an ordinary function that returns the exit status, for callers in the same process.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import NoReturn

from flare_core.cli.parser import main

#: The exit status of a command stopped by Ctrl-C, as a shell reports SIGINT.
INTERRUPTED = 130


def exit_status(code: object) -> int:
    """The process exit status of ``sys.exit(code)``: 0 for None, an int as it is, 1 for anything else
    (which :func:`console` prints to stderr, as ``sys.exit`` does)."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    return 1


def console(argv: Sequence[str] | None = None) -> NoReturn:
    """Run ``flare ARGV`` and end the process with its exit status (the ``flare`` script's entry point)."""
    try:
        code: object = main(argv)
    except SystemExit as exc:  # argparse's own refusals and --help
        code = exc.code
    except KeyboardInterrupt:
        code = INTERRUPTED
    except BaseException:
        traceback.print_exc()
        code = 1
    if code is not None and exit_status(code) == 1 and not isinstance(code, int):
        print(code, file=sys.stderr)
    leave(exit_status(code))


def leave(status: int) -> NoReturn:
    """End the process with ``status`` after the Python side of a normal shutdown: non-daemon threads
    joined, ``atexit`` handlers run, stdout and stderr flushed."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing to deliver
            stream.flush()
    os._exit(status)
