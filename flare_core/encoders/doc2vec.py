"""Doc2Vec (PV-DBOW, gensim) trained on the corpus itself: a model of the user's own texts.

Like TF-IDF + SVD, it is fitted on the corpus when loaded (``corpus_texts``) and then embeds texts: a
text of the fitted corpus gets the vector learned for it, any other text an inferred vector.

Reproducibility: training runs on one worker thread with a fixed seed and a string hash that does not
depend on the process (gensim's default, Python's ``hash``, is salted per process). gensim's own
``infer_vector`` seeds each new vector from that salted hash, so inference is done here with the same
training routine, a vector seeded from the text's SHA-256 and the model's generator reseeded per text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import zlib
from collections.abc import Sequence

import numpy as np

from flare_core.checks import check_int
from flare_core.encoders.base import ModelSpec, ProgressFn, check_batch_size, check_texts
from flare_core.encoders.controls import texts_hash

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def doc2vec_tokenize(text: str) -> list[str]:
    """Lower-cased words (apostrophes inside words kept): "Don't stop!" → ["don't", "stop"]."""
    return _WORD.findall(text.lower().replace("’", "'"))


def _stable_hash(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def _text_seed(words: list[str], seed: int) -> int:
    digest = hashlib.sha256(" ".join(words).encode("utf-8")).digest()
    return (int.from_bytes(digest[:4], "little") + seed) & 0x7FFFFFFF


class Doc2VecEncoder:
    """PV-DBOW document vectors, float32 (N, ``vector_size``), L2-normalised (zero rows stay zero)."""

    pooling = "doc2vec-dbow+l2"

    def __init__(
        self,
        spec: ModelSpec,
        corpus_texts: Sequence[str] | None = None,
        *,
        vector_size: int = 100,
        epochs: int = 40,
        min_count: int = 2,
        seed: int = 0,
    ) -> None:
        self.vector_size = check_int(vector_size, "vector_size", min_value=2)
        self.epochs = check_int(epochs, "epochs", min_value=1)
        self.min_count = check_int(min_count, "min_count", min_value=1)
        self.seed = check_int(seed, "seed")
        self.model = None
        self._rows: dict[str, int] = {}
        self.spec = spec
        if corpus_texts is not None:
            self.fit(corpus_texts)

    @property
    def fitted(self) -> bool:
        return self.model is not None

    def fit(self, texts: Sequence[str]) -> Doc2VecEncoder:
        """Train on ``texts`` (at least 2, with at least one word seen ``min_count`` times)."""
        from gensim.models.doc2vec import Doc2Vec, TaggedDocument

        items = check_texts(texts)
        if len(items) < 2:
            raise ValueError(f"doc2vec needs at least 2 texts to train on, got {len(items)}")
        documents = [TaggedDocument(doc2vec_tokenize(t), [i]) for i, t in enumerate(items)]
        min_count = self.min_count if len(items) >= 50 else 1
        try:
            model = Doc2Vec(
                documents,
                dm=0,
                vector_size=self.vector_size,
                epochs=self.epochs,
                min_count=min_count,
                workers=1,
                seed=self.seed,
                hashfxn=_stable_hash,
            )
        except RuntimeError as exc:  # gensim: "you must first build vocabulary before training the model"
            raise ValueError(f"doc2vec cannot be trained on this corpus: {exc}") from None
        self.model = model
        self._rows = {}
        for i, text in enumerate(items):
            self._rows.setdefault(text, i)
        self.spec = dataclasses.replace(
            self.spec,
            dim=self.vector_size,
            revision=f"{self.spec.revision.split('|')[0]}|fit:{texts_hash(items)[:16]}",
        )
        return self

    def _infer(self, words: list[str]) -> np.ndarray:
        """gensim's ``infer_vector`` with a process-independent start vector and generator."""
        from gensim.models.doc2vec_inner import train_document_dbow

        model = self.model
        seed = _text_seed(words, self.seed)
        start = np.random.default_rng(seed).random(model.dv.vector_size, dtype=np.float32)
        vector = ((start - 0.5) / model.dv.vector_size).reshape(1, -1)
        model.random = np.random.RandomState(seed)
        alpha, step = model.alpha, (model.alpha - model.min_alpha) / max(model.epochs - 1, 1)
        work = np.zeros(model.layer1_size, dtype=np.float32)
        for _ in range(model.epochs):
            train_document_dbow(
                model, words, [0], alpha, work, learn_words=False, learn_hidden=False,
                doctag_vectors=vector, doctags_lockf=np.ones(1, dtype=np.float32),
            )  # fmt: skip
            alpha -= step
        return vector[0]

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: ProgressFn | None = None,
        max_length: int | None = None,
    ) -> np.ndarray:
        """Document vectors (N, ``vector_size``); fits on ``texts`` first when not fitted yet.

        ``max_length`` is accepted for interface compatibility and ignored (the model reads whole texts).
        """
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        if not self.fitted:
            self.fit(items)
        out = np.zeros((len(items), self.vector_size), dtype=np.float32)
        for i, text in enumerate(items):
            row = self._rows.get(text)
            out[i] = self.model.dv[row] if row is not None else self._infer(doc2vec_tokenize(text))
            if progress is not None and ((i + 1) % batch_size == 0 or i + 1 == len(items)):
                progress(i + 1, len(items))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 1e-12)
