"""``python -m flare_core.cli``: the ``flare`` command."""

from __future__ import annotations

from flare_core.cli.process_exit import console

console()
