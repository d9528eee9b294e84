"""The pipeline's stage ``labels``: every candidate judged on the run's own label column (every text
labelled), on its scored pairs' cosines, or on its search judgements' nDCG@10
(:mod:`flare_core.answer.search_labels`), stored for the answer (:mod:`flare_core.answer.from_labels`)::

    labels/comparison.parquet   one row per candidate: model, accuracy, f1_macro, gap, gap_low, gap_high, tied
    labels/comparison.json      the table's attrs: best, balanced, method, folds, repeats, n_labels, n_classes
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flare_core.answer.from_labels import COMPARISON, COMPARISON_INFO, candidate_embeddings, candidate_ids
from flare_core.answer.search_labels import QUERY_SCORES, NotEnoughScored, save_search_comparison
from flare_core.choosing.probes import compare_with_labels
from flare_core.run.baseline_stages import PAIR_COSINES
from flare_core.run.outcomes import StageSkipped
from flare_core.store.runs import Run


def comparison_stage(run: Run, labels: list[str] | None) -> None:
    """The pipeline's stage ``labels``: every candidate judged on the run's label column (``labels``, one
    per text) or, without one, on its scored pairs' cosines (stored by the downstream stage), stored."""
    from flare_core.choosing.pair_probes import compare_with_pair_scores

    candidates = candidate_ids(run)
    if len(candidates) < 2:
        raise StageSkipped("comparing models on your labels needs at least two embedded candidates")
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    if run.has(*QUERY_SCORES):  # search judgements (query and document pairs, or a judgements file)
        try:
            save_search_comparison(run, candidates, seed=seed)
        except NotEnoughScored as exc:
            raise StageSkipped(str(exc)) from exc
        return
    if labels is not None:
        frame = compare_with_labels(candidate_embeddings(run), labels, seed=seed)
        metric = "accuracy"
    else:
        cosines = run.load_frame(*PAIR_COSINES) if run.has(*PAIR_COSINES) else pd.DataFrame()
        scored = [m for m in candidates if m in cosines]
        if len(scored) < 2:
            raise StageSkipped(
                "comparing models on your pair scores needs two candidates that can embed the pairs"
            )
        gold = run.load_frame("pairs.parquet")["score"].to_numpy(dtype=float)
        frame = compare_with_pair_scores({m: cosines[m].to_numpy() for m in scored}, gold, seed=seed)
        frame = frame.rename(columns={"n_pairs": "n_labels"}).assign(n_classes=None)
        metric = "spearman"
    info = {k: (bool(v) if isinstance(v, np.bool_) else v) for k, v in frame.attrs.items()}
    classes = frame["n_classes"].iloc[0]
    info.update(n_labels=int(frame["n_labels"].iloc[0]), n_classes=None if classes is None else int(classes))
    info["metric"] = metric
    frame.attrs = {}
    run.save_frame(frame, *COMPARISON)
    run.save_json(info, *COMPARISON_INFO)
