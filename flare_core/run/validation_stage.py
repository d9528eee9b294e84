"""The pipeline's stage ``validation``: the studies of :mod:`flare_core.analyses.studies` computed for every
estimator of a stored run, saved in ``validation/*.parquet`` plus a JSON digest ``validation.json``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.run.params import RunParams
from flare_core.run.progress import no_report
from flare_core.run.sufficiency_stage import sufficiency_rows
from flare_core.store.runs import Run

_SHUFFLE_TEXTS = 2000


def _downstream_series(run: Run) -> pd.Series | None:
    """The headline downstream score per model (classification accuracy, else STS Spearman), if any."""
    if not run.has("downstream.parquet"):
        return None
    downstream = run.load_frame("downstream.parquet").set_index("model")
    for column in ("accuracy", "cosine_spearman", "v_measure"):
        if column in downstream:
            return downstream[column].astype(float)
    return None


def run_studies(run: Run, studies: Sequence[str], *, repeats: int = 20, report=None) -> dict[str, Any]:
    """Compute the chosen validation studies for every estimator of ``run``; store and return a digest."""
    from flare_core.analyses import studies as validation
    from flare_core.analyses import sufficiency

    report = report or no_report
    unknown = sorted(set(studies) - set(validation.STUDIES))
    if unknown:
        raise ValueError(f"unknown validation studies {unknown}: choose from {list(validation.STUDIES)}")
    params = RunParams.from_dict(run.manifest["params"])
    downstream = _downstream_series(run)
    digest: dict[str, Any] = run.load_json("validation.json") if run.has("validation.json") else {}
    estimators = [e for e in ESTIMATOR_NAMES if run.has("sufficiency", e, "scores.parquet")]
    for index, estimator in enumerate(estimators):
        report("validation", index, len(estimators) + 1, f"validation studies for {estimator}")
        result = sufficiency.SufficiencyResult.load(run.artefact("sufficiency", estimator, "result"))
        block = digest.setdefault(estimator, {})
        if "subsampling" in studies:
            frame = validation.subsampling_stability(
                result, repeats=repeats, seed=params.seed, downstream=downstream
            )
            run.save_frame(frame, "validation", f"{estimator}_subsampling.parquet")
            block["subsampling"] = (
                frame.groupby("alpha").mean(numeric_only=True).drop(columns="repeat").reset_index()
            )
        if "aggregation" in studies:
            frame = validation.aggregation_study(result, downstream=downstream)
            run.save_frame(frame, "validation", f"{estimator}_aggregation.parquet")
            block["aggregation"] = frame
        if "pool_size" in studies:
            per_dim = result.records.pivot(index="source", columns="target", values="is_per_dim")
            try:
                frame = validation.pool_size_study(per_dim, repeats=repeats, seed=params.seed)
            except ValueError as exc:
                block["pool_size_skipped"] = str(exc)
            else:
                run.save_frame(frame, "validation", f"{estimator}_pool_size.parquet")
                block["pool_size"] = (
                    frame.groupby("pool_size")["rank_agreement"].agg(["mean", "std"]).reset_index()
                )
    if "shuffle" in studies:
        ok = [m for m in run.embedded_models()]
        # seven retrainings of the matrix: a seeded sample of at most 2,000 texts, whatever the run used
        limit = min(params.max_texts_sufficiency or _SHUFFLE_TEXTS, _SHUFFLE_TEXTS)
        rows = sufficiency_rows(len(run.corpus_frame()), limit, params.seed)
        embeddings = {m: np.asarray(run.load_embeddings(m, mmap=True)[rows]) for m in ok}
        frame = validation.shuffle_study(
            embeddings,
            # Flows, not mixtures: a mixture's conditional MLP out-fits its 8-mode marginal even when the
            # pairing is fully shuffled (0.097 nats/dim at p = 1 on the demo run), so only the flow
            # estimator can show the signal vanishing. The fast preset keeps the 7 retrainings affordable.
            estimator="flow",
            config=sufficiency.FlowConfig.fast(),
            seed=params.seed,
            max_dims=params.max_dims,
            progress=lambda done, total: report(
                "validation", len(estimators), len(estimators) + 1, f"shuffle study {done}/{total}"
            ),
        )
        run.save_frame(frame, "validation", "shuffle.parquet")
        digest["shuffle"] = frame
    report("validation", len(estimators) + 1, len(estimators) + 1, "validation done")
    digest = {k: _jsonable(v) for k, v in digest.items()}
    run.save_json(digest, "validation.json")
    return digest


def _jsonable(value: Any) -> Any:
    if isinstance(value, pd.DataFrame):
        return value.to_dict(orient="records")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value
