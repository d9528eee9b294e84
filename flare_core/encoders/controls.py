"""Control encoders built locally: TF-IDF + truncated SVD (random-init and truncated transformers live in
``transformer.random_init_transformer`` and ``transformer.load_hf_folder``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flare_core.checks import check_int
from flare_core.encoders.base import EncoderBase, ModelSpec, ProgressFn, unit_rows
from flare_core.encoders.corpus_fitted import CorpusFittedEncoder


class TfidfSvdEncoder(CorpusFittedEncoder):
    """TF-IDF (sublinear tf, unigrams; words seen in one text only are dropped from corpora of 50+ texts,
    at most 50,000 terms) followed by randomized truncated SVD, fitted on a corpus.

    ``n_components = min(max_components, n_features - 1, n_docs - 1)`` (at least 1). Fitted on
    ``corpus_texts`` when given, otherwise on the texts of the first ``encode`` call. Rows are
    L2-normalised (zero rows stay zero). ``spec.dim`` and ``spec.revision`` are set once fitted;
    the revision names the fitting corpus so cached embeddings never mix fits.
    """

    pooling = "tfidf-svd+l2"

    def __init__(
        self,
        spec: ModelSpec,
        corpus_texts: Sequence[str] | None = None,
        *,
        max_components: int = 256,
        seed: int = 0,
    ) -> None:
        self.max_components = check_int(max_components, "max_components", min_value=1)
        self.vectorizer = None
        self.svd = None
        super().__init__(spec, corpus_texts, seed=seed)

    @property
    def fitted(self) -> bool:
        return self.svd is not None

    def _fit(self, texts: list[str]) -> tuple[int, str]:
        """Fit TF-IDF and the SVD on ``texts`` (at least 2 texts with at least 2 distinct terms)."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        if len(texts) < 2:
            raise ValueError(f"tfidf-svd needs at least 2 texts to fit, got {len(texts)}")
        # hapaxes carry no shared direction, so dropping them speeds the SVD; a corpus of distinct words
        # (a word-similarity list) has nothing but hapaxes, and keeps them
        tfidf, vectorizer = None, None
        for min_df in (2, 1) if len(texts) >= 50 else (1,):
            vectorizer = TfidfVectorizer(
                sublinear_tf=True, min_df=min_df, max_features=50_000, dtype=np.float64
            )
            try:
                tfidf = vectorizer.fit_transform(texts)  # (n, V) sparse
            except ValueError as exc:  # empty vocabulary
                if min_df == 1:
                    raise ValueError(f"tfidf-svd cannot be fitted: {exc}") from None
                continue
            if tfidf.shape[1] >= 2:
                break
        n_features = tfidf.shape[1]
        if n_features < 2:
            raise ValueError(f"tfidf-svd needs at least 2 distinct terms in the corpus, got {n_features}")
        k = max(1, min(self.max_components, n_features - 1, len(texts) - 1))
        svd = TruncatedSVD(n_components=k, algorithm="randomized", n_iter=5, random_state=self.seed)
        svd.fit(tfidf)
        self.vectorizer, self.svd = vectorizer, svd
        return k, f"|k{k}"

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Project ``texts`` on the fitted components: float32 (N, k), unit-norm rows (zero for unknown
        words).

        ``max_length`` is accepted for interface compatibility and ignored (TF-IDF reads whole texts).
        """
        if not self.fitted:
            self.fit(texts)
        z = unit_rows(self.svd.transform(self.vectorizer.transform(texts)))[0]  # (N, k)
        if progress is not None:
            progress(len(texts), len(texts))
        return z.astype(np.float32)


class ShuffledRowsEncoder(EncoderBase):
    """A control with a real model's geometry and no link to the texts: ``inner``'s vectors, rows shuffled.

    ``encode(texts)`` returns ``inner.encode(texts)[perm]`` for a permutation drawn from ``seed`` and
    the number of texts, so text i receives the vector of some other text. Every label-free geometric
    score (uniformity, IsoScore, effective rank) rates it exactly like ``inner``; an information score
    must put it at the bottom. The embedding cache encodes a large corpus in chunks, in which case rows
    are shuffled within each chunk (4,096 texts): the link to the texts is broken all the same.
    """

    def __init__(self, spec: ModelSpec, inner, *, seed: int = 0) -> None:
        self.spec = spec
        self.inner = inner
        self.seed = check_int(seed, "seed")
        self.pooling = f"shuffled({getattr(inner, 'pooling', 'unknown')})"

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """``inner``'s embeddings (N, d) with their rows permuted."""
        x = self.inner.encode(texts, batch_size=batch_size, progress=progress, max_length=max_length)
        perm = np.random.default_rng([self.seed, len(texts)]).permutation(len(texts))
        return np.ascontiguousarray(x[perm])
