"""Doc2Vec (PV-DBOW, gensim) trained on the corpus itself: a model of the user's own texts.

Like TF-IDF + SVD, it is fitted on the corpus when loaded (``corpus_texts``) and then embeds texts: a
text of the fitted corpus gets the vector learned for it, any other text an inferred vector.

Reproducibility: training runs on one worker thread with a fixed seed and a string hash that does not
depend on the process (gensim's default, Python's ``hash``, is salted per process). gensim's own
``infer_vector`` seeds each new vector from that salted hash, so inference is done here with the same
training routine, a vector seeded from the text's SHA-256 and the model's generator reseeded per text.
"""

from __future__ import annotations

import hashlib
import re
import zlib

import numpy as np

from flare_core.encoders.base import ProgressFn, unit_rows
from flare_core.encoders.corpus_fitted import GensimEncoder

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def doc2vec_tokenize(text: str) -> list[str]:
    """Lower-cased words (apostrophes inside words kept): "Don't stop!" → ["don't", "stop"]."""
    return _WORD.findall(text.lower().replace("’", "'"))


def _stable_hash(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def _text_seed(words: list[str], seed: int) -> int:
    digest = hashlib.sha256(" ".join(words).encode("utf-8")).digest()
    return (int.from_bytes(digest[:4], "little") + seed) & 0x7FFFFFFF


class Doc2VecEncoder(GensimEncoder):
    """PV-DBOW document vectors, float32 (N, ``vector_size``), L2-normalised (zero rows stay zero)."""

    pooling = "doc2vec-dbow+l2"
    default_epochs = 40

    def _fit(self, texts: list[str]) -> tuple[int, str]:
        """Train on ``texts`` (at least 2, with at least one word); words seen fewer than ``min_count``
        times are dropped unless that would drop them all."""
        from gensim.models.doc2vec import Doc2Vec, TaggedDocument

        if len(texts) < 2:
            raise ValueError(f"doc2vec needs at least 2 texts to train on, got {len(texts)}")
        documents = [TaggedDocument(doc2vec_tokenize(t), [i]) for i, t in enumerate(texts)]
        # a corpus of distinct words (a word-similarity list) has no word seen twice: it keeps them all
        for min_count in dict.fromkeys((self._min_count(len(texts)), 1)):
            try:
                self.model = Doc2Vec(
                    documents,
                    dm=0,
                    vector_size=self.vector_size,
                    epochs=self.epochs,
                    min_count=min_count,
                    workers=1,
                    seed=self.seed,
                    hashfxn=_stable_hash,
                )
                break
            except RuntimeError as exc:  # gensim: "you must first build vocabulary before training the model"
                if min_count == 1:
                    raise ValueError(f"doc2vec cannot be trained on this corpus: {exc}") from None
        self._rows: dict[str, int] = {}
        for i, text in enumerate(texts):
            self._rows.setdefault(text, i)
        return self.vector_size, ""

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
                model,
                words,
                [0],
                alpha,
                work,
                learn_words=False,
                learn_hidden=False,
                doctag_vectors=vector,
                doctags_lockf=np.ones(1, dtype=np.float32),
            )
            alpha -= step
        return vector[0]

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Document vectors (N, ``vector_size``); fits on ``texts`` first when not fitted yet.

        ``max_length`` is accepted for interface compatibility and ignored (the model reads whole texts).
        """
        if not self.fitted:
            self.fit(texts)
        out = np.zeros((len(texts), self.vector_size), dtype=np.float32)
        for i, text in enumerate(texts):
            row = self._rows.get(text)
            out[i] = self.model.dv[row] if row is not None else self._infer(doc2vec_tokenize(text))
            if progress is not None and ((i + 1) % batch_size == 0 or i + 1 == len(texts)):
                progress(i + 1, len(texts))
        return unit_rows(out)[0]
