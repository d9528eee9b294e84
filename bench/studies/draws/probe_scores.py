"""The corpus-reading label-free scores (:mod:`bench.studies.draws.pseudo_scores`) of a kept benchmark
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
  the corpus), ``pseudo_ndcg_sample`` (among the other rests only), ``pseudo_fused`` (nDCG@10 against the
  candidates' fused ranking of every text), ``halves`` and ``neighbours`` (the
  neighbourhood agreement with the other candidates, from the kept vectors), and each model's seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.studies.draws.pseudo_scores import (
    SAMPLE,
    fused_ndcg,
    halves,
    halves_score,
    ndcg_and_mrr,
    neighbour_agreement,
    pseudo_queries,
    query_similarities,
    rank_of_own,
)
from flare_core.benchmark.embedding_store import MAX_LENGTH, file_name, load_kept
from flare_core.store import atomic

#: The scores :func:`probe_scores` writes per model, each oriented so that higher is better.
PROBE_COLUMNS = ("pseudo_ndcg", "pseudo_mrr", "pseudo_ndcg_sample", "pseudo_fused", "halves", "neighbours")


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
    texts: Sequence[str] | None = None,
    sample: int = SAMPLE,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The probe scores of ``corpus`` for ``models``, read from ``probes/<corpus>/scores.json`` when it
    holds them all for the same cut and the same vectors, computed (embedding only what is not kept) and
    written otherwise. The corpus is the one kept under ``root``; or, given ``texts`` while it is not kept
    yet, those texts, and then only the scores that need no vector of the corpus (``pseudo_ndcg_sample``,
    ``halves``; the others NaN). Returns ``{"scores": {model: {column: value}}, "seconds": {model: seconds
    to embed the cut texts}, "kept", "n_queries", "n_halves", "kinds"}``."""
    folder = Path(probes) / corpus
    path = folder / "scores.json"
    is_kept = (Path(root) / corpus / "record.json").is_file() or texts is None
    if path.is_file():
        done = json.loads(path.read_text(encoding="utf-8"))
        if (
            set(models) <= set(done["scores"])
            and all(set(PROBE_COLUMNS) <= set(done["scores"][m]) for m in models)
            and done.get("sample") == sample
            and done.get("seed") == seed
            and done.get("kept", True) == is_kept
        ):
            return done
    store = load_kept(root, corpus, models) if is_kept else None
    texts = store.bench.frame["text"].astype(str).tolist() if store is not None else [str(t) for t in texts]
    cut = _texts(texts, sample, seed)
    folder.mkdir(parents=True, exist_ok=True)
    texts_path = folder / "texts.json"
    if texts_path.is_file() and json.loads(texts_path.read_text(encoding="utf-8")) != cut:
        raise ValueError(f"{folder} keeps other pseudo-queries: remove it to cut the corpus again")
    atomic.write_json(texts_path, cut)
    vectors, seconds = _vectors(folder, corpus, models, texts, cut, log)
    embeddings = store.embeddings if store is not None else None
    scores = _scores(vectors, embeddings, cut, models)
    kinds = {kind: cut["kinds"].count(kind) for kind in sorted(set(cut["kinds"]))}
    result = {
        "corpus": corpus,
        "sample": sample,
        "seed": seed,
        "kept": is_kept,
        "scores": scores,
        "seconds": seconds,
        "n_queries": len(cut["rows"]),
        "n_halves": len(cut["half_rows"]),
        "kinds": kinds,
    }
    atomic.write_json(path, result)
    return result


def _vectors(
    folder: Path,
    corpus: str,
    models: Sequence[str],
    texts: list[str],
    cut: dict[str, Any],
    log: Callable[[str], None] | None,
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, float]]:
    """Each model's vectors of the cut texts (kept in ``folder/<model>.npz``) and its seconds to embed them."""
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
    return vectors, seconds


def _scores(
    vectors: dict[str, dict[str, np.ndarray]],
    embeddings: dict[str, np.ndarray] | None,
    cut: dict[str, Any],
    models: Sequence[str],
) -> dict[str, dict[str, float]]:
    """Each model's :data:`PROBE_COLUMNS` (NaN for those that need the corpus's kept vectors, without them)."""
    agreement = neighbour_agreement({m: embeddings[m] for m in models}) if embeddings is not None else {}
    fused = {}
    if embeddings is not None:
        fused = fused_ndcg(
            {
                m: query_similarities(
                    vectors[m]["queries"],
                    vectors[m]["rests"],
                    vectors[m].get("corpus", embeddings[m]),
                    cut["rows"],
                )
                for m in models
            }
        )
    scores = {}
    for model in models:
        v = vectors[model]
        ndcg = mrr = float("nan")
        if embeddings is not None:
            documents = v.get("corpus", embeddings[model])  # a corpus-fitted model: its own fit's vectors
            ndcg, mrr = ndcg_and_mrr(rank_of_own(v["queries"], v["rests"], documents, cut["rows"]))
        scores[model] = {
            "pseudo_ndcg": ndcg,
            "pseudo_mrr": mrr,
            "pseudo_ndcg_sample": ndcg_and_mrr(rank_of_own(v["queries"], v["rests"]))[0],
            "halves": halves_score(v["firsts"], v["seconds"]),
            "pseudo_fused": fused.get(model, float("nan")),
            "neighbours": agreement.get(model, float("nan")),
        }
    return scores
