"""Shared fixtures' builders for the encoder tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flare_core.encoders import ModelSpec, TransformerEncoder, random_init_transformer

try:
    from tests.properties import assert_finite, assert_shape
except ImportError:  # pytest put tests/ itself on sys.path
    from properties import assert_finite, assert_shape  # type: ignore[no-redef]

__all__ = ["CountingEncoder", "TEXTS", "assert_finite", "assert_shape", "tiny_bert"]

TEXTS = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog near the river bank.",
    "Stocks fell.",
    "Embedding models map sentences to vectors; similar meanings land close together.",
    "Hi",
    "Football club signs a new striker for the coming season.",
    "",
    "Rain is expected tomorrow across the north of the country, with strong winds.",
    "Parliament votes on the budget.",
]

TINY_CONFIG = {
    "model_type": "bert",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 30522,
    "max_position_embeddings": 128,
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
}


def tiny_bert(seed: int = 0, normalize: bool = False) -> TransformerEncoder:
    """A random-init BERT (hidden 32, 2 layers, 2 heads) with the all-MiniLM-L6-v2 tokenizer, on CPU."""
    return random_init_transformer(dict(TINY_CONFIG), seed=seed, device="cpu", normalize=normalize)


class CountingEncoder:
    """Wraps a real encoder and counts ``encode`` calls and texts encoded."""

    def __init__(self, inner, spec: ModelSpec | None = None) -> None:
        self.inner = inner
        self.spec = spec or inner.spec
        self.pooling = inner.pooling
        self.calls = 0
        self.texts_encoded = 0

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress=None, max_length=None
    ) -> np.ndarray:
        self.calls += 1
        self.texts_encoded += len(texts)
        return self.inner.encode(texts, batch_size=batch_size, progress=progress, max_length=max_length)
