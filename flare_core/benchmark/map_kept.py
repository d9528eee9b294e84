"""The map stage from the kept vectors: every kept corpus's information-sufficiency matrices (FLARE flows
and EMIR mixtures) estimated from the answer benchmark's vectors, with no run and no embedding.

For a corpus kept by :mod:`flare_core.benchmark.embedding_store`, :func:`estimate_kept` estimates the IS
matrix of one estimator over every kept model as a run's sufficiency stage does
(:mod:`flare_core.run.sufficiency_stage`): the same rows (at most ``max_texts_sufficiency`` of them, a
seeded sample), the preset's config and whitened width, every model a source, the controls sources only,
and every conditional of a target trained as one batched model. Layout under ``out``::

    <corpus>/<estimator>/pairs/      the finished units (a stopped stage resumes from them)
    <corpus>/<estimator>/result/     the matrix (:class:`~flare_core.analyses.sufficiency.SufficiencyResult`)
    <corpus>/<estimator>/stage.json  the models, rows, preset, width and the seconds the stage took

The judging of these matrices against the kept oracle is :mod:`flare_core.benchmark.map_judge`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flare_core.benchmark.answer_stage import roles_of
from flare_core.benchmark.embedding_store import kept_models, load_kept
from flare_core.compute.executor import torch_threads
from flare_core.run.params import PRESET_MAX_DIMS, RunParams
from flare_core.run.sufficiency_stage import conditionals_per_model, sufficiency_rows
from flare_core.store import atomic

#: The estimators of the map stage, in the order they run (the mixtures are the quicker).
MAP_ESTIMATORS = ("gmm", "flow")


def stage_dir(out: str | Path, corpus: str, estimator: str) -> Path:
    """``out/<corpus>/<estimator>``: one estimator's matrix of one kept corpus."""
    return Path(out) / corpus / estimator


def read_stage(out: str | Path, corpus: str, estimator: str) -> dict[str, Any] | None:
    """The ``stage.json`` of a finished estimate (None when it has not finished)."""
    path = stage_dir(out, corpus, estimator) / "stage.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def estimate_kept(
    root: str | Path,
    corpus: str,
    out: str | Path,
    estimator: str,
    *,
    preset: str = "default",
    seed: int = 0,
    models: Sequence[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Estimate ``estimator``'s IS matrix over the kept vectors of ``corpus`` (under ``root``) and keep it
    under ``out`` (see the module docstring); returns its ``stage.json``. One finished with the same
    models, rows, preset and width is read back, not estimated again."""
    from flare_core.analyses import sufficiency

    names = list(models) if models is not None else kept_models(root, corpus)
    params = RunParams(models=names, flow_preset=preset, seed=seed, max_dims=PRESET_MAX_DIMS[preset])
    kept = load_kept(root, corpus, names)
    n = len(kept.bench.frame)
    rows = sufficiency_rows(n, params.max_texts_sufficiency, seed)
    role = roles_of(names)
    probes = [m for m in names if role[m] == "control"]
    sources = [m for m in names if role[m] != "control"] + probes  # controls are sources only
    targets = [m for m in names if role[m] != "control"]
    if len(targets) < 2:
        raise ValueError(f"{corpus}: the map needs at least two kept models that are not controls")
    wanted = {
        "corpus": corpus,
        "estimator": estimator,
        "models": names,
        "roles": role,
        "n_texts": n,
        "n_rows": int(len(rows)),
        "preset": preset,
        "max_dims": params.max_dims,
        "seed": seed,
    }
    folder = stage_dir(out, corpus, estimator)
    done = read_stage(out, corpus, estimator)
    if done is not None and {k: done.get(k) for k in wanted} == json.loads(json.dumps(wanted)):
        return done
    embeddings = {m: np.ascontiguousarray(kept.embeddings[m][rows]) for m in names}
    grouping = conditionals_per_model(params, len(sources) - 1)
    config = sufficiency.get_estimator(estimator).run_config(
        preset, autocast=False, batch_conditionals=grouping
    )
    start = time.perf_counter()
    with torch_threads(1):  # as the run's stage: one thread per 32-d density (sufficiency_stage)
        result = sufficiency.sufficiency_matrix(
            embeddings,
            estimator=estimator,
            config=config,
            sources=sources,
            targets=targets,
            seed=seed,
            store_dir=folder / "pairs",
            max_dims=params.max_dims,
        )
    result.save(folder / "result")
    record = {**wanted, "seconds": round(time.perf_counter() - start, 1)}
    atomic.write_json(folder / "stage.json", record)
    if log is not None:
        log(
            f"{corpus}: {estimator} over {len(names)} models × {len(rows)} texts in {record['seconds']:.0f} s"
        )
    return record


def unit_seconds(out: str | Path, corpus: str, estimator: str) -> float:
    """The seconds the stored units of ``estimator`` on ``corpus`` took, summed (a group of conditionals
    trained together shares its time among its pairs): the stage's cost without the time it stood stopped,
    where a stage was stopped and resumed."""
    folder = stage_dir(out, corpus, estimator) / "pairs"
    total = 0.0
    for path in [*folder.glob("marginals/*.json"), *folder.glob("pairs/*.json")]:
        total += float(json.loads(path.read_text(encoding="utf-8")).get("seconds") or 0.0)
    return round(total, 1)


def load_result(out: str | Path, corpus: str, estimator: str):
    """The kept matrix of ``estimator`` on ``corpus`` (a :class:`SufficiencyResult`)."""
    from flare_core.analyses.sufficiency import SufficiencyResult

    return SufficiencyResult.load(stage_dir(out, corpus, estimator) / "result")
