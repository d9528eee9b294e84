"""fastText word vectors (gensim) trained on the corpus itself; a text is the mean of its words' vectors.

Like Doc2Vec, it is fitted on the corpus when loaded (``corpus_texts``). fastText builds a word's vector
from its character n-grams too, so a word never seen in training (a typo, a rare inflection) still gets
one. The n-grams are hashed into 100,000 buckets (gensim's default, 2,000,000, takes 800 MB at 100
dimensions; a corpus of thousands of texts fills few of them). Training runs on one worker thread with a fixed seed and a process-independent string hash, so the
same texts give the same vectors in every process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from flare_core.checks import check_int
from flare_core.encoders.base import ModelSpec, ProgressFn, check_batch_size, check_max_length, check_texts
from flare_core.encoders.controls import texts_hash
from flare_core.encoders.doc2vec import _stable_hash, doc2vec_tokenize

NGRAM_BUCKETS = 100_000


class FastTextEncoder:
    """Mean fastText word vectors, float32 (N, ``vector_size``), L2-normalised (a text with no word: the
    zero vector, its index in ``empty_rows``)."""

    pooling = "fasttext-word-mean+l2"

    def __init__(
        self,
        spec: ModelSpec,
        corpus_texts: Sequence[str] | None = None,
        *,
        vector_size: int = 100,
        epochs: int = 10,
        min_count: int = 2,
        seed: int = 0,
    ) -> None:
        self.vector_size = check_int(vector_size, "vector_size", min_value=2)
        self.epochs = check_int(epochs, "epochs", min_value=1)
        self.min_count = check_int(min_count, "min_count", min_value=1)
        self.seed = check_int(seed, "seed")
        self.model = None
        self.spec = spec
        self.empty_rows = np.zeros(0, dtype=np.int64)
        if corpus_texts is not None:
            self.fit(corpus_texts)

    @property
    def fitted(self) -> bool:
        return self.model is not None

    def fit(self, texts: Sequence[str]) -> FastTextEncoder:
        """Train skip-gram fastText on the words of ``texts`` (at least 2 texts with a word)."""
        from gensim.models import FastText

        items = check_texts(texts)
        sentences = [words for words in map(doc2vec_tokenize, items) if words]
        if len(sentences) < 2:
            raise ValueError(f"fastText needs at least 2 texts with words to train on, got {len(sentences)}")
        try:
            model = FastText(
                sentences, sg=1, vector_size=self.vector_size, epochs=self.epochs,
                min_count=self.min_count if len(items) >= 50 else 1, workers=1, seed=self.seed,
                hashfxn=_stable_hash, bucket=NGRAM_BUCKETS,
            )  # fmt: skip
        except RuntimeError as exc:  # gensim: "you must first build vocabulary before training the model"
            raise ValueError(f"fastText cannot be trained on this corpus: {exc}") from None
        self.model = model
        self.spec = dataclasses.replace(
            self.spec,
            dim=self.vector_size,
            revision=f"{self.spec.revision.split('|')[0]}|fit:{texts_hash(items)[:16]}",
        )
        return self

    def parameter_bytes(self) -> int:
        """Bytes of the fitted word and n-gram vectors (0 before fitting)."""
        if self.model is None:
            return 0
        wv = self.model.wv
        return int(wv.vectors_vocab.nbytes + wv.vectors_ngrams.nbytes)

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: ProgressFn | None = None,
        max_length: int | None = None,
    ) -> np.ndarray:
        """Mean word vectors (N, ``vector_size``); fits on ``texts`` first when not fitted yet.
        ``max_length`` caps the number of words read per text."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        limit = check_max_length(max_length)
        if not self.fitted:
            self.fit(items)
        out = np.zeros((len(items), self.vector_size), dtype=np.float32)
        for i, text in enumerate(items):
            words = doc2vec_tokenize(text)[:limit]
            if words:
                out[i] = np.mean([self.model.wv[w] for w in words], axis=0, dtype=np.float64)
            if progress is not None and ((i + 1) % batch_size == 0 or i + 1 == len(items)):
                progress(i + 1, len(items))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        self.empty_rows = np.flatnonzero(norms[:, 0] <= 1e-12).astype(np.int64)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 1e-12)
