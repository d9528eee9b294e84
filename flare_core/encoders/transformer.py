"""Transformer encoders: mean pooling over the attention mask, token states and attention maps."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flare_core.checks import check_int
from flare_core.device import pick_device
from flare_core.encoders.base import (
    EncoderBase,
    ModelSpec,
    ProgressFn,
    check_batch_size,
    check_max_length,
    check_texts,
    empty_matrix,
    length_batches,
)
from flare_core.errors import ModelUnavailable

_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "mpnet", "camembert")


class TransformerEncoder(EncoderBase):
    """A Hugging Face encoder with sentence-transformers style mean pooling.

    ``encode`` runs the model, averages the last hidden state over non-padding tokens (special tokens
    included, as sentence-transformers does) and L2-normalises when ``normalize`` is true (models whose
    sentence-transformers config ends with a ``Normalize`` module).

    Attributes:
        model: the underlying ``transformers.PreTrainedModel`` in eval mode (attach forward hooks to it).
        tokenizer: its tokenizer.
        device: where the model runs; on CUDA the model is in half precision, outputs stay float32.
        max_length: default token limit (the sentence-transformers ``max_seq_length``), or ``None``.
        pooling: a short name of the pooling, part of embedding-cache keys.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        spec: ModelSpec,
        *,
        device: torch.device | str | None = None,
        normalize: bool = False,
        max_length: int | None = None,
    ) -> None:
        self.device = device if isinstance(device, torch.device) else pick_device(device)
        model = model.to(self.device)
        if self.device.type == "cuda":
            model = model.half()
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.normalize = bool(normalize)
        self.max_length = check_max_length(max_length)
        self.pooling = "mean+l2" if self.normalize else "mean"
        self.spec = spec

    # ------------------------------------------------------------------ helpers

    def token_limit(self, max_length: int | None = None) -> int:
        """The tokens a text is cut to: ``max_length`` (or the encoder's default), never more than the
        model's positions or its tokenizer's limit."""
        return self._limit(max_length)

    def _limit(self, max_length: int | None) -> int:
        limit = check_max_length(max_length) or self.max_length
        model_max = getattr(self.model.config, "max_position_embeddings", None)
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        candidates = [v for v in (limit, model_max, tok_max) if isinstance(v, int) and 0 < v < 1_000_000]
        # RoBERTa-style position ids start after the padding index: keep a margin of 2 when no explicit limit
        model_type = getattr(self.model.config, "model_type", "")
        if limit is None and model_max is not None and model_type in _OFFSET_POSITIONS:
            candidates.append(model_max - 2)
        return min(candidates) if candidates else 512

    def _tokenize(
        self, texts: list[str], max_length: int, special_mask: bool = False
    ) -> dict[str, torch.Tensor]:
        batch = self.tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
            return_special_tokens_mask=special_mask,
        )
        return dict(batch)

    def _forward(self, batch: dict[str, torch.Tensor], **kwargs: Any) -> Any:
        inputs = {k: v.to(self.device) for k, v in batch.items() if k != "special_tokens_mask"}
        with torch.inference_mode():
            return self.model(**inputs, **kwargs)

    @staticmethod
    def _batches(n: int, batch_size: int) -> Iterator[range]:
        for start in range(0, n, batch_size):
            yield range(start, min(start + batch_size, n))

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    # ------------------------------------------------------------------ public API

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Sentence embeddings, float32 (N, hidden_size), rows in input order."""
        limit = self._limit(max_length)
        out = np.zeros((len(texts), self.hidden_size), dtype=np.float32)
        if not texts:
            return out
        done = 0
        for idx in length_batches(texts, batch_size):
            batch = self._tokenize([texts[i] for i in idx], limit)
            hidden = self._forward(batch).last_hidden_state.float()  # (B, T, d)
            mask = batch["attention_mask"].to(hidden.device, torch.float32).unsqueeze(-1)  # (B, T, 1)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (B, d)
            if self.normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out[idx] = pooled.cpu().numpy()
            done += len(idx)
            if progress is not None:
                progress(done, len(texts))
        return out

    def token_states(
        self,
        texts: Sequence[str],
        *,
        layers: str | Sequence[int] = "last",
        include_special: bool = True,
        batch_size: int = 16,
        max_length: int | None = None,
        progress: ProgressFn | None = None,
    ) -> list[np.ndarray]:
        """Per-token hidden states, padding removed, float32; ``progress(done, N)`` after each batch.

        ``layers="last"``: one array (n_i, d) per text. ``"all"``: (L+1, n_i, d) per text, index 0 being
        the embedding layer output. A list of layer indices (0 … L, negatives allowed): (len(list), n_i, d).
        ``include_special=False`` drops [CLS]/[SEP]-style tokens (n_i then counts only content tokens).
        """
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        n_states = self.num_layers + 1
        if isinstance(layers, str):
            if layers not in ("last", "all"):
                raise ValueError(f"layers must be 'last', 'all' or a list of layer indices, got {layers!r}")
            picks: list[int] | None = None if layers == "last" else list(range(n_states))
        else:
            picks = []
            for layer in layers:
                if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
                    raise ValueError(f"layer indices must be integers, got {layer!r}")
                if not -n_states <= int(layer) < n_states:
                    raise ValueError(
                        f"layer {layer} is out of range for a model with {self.num_layers} layers"
                    )
                picks.append(int(layer) % n_states)
            if not picks:
                raise ValueError("layers is an empty list")
        limit = self._limit(max_length)
        result: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(items)
        # batches of similar lengths, as for embeddings: in input order, 200 debate turns of 20 to 2,700
        # characters took all-mpnet-base-v2 72 s instead of 24 s (mostly padding)
        done = 0
        for rows in length_batches(items, batch_size):
            chunk = [items[i] for i in rows]
            batch = self._tokenize(chunk, limit, special_mask=True)
            outputs = self._forward(batch, output_hidden_states=picks is not None)
            if picks is None:
                stacked = outputs.last_hidden_state.float().unsqueeze(0)  # (1, B, T, d)
            else:
                stacked = torch.stack([outputs.hidden_states[k] for k in picks]).float()  # (K, B, T, d)
            stacked = stacked.cpu().numpy()
            keep = batch["attention_mask"].numpy().astype(bool)  # (B, T)
            if not include_special:
                keep &= ~batch["special_tokens_mask"].numpy().astype(bool)
            for j, i in enumerate(rows):
                states = np.ascontiguousarray(stacked[:, j, keep[j]], dtype=np.float32)  # (K, n_i, d)
                result[i] = states[0] if picks is None else states
            done += len(rows)
            if progress is not None:
                progress(done, len(items))
        return result

    @contextlib.contextmanager
    def _eager_attention(self) -> Iterator[None]:
        """Temporarily switch to eager attention (fused kernels do not return attention maps)."""
        config = self.model.config
        before = getattr(config, "_attn_implementation", None)
        if before in (None, "eager") or not hasattr(self.model, "set_attn_implementation"):
            yield
            return
        self.model.set_attn_implementation("eager")
        try:
            yield
        finally:
            self.model.set_attn_implementation(before)

    def attentions(
        self, texts: Sequence[str], *, batch_size: int = 16, max_length: int | None = None
    ) -> list[np.ndarray]:
        """Attention probabilities per text: float32 (L, heads, n_i, n_i), padding removed; rows sum to 1."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        limit = self._limit(max_length)
        result: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(items)
        with self._eager_attention():
            for rows in self._batches(len(items), batch_size):
                batch = self._tokenize([items[i] for i in rows], limit)
                outputs = self._forward(batch, output_attentions=True)
                if not outputs.attentions:
                    raise RuntimeError(f"model {self.spec.id!r} returned no attention maps")
                att = torch.stack(outputs.attentions).float().cpu().numpy()  # (L, B, H, T, T)
                keep = batch["attention_mask"].numpy().astype(bool)
                for j, i in enumerate(rows):
                    k = keep[j]
                    result[i] = np.ascontiguousarray(att[:, j][:, :, k][:, :, :, k], dtype=np.float32)
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.id!r}, device={self.device}, pooling={self.pooling!r})"


