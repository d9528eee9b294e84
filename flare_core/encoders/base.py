"""The encoder protocol, model metadata and the error raised for models that cannot be loaded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from flare_core.checks import check_int

ProgressFn = Callable[[int, int], None]

#: How a model computes its vectors.
KINDS = ("transformer", "onnx", "compiled", "static", "corpus", "hub", "precomputed")
#: What a model is for in a ranking (see :mod:`flare_core.encoders.pool`).
ROLES = ("candidate", "control", "partial")


@dataclass(frozen=True)
class ModelSpec:
    """What the registry knows about one embedding model.

    ``dim`` and ``layers`` are ``None`` when unknown before loading (hub ids, local folders) or not
    applicable (``layers`` for static models). ``revision`` identifies the weights (package version,
    or a hash of local files) and is part of every embedding-cache key. ``role`` is one of
    :data:`ROLES` and ``family`` groups models that share an architecture or training recipe.
    """

    id: str
    dim: int | None
    layers: int | None
    max_tokens: int | None
    source: str
    licence: str
    kind: str
    description: str
    revision: str
    role: str = "candidate"
    family: str = ""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")


@runtime_checkable
class Encoder(Protocol):
    """Anything that turns texts into one float32 vector each."""

    spec: ModelSpec

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """Embed ``texts``: float32 array of shape (N, d), rows in input order.

        ``progress(done, total)`` is called after each batch when given.
        """
        ...


def length_batches(texts: Sequence[str], batch_size: int) -> list[np.ndarray]:
    """Indices of ``texts`` in batches of similar lengths (less padding), the batches in a seeded order.

    Shuffling the batches keeps texts done proportional to the work done, so a progress bar and the time
    left read true: read longest first, all-mpnet-base-v2 took 11 s for the first 32 of 699 debate
    statements and 1 s for the last 64, and the time left read up to 2.4 times too long.
    """
    order = np.argsort([-len(t) for t in texts], kind="stable")
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    return [batches[k] for k in np.random.default_rng(0).permutation(len(batches))]


def check_texts(texts: Sequence[str]) -> list[str]:
    """Validate a sequence of texts and return it as a list of ``str``."""
    if isinstance(texts, str | bytes):
        raise ValueError("texts must be a sequence of strings, not a single string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ValueError(f"texts[{i}] is {type(text).__name__}, expected str")
    return out


def check_batch_size(batch_size: int) -> int:
    """Validate a batch size (a positive int)."""
    return check_int(batch_size, "batch_size", min_value=1)


def check_max_length(max_length: int | None) -> int | None:
    """Validate an optional token limit (a positive int, at least 2 so special tokens fit)."""
    return check_int(
        max_length, "max_length", min_value=2, allow_none=True, reason="room for the special tokens"
    )


def empty_matrix(dim: int) -> np.ndarray:
    """A float32 array of shape (0, dim)."""
    return np.zeros((0, dim), dtype=np.float32)
