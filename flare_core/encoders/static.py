"""Static (non-contextual) encoders: GloVe word-vector averages and the tokenlearn static model."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import numpy as np

from flare_core.encoders.base import ModelSpec, ProgressFn, check_batch_size, check_max_length, check_texts
from flare_core.encoders.builtin import glove_files, static_model_dir

log = logging.getLogger(__name__)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def glove_tokenize(text: str) -> list[str]:
    """Lower-cased runs of letters/digits (apostrophes inside words kept): "Don't stop!" → ["don't", "stop"]."""
    return _WORD.findall(text.lower().replace("’", "'"))


class GloveEncoder:
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

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: ProgressFn | None = None,
        max_length: int | None = None,
    ) -> np.ndarray:
        """Mean word vectors, float32 (N, 50); ``max_length`` caps the number of words read per text."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        limit = check_max_length(max_length)
        dim = self.vectors.shape[1]
        out = np.zeros((len(items), dim), dtype=np.float32)
        empty: list[int] = []
        for i, text in enumerate(items):
            words = glove_tokenize(text)
            if limit is not None:
                words = words[:limit]
            ids = [self.vocab[w] for w in words if w in self.vocab]
            if ids:
                out[i] = self.vectors[ids].astype(np.float64).mean(axis=0)
            else:
                empty.append(i)
            if progress is not None and ((i + 1) % batch_size == 0 or i + 1 == len(items)):
                progress(i + 1, len(items))
        self.empty_rows = np.asarray(empty, dtype=np.int64)
        if empty:
            log.info(
                "glove-6b-50d: %d of %d texts have no known word and get the zero vector",
                len(empty),
                len(items),
            )
        return out


class TokenlearnStaticEncoder:
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

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: ProgressFn | None = None,
        max_length: int | None = None,
    ) -> np.ndarray:
        """Static embeddings, float32 (N, 64), rows in input order."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        limit = check_max_length(max_length) or self.default_max_length
        dim = self.spec.dim or 64
        out = np.zeros((len(items), dim), dtype=np.float32)
        step = max(batch_size, 256)
        for start in range(0, len(items), step):
            chunk = items[start : start + step]
            emb = np.asarray(self._encode_batch(self.model_dir, chunk, limit), dtype=np.float32)
            if emb.shape != (len(chunk), dim):
                raise RuntimeError(f"static model returned shape {emb.shape}, expected {(len(chunk), dim)}")
            out[start : start + len(chunk)] = emb
            if progress is not None:
                progress(start + len(chunk), len(items))
        bad = ~np.isfinite(out).all(axis=1)
        out[bad] = 0.0
        self.empty_rows = np.flatnonzero(bad | ~out.any(axis=1)).astype(np.int64)
        if len(self.empty_rows):
            log.info("tokenlearn-static-64d: %d of %d texts have no token", len(self.empty_rows), len(items))
        return out
