"""``python -m flare_core.cli``: the ``flare`` command."""

from __future__ import annotations

import sys

from flare_core.cli.parser import main

sys.exit(main())
