"""Hugging Face hub offline mode for a block of code (the built-in models never reach the network)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """Hugging Face hub offline mode for the duration of the block (env var and the hub's constant)."""
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = None
    try:
        from huggingface_hub import constants as _constants

        constants = _constants
        old_const = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        old_const = None
    try:
        yield
    finally:
        if constants is not None:
            constants.HF_HUB_OFFLINE = old_const
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before
