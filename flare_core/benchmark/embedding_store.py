"""The answer benchmark's kept embeddings: every model's vectors of every benchmark corpus, on disk, so
that a change in how the answer is judged re-judges the corpora without embedding them again.

Layout under ``root`` (``<runs>/benchmark/embeddings`` by default)::

    <corpus>/corpus.json        name, task, oracle, source, licence, the seed, the build's size and what
                                reading it dropped (empty texts, repeats, texts seen with two labels)
    <corpus>/frame.csv          the texts (and labels) as sampled
    <corpus>/pairs.csv          a similarity corpus's scored pairs (i, j, score)
    <corpus>/judgements.csv     a retrieval corpus's judgements
    <corpus>/<model>.npy        float32 (N, d): the model's vectors of the N texts
    <corpus>/<model>.queries.npy  float32 (Q, d): of the distinct queries, in judgement order
    <corpus>/<model>.json       seconds it took, width, the model's revision, the cut in tokens

Nothing here is read from an upload: every file is written by :func:`embed_corpus` from a packaged corpus,
and read back with ``allow_pickle=False``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from flare_core.checks import check_int
from flare_core.choosing.validity import judgement_map
from flare_core.data.corpus_sources import BenchmarkCorpus
from flare_core.store import atomic

#: Texts are cut at this many tokens, as in the benchmark's runs (``suite.BENCHMARK_MAX_LENGTH``).
MAX_LENGTH = 128
#: The files of a corpus's folder that are not a model's sidecar.
_NOT_MODELS = ("corpus.json", "record.json")
_SAFE = str.maketrans({"/": "__", "\\": "__", ":": "_"})


@dataclass(frozen=True)
class KeptCorpus:
    """A benchmark corpus with every kept model's vectors: ``embeddings[m]`` (N, d) of ``bench.frame``'s
    texts; ``queries[m]`` (Q, d) of a retrieval corpus's distinct queries (empty otherwise)."""

    bench: BenchmarkCorpus
    embeddings: dict[str, np.ndarray]
    queries: dict[str, np.ndarray]
    seconds: dict[str, float]


def file_name(model: str) -> str:
    """A model id as a file name (a hub id's ``/`` becomes ``__``)."""
    return str(model).translate(_SAFE)


def query_texts(judgements: pd.DataFrame) -> list[str]:
    """The distinct queries of ``judgements`` in :func:`judgement_map`'s order (Q,)."""
    _, rows = judgement_map(judgements)
    texts = judgements.drop_duplicates("query_id").set_index("query_id")["query_text"]
    return [str(texts.loc[q]) for q in sorted(rows, key=rows.get)]


