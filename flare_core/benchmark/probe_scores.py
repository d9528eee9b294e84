"""The corpus-reading label-free scores (:mod:`flare_core.analyses.pseudo_queries`) of a kept benchmark
corpus, for every candidate, kept beside the corpus's vectors so that a second reading is free.

For a corpus kept under ``root/<corpus>`` (:mod:`~flare_core.benchmark.embedding_store`),
:func:`probe_scores` cuts its seeded pseudo-queries and halves, embeds them with each candidate (the
pseudo-queries as queries, the rests and the halves as documents, cut at the benchmark's 128 tokens),
and writes, under ``<probes>/<corpus>/``:

- ``texts.json``: the pseudo-queries, their rests and rows, the halves' rows;
- ``<model>.npz``: the model's vectors of them (``queries``, ``rests``, ``firsts``, ``seconds``; and
  ``corpus``, the corpus's texts embedded by the same fit, for a model fitted on the corpus, whose kept
  vectors came from another fit);
- ``scores.json``: per model ``pseudo_ndcg``, ``pseudo_mrr`` (the rests ranked among every other text of
  the corpus), ``pseudo_ndcg_sample`` (among the other rests only), ``halves`` and ``neighbours`` (the
  neighbourhood agreement with the other candidates, from the kept vectors), and each model's seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flare_core.analyses.pseudo_queries import (
    SAMPLE,
    halves,
    halves_score,
    ndcg_and_mrr,
    neighbour_agreement,
    pseudo_queries,
    rank_of_own,
)
from flare_core.benchmark.embedding_store import MAX_LENGTH, file_name, load_kept
from flare_core.store import atomic

#: The scores :func:`probe_scores` writes per model, each oriented so that higher is better.
PROBE_COLUMNS = ("pseudo_ndcg", "pseudo_mrr", "pseudo_ndcg_sample", "halves", "neighbours")


def _texts(texts: Sequence[str], sample: int, seed: int) -> dict[str, Any]:
    pseudo = pseudo_queries(texts, sample=sample, seed=seed)
    rows, firsts, seconds = halves(texts, sample=sample, seed=seed + 1)
    return {
        "sample": sample,
        "seed": seed,
        "rows": pseudo.rows,
        "queries": pseudo.queries,
        "rests": pseudo.rests,
        "kinds": pseudo.kinds,
        "half_rows": rows,
        "firsts": firsts,
        "seconds": seconds,
    }


def _embed(model: str, texts: list[str], cut: dict[str, Any]) -> dict[str, np.ndarray]:
    """One model's vectors of the cut texts (and of the corpus, for a model fitted on it)."""
    from flare_core import encoders
    from flare_core.encoders.corpus_fitted import CorpusFittedEncoder
    from flare_core.encoders.embedding_cache import supports_max_length

    encoder = encoders.load_encoder(model, corpus_texts=texts)
    kwargs = {"max_length": MAX_LENGTH} if supports_max_length(encoder) else {}

    def docs(items: list[str]) -> np.ndarray:
        return np.asarray(encoder.encode(items, batch_size=32, **kwargs), dtype=np.float32)

    out = {
        "queries": np.asarray(
            encoders.encode_queries(encoder, cut["queries"], batch_size=32), dtype=np.float32
        ),
        "rests": docs(cut["rests"]),
        "firsts": docs(cut["firsts"]),
        "seconds": docs(cut["seconds"]),
    }
    if isinstance(encoder, CorpusFittedEncoder):
        out["corpus"] = docs(texts)
    return out


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)

    atomic.atomic_write(path, write)


def probe_scores(
    root: str | Path,
    probes: str | Path,
    corpus: str,
    models: Sequence[str],
    *,
    sample: int = SAMPLE,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The probe scores of ``corpus`` (kept under ``root``) for ``models``, read from
    ``probes/<corpus>/scores.json`` when it holds them all for the same cut, computed (embedding only what
    is not kept) and written otherwise. Returns ``{"scores": {model: {column: value}}, "seconds": {model:
    seconds to embed the cut texts}, "n_queries", "n_halves", "kinds"}``."""
    folder = Path(probes) / corpus
    path = folder / "scores.json"
    if path.is_file():
        kept = json.loads(path.read_text(encoding="utf-8"))
        if set(models) <= set(kept["scores"]) and kept.get("sample") == sample and kept.get("seed") == seed:
            return kept
    store = load_kept(root, corpus, models)
    texts = store.bench.frame["text"].astype(str).tolist()
    cut = _texts(texts, sample, seed)
    folder.mkdir(parents=True, exist_ok=True)
    texts_path = folder / "texts.json"
    if texts_path.is_file() and json.loads(texts_path.read_text(encoding="utf-8")) != cut:
        raise ValueError(f"{folder} keeps other pseudo-queries: remove it to cut the corpus again")
    atomic.write_json(texts_path, cut)
    vectors, seconds = {}, {}
    for model in models:
        npz = folder / f"{file_name(model)}.npz"
        if npz.is_file():
            vectors[model] = _load_npz(npz)
            seconds[model] = float(vectors[model].pop("took", np.array(float("nan"))))
            continue
        start = time.perf_counter()
        vectors[model] = _embed(model, texts, cut)
        seconds[model] = round(time.perf_counter() - start, 3)
        _save_npz(npz, {**vectors[model], "took": np.array(seconds[model])})
        if log is not None:
            log(f"{corpus}: {model} probes in {seconds[model]:.1f} s")
    documents = {m: vectors[m].get("corpus", store.embeddings[m]) for m in models}
    scores = {}
    for model in models:
        v = vectors[model]
        ndcg, mrr = ndcg_and_mrr(rank_of_own(v["queries"], v["rests"], documents[model], cut["rows"]))
        scores[model] = {
            "pseudo_ndcg": ndcg,
            "pseudo_mrr": mrr,
            "pseudo_ndcg_sample": ndcg_and_mrr(rank_of_own(v["queries"], v["rests"]))[0],
            "halves": halves_score(v["firsts"], v["seconds"]),
        }
    agreement = neighbour_agreement({m: store.embeddings[m] for m in models})
    for model in models:
        scores[model]["neighbours"] = agreement[model]
    kinds = {kind: cut["kinds"].count(kind) for kind in sorted(set(cut["kinds"]))}
    result = {
        "corpus": corpus,
        "sample": sample,
        "seed": seed,
        "scores": scores,
        "seconds": seconds,
        "n_queries": len(cut["rows"]),
        "n_halves": len(cut["half_rows"]),
        "kinds": kinds,
    }
    atomic.write_json(path, result)
    return result
