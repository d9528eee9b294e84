"""Encoders fitted on the corpus they embed (TF-IDF + SVD, Doc2Vec, fastText): the fit, the revision that
names the fitting corpus, and the hash of a list of texts that names it."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from flare_core.checks import check_int
from flare_core.encoders.base import EncoderBase, ModelSpec, check_texts


def texts_hash(texts: Sequence[str]) -> str:
    """sha256 over the texts, each length-prefixed (so boundaries are unambiguous)."""
    h = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


class CorpusFittedEncoder(EncoderBase):
    """An encoder fitted on a corpus: on ``corpus_texts`` when given, otherwise on the texts of its first
    ``encode`` call (each subclass's :meth:`_encode` fits first when :attr:`fitted` is false).

    Once fitted, ``spec.dim`` is the fitted width and ``spec.revision`` names the fitting corpus, so that
    cached embeddings of two fits never mix. Subclasses implement :meth:`_fit`, which fits ``self.model``
    and returns the width with a suffix for the revision, and :meth:`_encode`.
    """

    model: object | None

    def __init__(self, spec: ModelSpec, corpus_texts: Sequence[str] | None = None, *, seed: int = 0) -> None:
        self.seed = check_int(seed, "seed")
        self.model = None
        self.spec = spec
        if corpus_texts is not None:
            self.fit(corpus_texts)

    @property
    def fitted(self) -> bool:
        return self.model is not None

    def fit(self, texts: Sequence[str]) -> CorpusFittedEncoder:
        """Fit on ``texts``; returns self."""
        items = check_texts(texts)
        width, suffix = self._fit(items)
        self.spec = dataclasses.replace(
            self.spec,
            dim=width,
            revision=f"{self.spec.revision.split('|')[0]}|fit:{texts_hash(items)[:16]}{suffix}",
        )
        return self

    def _fit(self, texts: list[str]) -> tuple[int, str]:
        """Fit ``self.model`` on validated ``texts``; returns (width, revision suffix)."""
        raise NotImplementedError


class GensimEncoder(CorpusFittedEncoder):
    """A gensim model (Doc2Vec, fastText) trained on the corpus: ``vector_size`` dimensions, ``epochs``
    passes (the model's :attr:`default_epochs` when None), words seen fewer than ``min_count`` times
    dropped (kept in corpora under 50 texts)."""

    default_epochs = 10

    def __init__(
        self,
        spec: ModelSpec,
        corpus_texts: Sequence[str] | None = None,
        *,
        vector_size: int = 100,
        epochs: int | None = None,
        min_count: int = 2,
        seed: int = 0,
    ) -> None:
        self.vector_size = check_int(vector_size, "vector_size", min_value=2)
        self.epochs = check_int(self.default_epochs if epochs is None else epochs, "epochs", min_value=1)
        self.min_count = check_int(min_count, "min_count", min_value=1)
        super().__init__(spec, corpus_texts, seed=seed)

    def _min_count(self, n_texts: int) -> int:
        """``min_count``, or 1 for a corpus of fewer than 50 texts (too few repeats to drop words)."""
        return self.min_count if n_texts >= 50 else 1
