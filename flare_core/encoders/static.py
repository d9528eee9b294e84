"""Static (non-contextual) encoders: GloVe word-vector averages and the tokenlearn static model."""

from __future__ import annotations

import logging
import re

import numpy as np

from flare_core.encoders.base import EncoderBase, ModelSpec, ProgressFn, encode_in_chunks
from flare_core.encoders.builtin import glove_files, static_model_dir

log = logging.getLogger(__name__)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def glove_tokenize(text: str) -> list[str]:
    """Lower-cased runs of letters/digits (apostrophes inside words kept): "Don't stop!" → ["don't",
    "stop"]."""
    return _WORD.findall(text.lower().replace("’", "'"))


class GloveEncoder(EncoderBase):
    """Mean of GloVe 6B 50-d vectors over the known words of each text.

    A text with no known word gets the zero vector; the indices of such texts from the last
    ``encode`` call are kept in ``empty_rows`` and logged.
    """

    pooling = "word-mean"

    def __init__(self, spec: ModelSpec) -> None:
        import pyarrow.parquet as pq

        files = glove_files()
        self.vectors = np.load(files.matrix, allow_pickle=False)  # (V, 50) float32
        words = pq.read_table(files.index).column(0).to_pylist()
        if len(words) != self.vectors.shape[0]:
            raise ValueError(
                f"GloVe index has {len(words)} words but the matrix has {self.vectors.shape[0]} rows"
            )
        self.vocab: dict[str, int] = {}
        for i, word in enumerate(words):
            self.vocab.setdefault(word, i)
        self.spec = spec
        self.empty_rows = np.zeros(0, dtype=np.int64)

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Mean word vectors, float32 (N, 50); ``max_length`` caps the number of words read per text."""
        dim = self.vectors.shape[1]
        out = np.zeros((len(texts), dim), dtype=np.float32)
        empty: list[int] = []
        for i, text in enumerate(texts):
            words = glove_tokenize(text)
            if max_length is not None:
                words = words[:max_length]
            ids = [self.vocab[w] for w in words if w in self.vocab]
            if ids:
                out[i] = self.vectors[ids].astype(np.float64).mean(axis=0)
            else:
                empty.append(i)
            if progress is not None and ((i + 1) % batch_size == 0 or i + 1 == len(texts)):
                progress(i + 1, len(texts))
        self.empty_rows = np.asarray(empty, dtype=np.int64)
        if empty:
            log.info(
                "glove-6b-50d: %d of %d texts have no known word and get the zero vector",
                len(empty),
                len(texts),
            )
        return out


class TokenlearnStaticEncoder(EncoderBase):
    """The tokenlearn static model (Model2Vec-style, 64-d, int8 weights) through its compiled encoder.

    Output rows are unit-norm; a text with no token gets the zero vector (indices in ``empty_rows``).
    """

    pooling = "static-weighted-mean+l2"
    default_max_length = 512

    def __init__(self, spec: ModelSpec) -> None:
        from static_model._static_model import encode_batch

        self._encode_batch = encode_batch
        self.model_dir = str(static_model_dir())
        self._encode_batch(self.model_dir, ["warm up"], 8)  # the compiled encoder loads its weights once
        self.spec = spec
        self.empty_rows = np.zeros(0, dtype=np.int64)

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Static embeddings, float32 (N, 64), rows in input order."""
        limit = max_length or self.default_max_length
        out = encode_in_chunks(
            texts,
            self.spec.dim or 64,
            max(batch_size, 256),
            lambda chunk: self._encode_batch(self.model_dir, chunk, limit),
            progress,
        )
        bad = ~np.isfinite(out).all(axis=1)
        out[bad] = 0.0
        self.empty_rows = np.flatnonzero(bad | ~out.any(axis=1)).astype(np.int64)
        if len(self.empty_rows):
            log.info("tokenlearn-static-64d: %d of %d texts have no token", len(self.empty_rows), len(texts))
        return out
