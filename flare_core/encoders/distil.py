"""Static models distilled from a transformer with the Model2Vec recipe, built on first use and cached.

The recipe (Tulkens & van Dongen, model2vec 0.10, ``distill`` with its defaults and no added vocabulary):

1. every token of the transformer's vocabulary except ``[unusedN]`` is run through the model on its own,
   as ``[CLS] token [SEP]``, and its output is the mean of the three last hidden states (V, d);
2. the (V, d) outputs are centred and projected on their first ``width`` principal components (each
   component's sign chosen so that its largest score is positive);
3. row k (tokens in vocabulary order, k = 0 … V−1) is multiplied by the SIF weight ``a / (a + p_k)`` with
   ``a = 1e-4`` and ``p_k`` Zipf's law over the ranks, ``p_k ∝ 1 / (k + 2)``;
4. a text is tokenised without special tokens, cut at 512 tokens, unknown tokens dropped, and embedded
   as the L2-normalised mean of its tokens' rows (the zero vector when none is left).

The forward pass (step 1) costs one pass of the transformer over 3 × V tokens: about 40 s for
all-MiniLM-L6-v2 and about 8 times that for all-mpnet-base-v2 on 2 cores. It is done once per base model;
every width of that base is then written under ``<cache>/models/distil/<id>/`` (``vectors.npy``, float16 as
model2vec stores them, and ``meta.json``), atomically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from flare_core.checks import check_int, check_number
from flare_core.encoders.base import EncoderBase, ModelSpec, ProgressFn, encode_in_chunks, unit_rows
from flare_core.store import atomic
from flare_core.store.cache_folder import cache_root

SIF_COEFFICIENT = 1e-4
UNUSED_TOKEN = re.compile(r"\[unused\d+\]")
DEFAULT_MAX_TOKENS = 512
#: Token rows run through the transformer at once while distilling.
_DISTIL_BATCH = 1024

#: ``forward(ids)``: int64 (B, 3) token ids → float32 (B, d), the mean of the three output states.
Forward = Callable[[np.ndarray], np.ndarray]


def distil_dir(model_id: str) -> Path:
    """``<cache>/models/distil/<model_id>``."""
    return cache_root() / "models" / "distil" / model_id


def kept_tokens(vocab: dict[str, int]) -> np.ndarray:
    """Ids of the vocabulary's tokens in id order, ``[unusedN]`` left out: int64 (V,)."""
    return np.array(sorted(i for t, i in vocab.items() if not UNUSED_TOKEN.fullmatch(t)), dtype=np.int64)


def token_outputs(
    forward: Forward, ids: np.ndarray, cls_id: int, sep_id: int, *, batch_size: int = _DISTIL_BATCH
) -> np.ndarray:
    """Step 1: ``forward`` of ``[cls_id, id, sep_id]`` for every id of ``ids`` (V,): float32 (V, d)."""
    check_int(batch_size, "batch_size", min_value=1)
    rows = [
        np.asarray(
            forward(np.stack([np.full(len(chunk), cls_id), chunk, np.full(len(chunk), sep_id)], axis=1)),
            dtype=np.float32,
        )
        for chunk in (ids[start : start + batch_size] for start in range(0, len(ids), batch_size))
    ]
    return np.nan_to_num(np.concatenate(rows, axis=0))


def sif_weights(n: int, coefficient: float = SIF_COEFFICIENT) -> np.ndarray:
    """Step 3's weights ``a / (a + p_k)`` for k = 0 … n−1, ``p_k ∝ 1 / (k + 2)``: float64 (n,)."""
    check_int(n, "n", min_value=1)
    check_number(coefficient, "coefficient", min_value=0, include_min=False)
    inverse_rank = 1.0 / np.arange(2, n + 2)
    return coefficient / (coefficient + inverse_rank / inverse_rank.sum())


def pca_scores(x: np.ndarray, width: int) -> np.ndarray:
    """Step 2: ``x`` (V, d) centred and projected on its first ``width`` components, float64 (V, width);
    each column's sign makes its largest absolute score positive (model2vec's convention)."""
    check_int(width, "width", min_value=1)
    if width > x.shape[1]:
        raise ValueError(f"width {width} is larger than the model's {x.shape[1]} dimensions")
    centred = np.asarray(x, dtype=np.float64) - x.mean(axis=0)
    _, vectors = np.linalg.eigh(centred.T @ centred / max(len(x) - 1, 1))
    scores = centred @ vectors[:, ::-1][:, :width]
    biggest = np.abs(scores).argmax(axis=0)
    return scores * np.sign(scores[biggest, np.arange(width)])