class SentenceTransformerEncoder(TransformerEncoder):
    """A sentence-transformers model (local folder or hub id): its own pipeline for ``encode``,
    the inner Hugging Face model for ``token_states`` and ``attentions``."""

    def __init__(self, st_model: Any, spec: ModelSpec, *, device: torch.device) -> None:
        if device.type == "cuda":
            st_model = st_model.half()
        self.st_model = st_model.eval()
        first = st_model[0]
        inner = getattr(first, "auto_model", None)
        if inner is None:
            raise ModelUnavailable(f"model {spec.id!r} has no transformer module to read token states from")
        self.device = device
        self.model = inner.eval()
        self.tokenizer = st_model.tokenizer
        self.max_length = getattr(st_model, "max_seq_length", None)
        names = [type(m).__name__ for m in st_model]
        self.normalize = "Normalize" in names
        pool = next((m for m in st_model if type(m).__name__ == "Pooling"), None)
        mode = getattr(pool, "pooling_mode", None) if pool is not None else None
        self.pooling = f"st:{mode or '+'.join(names)}" + ("+l2" if self.normalize else "")
        self.spec = spec

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Sentence embeddings from the model's own sentence-transformers pipeline, float32 (N, d)."""
        return self._st_encode(texts, batch_size, progress, max_length)

    def _encode_queries(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Query embeddings (N, d): with the model's ``"query"`` prompt when its configuration has one
        (E5, BGE and others published with prompts), else as documents."""
        prompts = getattr(self.st_model, "prompts", None) or {}
        options = {"prompt_name": "query"} if "query" in prompts else {}
        return self._st_encode(texts, batch_size, progress, max_length, **options)

    def _st_encode(
        self,
        texts: list[str],
        batch_size: int,
        progress: ProgressFn | None,
        max_length: int | None,
        **options: Any,
    ) -> np.ndarray:
        if not texts:
            return empty_matrix(int(sentence_transformer_dim(self.st_model) or 0))
        before = self.st_model.max_seq_length
        if max_length is not None:  # never past the model's own positions (a local model may have 128)
            self.st_model.max_seq_length = min(max_length, self._limit(max_length))
        try:
            chunks = []
            for rows in self._batches(len(texts), max(batch_size, 1) * 8):
                emb = self.st_model.encode(
                    texts[rows.start : rows.stop],
                    batch_size=batch_size,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                    **options,
                )
                chunks.append(np.asarray(emb, dtype=np.float32))
                if progress is not None:
                    progress(rows.stop, len(texts))
        finally:
            self.st_model.max_seq_length = before
        return np.concatenate(chunks, axis=0)


# ---------------------------------------------------------------------------- loading


def sentence_transformer_dim(st_model: Any) -> int | None:
    """Output dimension of a SentenceTransformer (method renamed across sentence-transformers versions)."""
    getter = getattr(st_model, "get_embedding_dimension", None) or st_model.get_sentence_embedding_dimension
    return getter()


def read_st_config(folder: Path) -> tuple[bool, int | None]:
    """(has a Normalize module, max_seq_length) from a sentence-transformers model folder."""
    normalize = False
    modules = folder / "modules.json"
    if modules.is_file():
        entries = json.loads(modules.read_text())
        normalize = any(str(e.get("type", "")).endswith("Normalize") for e in entries)
    max_len = None
    cfg = folder / "sentence_bert_config.json"
    if cfg.is_file():
        value = json.loads(cfg.read_text()).get("max_seq_length")
        max_len = int(value) if isinstance(value, int) else None
    return normalize, max_len


def load_hf_folder(
    folder: Path,
    spec: ModelSpec,
    *,
    device: str | None = None,
    num_layers: int | None = None,
) -> TransformerEncoder:
    """Load a local Hugging Face model folder with transformers (no network).

    ``num_layers`` keeps only the first ``num_layers`` transformer layers (a truncated control).
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    if num_layers is not None and not 1 <= num_layers <= config.num_hidden_layers:
        raise ValueError(f"num_layers must be in 1..{config.num_hidden_layers}, got {num_layers}")
    model = AutoModel.from_pretrained(folder, config=config, local_files_only=True)
    if num_layers is not None and num_layers < config.num_hidden_layers:
        layer_list = _layer_list(model)
        if layer_list is None:
            raise ValueError(f"cannot truncate layers of a {config.model_type} model")
        owner, attr = layer_list
        setattr(owner, attr, getattr(owner, attr)[:num_layers])
        model.config.num_hidden_layers = num_layers
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    normalize, max_len = read_st_config(folder)
    return TransformerEncoder(model, tokenizer, spec, device=device, normalize=normalize, max_length=max_len)


def _layer_list(model: Any) -> tuple[Any, str] | None:
    """(module, attribute) holding the ``nn.ModuleList`` of transformer layers (BERT/MPNet/RoBERTa style)."""
    encoder = getattr(model, "encoder", None)
    if encoder is not None and isinstance(getattr(encoder, "layer", None), torch.nn.ModuleList):
        return encoder, "layer"
    return None


def random_init_transformer(
    config: Any,
    tokenizer: Any = None,
    seed: int = 0,
    *,
    spec: ModelSpec | None = None,
    device: str | None = None,
    normalize: bool = False,
    max_length: int | None = None,
) -> TransformerEncoder:
    """A transformer with freshly initialised (untrained) weights, deterministic in ``seed``.

    ``config`` is a ``transformers.PretrainedConfig`` or a dict (``model_type`` defaults to ``"bert"``).
    ``tokenizer`` defaults to the all-MiniLM-L6-v2 tokenizer from the installed package; the config's
    ``vocab_size`` must cover it.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer, PretrainedConfig

    check_int(seed, "seed")
    if isinstance(config, dict):
        params = dict(config)
        model_type = params.pop("model_type", "bert")
        config = AutoConfig.for_model(model_type, **params)
    elif not isinstance(config, PretrainedConfig):
        raise ValueError(
            f"config must be a transformers PretrainedConfig or a dict, got {type(config).__name__}"
        )
    if tokenizer is None:
        from flare_core.encoders.builtin import minilm_dir

        tokenizer = AutoTokenizer.from_pretrained(minilm_dir(), local_files_only=True)
    if len(tokenizer) > config.vocab_size:
        raise ValueError(
            f"config vocab_size {config.vocab_size} is smaller than the tokenizer's {len(tokenizer)}"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = AutoModel.from_config(config)
    if spec is None:
        import transformers

        spec = ModelSpec(
            id=f"random-{config.model_type}-{config.num_hidden_layers}x{config.hidden_size}-seed{seed}",
            dim=int(config.hidden_size),
            layers=int(config.num_hidden_layers),
            max_tokens=max_length,
            source="control",
            licence="n/a",
            kind="control",
            description="randomly initialised transformer (not trained)",
            revision=(
                f"random-init-seed{seed}-torch{torch.__version__}-transformers{transformers.__version__}"
            ),
        )
    return TransformerEncoder(
        model, tokenizer, spec, device=device, normalize=normalize, max_length=max_length
    )
