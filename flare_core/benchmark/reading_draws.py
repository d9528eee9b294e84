"""What k labels can show, learned on the answer benchmark's kept embeddings: seeded draws of random
labelled texts of each classification corpus, each model's leave-one-out probe score on them beside its
accuracy with plenty of labels (the oracle), as :class:`~flare_core.choosing.probe_reading.ReadingRow`\\ s
that :func:`~flare_core.choosing.probe_reading.fit` learns the few-label likelihood from.

The product's reading (``few_labels.reading`` of the shipped answer benchmark) is learned on every
classification corpus; the few-label record (:mod:`flare_core.benchmark.posterior_draws`) judges each
corpus with the reading learned on the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from flare_core.benchmark.answer_stage import oracle_series
from flare_core.benchmark.embedding_store import load_kept
from flare_core.choosing.accuracy_posterior import sampling_error
from flare_core.choosing.probe_reading import ProbeReading, ReadingRow, fit
from flare_core.choosing.probes import probe_scores

#: The labelled texts per draw the reading learns from: the few-label record's batches, and the few
#: labels a class of a many-class corpus.
READING_KS = (8, 16, 32, 48, 64, 96, 128)
#: Seeded draws per corpus and k (their seeds apart from the record's own draws).
READING_DRAWS = 6


def corpus_rows(
    root: str,
    name: str,
    record: Mapping,
    draws: int = READING_DRAWS,
    seed: int = 0,
    ks: Sequence[int] = READING_KS,
) -> list[ReadingRow]:
    """One :class:`ReadingRow` per draw and k of random texts of the kept corpus ``name`` (its
    answer ``record`` gives the candidates and the oracle)."""
    candidates = list(record["candidates"])
    kept = load_kept(root, name, candidates)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    labels = kept.bench.frame["label"].astype(str).to_numpy()
    classes = int(np.unique(labels).size)
    oracle = oracle_series(record).loc[candidates].to_numpy(dtype=np.float64)
    rows = []
    for draw in range(draws):
        order = np.random.default_rng([seed, 7919, draw]).permutation(labels.shape[0])
        for k in ks:
            picked = order[:k]
            values, codes = np.unique(labels[picked], return_inverse=True)
            if values.size < 2 or k >= labels.shape[0]:
                continue
            correct, _ = probe_scores(xs, picked, codes.reshape(-1), "ridge", seed=draw)
            rows.append(
                ReadingRow(
                    name, tuple(candidates), k, classes, correct.mean(axis=0), oracle, sampling_error(correct)
                )
            )
    return rows


def all_rows(
    root: str, records: Mapping[str, dict], draws: int = READING_DRAWS, seed: int = 0
) -> list[ReadingRow]:
    """:func:`corpus_rows` of every classification record."""
    own = {n: r for n, r in records.items() if r.get("oracle") == "accuracy"}
    return [row for n in own for row in corpus_rows(root, n, own[n], draws, seed)]


def left_out_reading(rows: Sequence[ReadingRow], name: str, *, own_lines: bool = False) -> ProbeReading:
    """The reading learned on every corpus of ``rows`` but ``name`` (``own_lines``: see
    :func:`~flare_core.choosing.probe_reading.fit`)."""
    return fit([r for r in rows if r.corpus != name], own_lines=own_lines)