def _write_corpus(folder: Path, bench: BenchmarkCorpus, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic.write_text(folder / "frame.csv", bench.frame.to_csv(index=False))
    if bench.pairs is not None:
        atomic.write_text(folder / "pairs.csv", bench.pairs.to_csv(index=False))
    if bench.judgements is not None:
        atomic.write_text(folder / "judgements.csv", bench.judgements.to_csv(index=False))
    meta = {
        "name": bench.name,
        "task": bench.task,
        "description": bench.description,
        "source": bench.source,
        "licence": bench.licence,
        "oracle": bench.oracle,
        "seed": seed,
        "n_texts": len(bench.frame),
        "cleaning": bench.cleaning,
    }
    atomic.write_json(folder / "corpus.json", meta)


def embed_corpus(
    bench: BenchmarkCorpus,
    models: Sequence[str],
    root: str | Path,
    *,
    seed: int = 0,
    device: str | None = None,
    batch_size: int = 32,
    max_length: int = MAX_LENGTH,
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Embed ``bench`` with each of ``models`` (skipping those already kept for the same texts) and keep
    the vectors under ``root/<corpus>``. Returns the seconds each model took now (0 for one kept before).

    A corpus-fitted model (TF-IDF, doc2vec, fastText) is fitted on the corpus's texts, as in a run."""
    from flare_core import encoders
    from flare_core.encoders.embedding_cache import supports_max_length

    check_int(max_length, "max_length", min_value=1)
    folder = Path(root) / bench.name
    frame_path = folder / "frame.csv"
    if frame_path.is_file() and not pd.read_csv(frame_path)["text"].astype(str).equals(
        bench.frame["text"].astype(str)
    ):
        raise ValueError(
            f"{folder} keeps other texts for {bench.name!r}: remove it to embed the corpus again"
        )
    _write_corpus(folder, bench, seed)
    texts = bench.frame["text"].astype(str).tolist()
    queries = query_texts(bench.judgements) if bench.judgements is not None else []
    took: dict[str, float] = {}
    for model in models:
        base = folder / file_name(model)
        if Path(f"{base}.json").is_file():
            took[model] = 0.0
            continue
        start = time.perf_counter()
        encoder = encoders.load_encoder(model, device=device, corpus_texts=texts)
        kwargs = {"max_length": max_length} if supports_max_length(encoder) else {}
        vectors = np.asarray(encoder.encode(texts, batch_size=batch_size, **kwargs), dtype=np.float32)
        if queries:
            asked = encoders.encode_queries(encoder, queries, batch_size=batch_size)
            atomic.write_npy(Path(f"{base}.queries.npy"), np.asarray(asked, dtype=np.float32))
        atomic.write_npy(Path(f"{base}.npy"), vectors)
        took[model] = round(time.perf_counter() - start, 3)
        meta = {
            "model": model,
            "dim": int(vectors.shape[1]),
            "seconds": took[model],
            "revision": getattr(encoder.spec, "revision", None),
            "max_length": max_length if kwargs else None,
        }
        atomic.write_json(Path(f"{base}.json"), meta)
        if log is not None:
            log(f"{bench.name}: {model} {vectors.shape} in {took[model]:.1f} s")
    return took


def kept_corpora(root: str | Path, oracle: str) -> list[str]:
    """The corpora kept under ``root`` whose oracle is ``oracle`` (e.g. ``"classification"``), sorted."""
    return sorted(
        p.name
        for p in Path(root).iterdir()
        if (p / "corpus.json").is_file()
        and json.loads((p / "corpus.json").read_text(encoding="utf-8"))["oracle"] == oracle
    )


def kept_models(root: str | Path, corpus: str) -> list[str]:
    """The models whose vectors are kept for ``corpus``, in the order they were written."""
    folder = Path(root) / corpus
    sidecars = sorted(
        (p for p in folder.glob("*.json") if p.name not in _NOT_MODELS), key=lambda p: p.stat().st_mtime_ns
    )
    return [json.loads(p.read_text(encoding="utf-8"))["model"] for p in sidecars]


def load_kept(root: str | Path, corpus: str, models: Sequence[str] | None = None) -> KeptCorpus:
    """The corpus ``corpus`` as kept under ``root``, with the vectors of ``models`` (default: every kept
    one). Raises FileNotFoundError naming what is missing."""
    folder = Path(root) / corpus
    if not (folder / "corpus.json").is_file():
        raise FileNotFoundError(
            f"no kept embeddings of {corpus!r} under {root}: run flare benchmark --stage answer"
        )
    meta = json.loads((folder / "corpus.json").read_text(encoding="utf-8"))
    frame = pd.read_csv(folder / "frame.csv", keep_default_na=False, na_values=[""])
    frame["text"] = frame["text"].astype(str)
    frame.attrs["cleaning"] = meta.get("cleaning", {})
    pairs = pd.read_csv(folder / "pairs.csv") if (folder / "pairs.csv").is_file() else None
    judged = pd.read_csv(folder / "judgements.csv") if (folder / "judgements.csv").is_file() else None
    if judged is not None:
        judged["query_text"] = judged["query_text"].astype(str)
    bench = BenchmarkCorpus(
        meta["name"],
        meta["task"],
        meta["description"],
        meta["source"],
        meta["licence"],
        frame,
        pairs=pairs,
        judgements=judged,
    )
    names = list(models) if models is not None else kept_models(root, corpus)
    embeddings, queries, seconds = {}, {}, {}
    for model in names:
        base = folder / file_name(model)
        embeddings[model] = np.load(f"{base}.npy", allow_pickle=False)
        if Path(f"{base}.queries.npy").is_file():
            queries[model] = np.load(f"{base}.queries.npy", allow_pickle=False)
        seconds[model] = float(json.loads(Path(f"{base}.json").read_text(encoding="utf-8"))["seconds"])
    return KeptCorpus(bench, embeddings, queries, seconds)
