"""Which texts to ask the user to label next, to tell the candidate models apart with few labels.

``embeddings`` maps a model name to its (N, d) matrix of the same N texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from flare_core.analyses.probes import check_embeddings, check_rows
from flare_core.checks import check_int


def next_rows(
    embeddings: Mapping[str, np.ndarray],
    labelled_rows: np.ndarray,
    labels: Sequence,
    n: int,
    *,
    seed: int = 0,
    exclude: Sequence[int] = (),
) -> np.ndarray:
    """The ``n`` rows (int64, shape (n,) or fewer when the corpus runs out) to label next.

    ``labelled_rows`` (k,) are labelled with ``labels`` (k,); no row of them or of ``exclude`` (rows the
    user skipped) is returned. Raises ``ValueError`` for rows outside the corpus or mismatched lengths.
    """
    xs = check_embeddings(embeddings)
    n_texts = next(iter(xs.values())).shape[0]
    n = check_int(n, "n", min_value=1)
    labelled = check_rows(labelled_rows, n_texts, "labelled_rows")
    if len(labels) != labelled.shape[0]:
        raise ValueError(
            f"labels has {len(labels)} entries but labelled_rows has {labelled.shape[0]}: one label per row"
        )
    skipped = np.unique(check_rows(np.unique(np.asarray(exclude, dtype=np.int64)), n_texts, "exclude"))
    free = np.setdiff1d(np.arange(n_texts), np.concatenate([labelled, skipped]))
    rng = np.random.default_rng([seed, labelled.shape[0]])
    return rng.permutation(free)[:n].astype(np.int64)