def distil_tables(outputs: np.ndarray, widths: Sequence[int]) -> dict[int, np.ndarray]:
    """Steps 2 and 3 for every width: ``{width: float16 (V, width)}``."""
    weights = sif_weights(len(outputs))[:, None]
    return {int(w): (pca_scores(outputs, int(w)) * weights).astype(np.float16) for w in widths}


def write_distils(
    outputs: np.ndarray, ids: np.ndarray, targets: dict[str, int], meta: dict[str, object]
) -> dict[str, Path]:
    """Write one folder per ``{model id: width}`` in ``targets`` (atomically; an existing complete folder
    is kept): ``vectors.npy`` float16 (V, width), ``token_ids.npy`` int64 (V,), ``meta.json``."""
    tables = distil_tables(outputs, sorted(set(targets.values())))
    written = {}
    for model_id, width in targets.items():
        folder = distil_dir(model_id)
        if not _complete(folder, meta):
            try:
                with atomic.atomic_dir(folder, overwrite=True) as tmp:
                    atomic.write_npy(tmp / "vectors.npy", tables[width])
                    atomic.write_npy(tmp / "token_ids.npy", ids)
                    atomic.write_json(tmp / "meta.json", {**meta, "width": width, "tokens": int(len(ids))})
            except OSError:
                if not _complete(folder, meta):  # a concurrent build that won the rename is as good
                    raise
        written[model_id] = folder
    return written


def _complete(folder: Path, meta: dict[str, object]) -> bool:
    """Whether ``folder`` holds a distil built from the same base (``meta``'s ``base_revision``)."""
    try:
        found = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    same = found.get("base_revision") == meta.get("base_revision")
    return same and (folder / "vectors.npy").is_file() and (folder / "token_ids.npy").is_file()


def distil_ready(model_id: str, base_revision: str) -> bool:
    """Whether the distil ``model_id`` of the base at ``base_revision`` is already in the cache."""
    return _complete(distil_dir(model_id), {"base_revision": base_revision})


class StaticDistilEncoder(EncoderBase):
    """A distilled static model (step 4): float32 (N, width), unit-norm rows, zero rows for texts with no
    known token (their indices in ``empty_rows``)."""

    pooling = "static-mean+l2"

    def __init__(self, spec: ModelSpec, folder: Path, tokenizer_file: Path, *, unk_id: int | None) -> None:
        from tokenizers import Tokenizer

        vectors = atomic.read_npy(folder / "vectors.npy")
        ids = atomic.read_npy(folder / "token_ids.npy")
        if vectors.ndim != 2 or ids.shape != (len(vectors),):
            raise ValueError(f"distil {folder} is damaged: vectors {vectors.shape}, token ids {ids.shape}")
        self.vectors = np.asarray(vectors, dtype=np.float32)  # (V, width)
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        size = max(int(ids.max()) + 1, self.tokenizer.get_vocab_size())
        self.row_of = np.full(size, -1, dtype=np.int64)  # token id → row of ``vectors``
        self.row_of[ids] = np.arange(len(ids))
        if unk_id is not None and unk_id < size:
            self.row_of[unk_id] = -1
        self.spec = spec
        self.empty_rows = np.zeros(0, dtype=np.int64)

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Mean of the known tokens' rows, L2-normalised: float32 (N, width), rows in input order."""
        limit = max_length or DEFAULT_MAX_TOKENS
        width = self.vectors.shape[1]

        def token_means(chunk: list[str]) -> np.ndarray:
            out = np.zeros((len(chunk), width), dtype=np.float32)
            for i, enc in enumerate(self.tokenizer.encode_batch(chunk, add_special_tokens=False)):
                ids = np.asarray(enc.ids[:limit], dtype=np.int64)
                rows = self.row_of[ids[ids < len(self.row_of)]]
                rows = rows[rows >= 0]
                if len(rows):
                    out[i] = self.vectors[rows].mean(axis=0, dtype=np.float64)
            return out

        out, self.empty_rows = unit_rows(
            encode_in_chunks(texts, width, max(batch_size, 256), token_means, progress)
        )
        return out
