"""fastText word vectors (gensim) trained on the corpus itself; a text is the mean of its words' vectors.

Like Doc2Vec, it is fitted on the corpus when loaded (``corpus_texts``). fastText builds a word's vector
from its character n-grams too, so a word never seen in training (a typo, a rare inflection) still gets
one. The n-grams are hashed into 100,000 buckets (gensim's default, 2,000,000, takes 800 MB at 100
dimensions; a corpus of thousands of texts fills few of them). Training runs on one worker thread with a fixed
seed and a process-independent string hash, so the same texts give the same vectors in every process.
"""

from __future__ import annotations

import numpy as np

from flare_core.encoders.base import ProgressFn, unit_rows
from flare_core.encoders.corpus_fitted import GensimEncoder
from flare_core.encoders.doc2vec import _stable_hash, doc2vec_tokenize

NGRAM_BUCKETS = 100_000


class FastTextEncoder(GensimEncoder):
    """Mean fastText word vectors, float32 (N, ``vector_size``), L2-normalised (a text with no word: the
    zero vector, its index in ``empty_rows``)."""

    pooling = "fasttext-word-mean+l2"
    empty_rows = np.zeros(0, dtype=np.int64)

    def _fit(self, texts: list[str]) -> tuple[int, str]:
        """Train skip-gram fastText on the words of ``texts`` (at least 2 texts with a word)."""
        from gensim.models import FastText

        sentences = [words for words in map(doc2vec_tokenize, texts) if words]
        if len(sentences) < 2:
            raise ValueError(f"fastText needs at least 2 texts with words to train on, got {len(sentences)}")
        # a corpus of distinct words (a word-similarity list) has no word seen twice: it keeps them all
        for min_count in dict.fromkeys((self._min_count(len(texts)), 1)):
            try:
                self.model = FastText(
                    sentences,
                    sg=1,
                    vector_size=self.vector_size,
                    epochs=self.epochs,
                    min_count=min_count,
                    workers=1,
                    seed=self.seed,
                    hashfxn=_stable_hash,
                    bucket=NGRAM_BUCKETS,
                )
                break
            except RuntimeError as exc:  # gensim: "you must first build vocabulary before training the model"
                if min_count == 1:
                    raise ValueError(f"fastText cannot be trained on this corpus: {exc}") from None
        return self.vector_size, ""

    def parameter_bytes(self) -> int:
        """Bytes of the fitted word and n-gram vectors (0 before fitting)."""
        if self.model is None:
            return 0
        wv = self.model.wv
        return int(wv.vectors_vocab.nbytes + wv.vectors_ngrams.nbytes)

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Mean word vectors (N, ``vector_size``); fits on ``texts`` first when not fitted yet.
        ``max_length`` caps the number of words read per text."""
        if not self.fitted:
            self.fit(texts)
        out = np.zeros((len(texts), self.vector_size), dtype=np.float32)
        for i, text in enumerate(texts):
            words = doc2vec_tokenize(text)[:max_length]
            if words:
                out[i] = np.mean([self.model.wv[w] for w in words], axis=0, dtype=np.float64)
            if progress is not None and ((i + 1) % batch_size == 0 or i + 1 == len(texts)):
                progress(i + 1, len(texts))
        out, self.empty_rows = unit_rows(out)
        return out
