"""Embedding models: the registry of offline models and controls, loading, pooling and the embedding cache.

Typical use::

    from flare_core.encoders import load_encoder, embed
    enc = load_encoder("all-MiniLM-L6-v2")
    emb = embed(enc, texts, corpus_hash=corpus.content_hash, cache_dir="runs/.emb-cache")  # (N, 384) float32
    states = write_token_states(enc, texts, "runs/tokens")  # on disk; states[i] is (n_i, 384) float32
"""

from __future__ import annotations

from flare_core.encoders.base import Encoder, ModelSpec, encode_queries
from flare_core.encoders.controls import TfidfSvdEncoder
from flare_core.encoders.corpus_fitted import texts_hash
from flare_core.encoders.embedding_cache import DEFAULT_CHUNK_SIZE, cache_key, cache_key_fields, embed
from flare_core.encoders.precomputed import PrecomputedEncoder, load_precomputed
from flare_core.encoders.registry import (
    BUILTIN_IDS,
    CONTROL_IDS,
    check_model_ids,
    get_spec,
    is_available,
    list_models,
    load_encoder,
)
from flare_core.encoders.static import GloveEncoder, TokenlearnStaticEncoder
from flare_core.encoders.token_store import TokenStates, write_token_states
from flare_core.encoders.transformer import (
    SentenceTransformerEncoder,
    TransformerEncoder,
    random_init_transformer,
)
from flare_core.errors import ModelUnavailable

__all__ = [
    "BUILTIN_IDS",
    "CONTROL_IDS",
    "DEFAULT_CHUNK_SIZE",
    "Encoder",
    "GloveEncoder",
    "ModelSpec",
    "ModelUnavailable",
    "PrecomputedEncoder",
    "SentenceTransformerEncoder",
    "TfidfSvdEncoder",
    "TokenStates",
    "TokenlearnStaticEncoder",
    "TransformerEncoder",
    "cache_key",
    "cache_key_fields",
    "check_model_ids",
    "embed",
    "encode_queries",
    "get_spec",
    "is_available",
    "list_models",
    "load_encoder",
    "load_precomputed",
    "random_init_transformer",
    "texts_hash",
    "write_token_states",
]
