"""The ``flare`` command: the same functions as the dashboard, from a shell.

Every command that reports results takes ``--json``; every command takes ``--runs-dir`` (or reads
``$FLARE_RUNS_DIR``) to choose the run store.
"""

from __future__ import annotations

from flare_core.cli.parser import build_parser, main

__all__ = ["build_parser", "main"]
