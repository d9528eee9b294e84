"""Time left for a running run, from the measured rate of the work done so far.

A run's work is planned as stages of units (100 characters read by an embedding model, a marginal or
conditional density, a model's map, a tenth of a second of a collapse's prior ...), each stage with a
fixed start-up cost and a prior cost per unit for a 2-core laptop CPU. The estimate:

- a finished stage costs what it took;
- a stage not started yet costs its prior, scaled by how much faster or slower this machine has been
  than the priors on the work measured so far (the run's rate: measured over prior seconds, kept
  within [0.02, 50], bounds against nonsense only); a stage started with no unit finished yet costs
  that, less the time it has run;
- a running stage's units left cost its own rate so far (time spent over the prior of its start-up and
  of the units done), drawn towards the run's rate by ``_SHRINK_SECONDS`` of prior, so that its first
  unit or two (two finishing at once on two workers, a model still loading) do not swing it.

The plan reads this machine where it can: the embedding stage prices each model at the speed measured
here (:func:`measured_cost`; a model whose embeddings of the corpus are cached at its load alone), and
the later stages start from this machine's earlier runs (:mod:`flare_core.run.stage_speeds`), so that
the run's rate measures today's load, not the distance between this machine and the priors.

``remaining_seconds`` is None until one unit has finished (nothing measured yet). Before a run,
``expected_embedding_seconds`` scales each model's measured speed to the corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flare_core.checks import check_int, check_number

#: Bounds of a measured rate, against nonsense only. They were [0.2, 5]: a 500-text run on 2 cores shared
#: with other work ran 11 times slower than the priors, measured over 600 s of embedding, and the rate held
#: at 5 halved every estimate after it (0 of 902 readings from 20% to 90% of its 1,292 s within ±30%;
#: with these bounds 74%: tests/run/recorded/eta_500_texts.json).
_MIN_FACTOR, _MAX_FACTOR = 0.02, 50.0
#: Prior seconds added to both sides of the speed ratio (a run's first seconds say little about the rest).
_SHRINK_SECONDS = 10.0


@dataclass(frozen=True)
class StagePlan:
    """``units`` of work in stage ``name``, each expected to take ``prior_seconds`` on a 2-core CPU, after
    a start-up of ``fixed_seconds`` (loading libraries, compiling)."""

    name: str
    units: int
    prior_seconds: float
    fixed_seconds: float = 0.0

    def __post_init__(self) -> None:
        check_int(self.units, "units", min_value=0)
        check_number(self.prior_seconds, "prior_seconds", min_value=0)
        check_number(self.fixed_seconds, "fixed_seconds", min_value=0)

    @property
    def total_prior(self) -> float:
        """Prior seconds of the whole stage."""
        return self.fixed_seconds + self.units * self.prior_seconds


@dataclass(frozen=True)
class StageState:
    """What has happened in a stage: ``done`` units, ``started`` and (when over) ``finished`` times."""

    done: int = 0
    started: float | None = None
    finished: float | None = None


def remaining_seconds(
    plan: Sequence[StagePlan], states: Mapping[str, StageState], now: float
) -> float | None:
    """Estimated seconds until every stage of ``plan`` is done (see the module docstring)."""
    measured = prior_of_measured = 0.0
    running: list[tuple[StagePlan, float, float]] = []  # (stage, seconds spent, prior of the work done)
    waiting: list[tuple[float, float]] = []  # (prior, seconds spent) of started stages with no unit done
    future_prior = 0.0
    for stage in plan:
        state = states.get(stage.name, StageState())
        if state.started is None:
            future_prior += stage.total_prior
            continue
        spent = max(0.0, (state.finished if state.finished is not None else now) - state.started)
        if state.finished is not None or state.done >= stage.units:
            measured += spent
            prior_of_measured += stage.total_prior
        elif state.done > 0:
            prior_done = stage.fixed_seconds + state.done * stage.prior_seconds
            measured += spent
            prior_of_measured += prior_done
            running.append((stage, spent, prior_done))
        else:
            waiting.append((stage.total_prior, spent))
    if measured <= 0 or prior_of_measured <= 0:
        return None
    factor = _speed(measured, prior_of_measured, 1.0, shrink=0.0)
    # a running stage's own rate, drawn toward the run's until its first units have taken a while
    left = sum(
        _speed(spent, prior_done, factor) * (stage.units - states[stage.name].done) * stage.prior_seconds
        for stage, spent, prior_done in running
    )
    left += sum(max(0.0, prior * factor - spent) for prior, spent in waiting)
    return left + future_prior * factor


def _speed(measured: float, prior: float, towards: float, shrink: float = _SHRINK_SECONDS) -> float:
    """Measured over prior seconds, drawn towards ``towards`` by ``shrink`` seconds of prior, within
    [``_MIN_FACTOR``, ``_MAX_FACTOR``]."""
    ratio = (measured + shrink * towards) / (prior + shrink)
    return min(_MAX_FACTOR, max(_MIN_FACTOR, ratio))


def describe_remaining(seconds: float | None) -> str:
    """ "about 4 min left", "under a minute left", or "estimating time left" (plain words)."""
    if seconds is None:
        return "estimating time left"
    if seconds < 60:
        return "under a minute left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes / 60:.1f} h left"


def plan_from_dicts(rows: Sequence[Mapping[str, Any]]) -> list[StagePlan]:
    """The plan stored in a run's manifest (a list of ``{"name", "units", "prior_seconds"}``, with
    ``"fixed_seconds"`` since it was planned)."""
    return [
        StagePlan(
            str(r["name"]), int(r["units"]), float(r["prior_seconds"]), float(r.get("fixed_seconds", 0.0))
        )
        for r in rows
    ]


# -- a run's plan and its time left, from its manifest ----------------------------------------------------

#: Prior seconds for all-MiniLM-L6-v2 to read 100 characters on 2 cores. Measured per model on 2,000
#: rotten-tomatoes reviews (110 characters on average) on a quiet machine, in the whole pool's run: 0.0035 s
#: for MiniLM (9.4 s), 5.1 times that for all-mpnet-base-v2 and 5.2 times for the compiled e5-small, after
#: loading their weights (0.02–2.0 s); 0.0030 s for the random-weights MiniLM.
_EMBED_UNIT_SECONDS = 0.0035
#: Loading the transformer libraries, once per run.
_EMBED_FIXED_SECONDS = 1.0
#: Cost per character relative to all-MiniLM-L6-v2, by kind of model (the ONNX 3-layer MiniLM measured
#: 0.4–0.5; the compiled e5-small 5.2 times MiniLM's time on a quiet machine, up to 13 under load).
_KIND_WEIGHT = {"onnx": 0.5, "compiled": 5.0, "static": 0.0, "corpus": 0.05, "precomputed": 0.0}
#: Seconds to load (or fit) a model before its first text: word vectors and TF-IDF 0.4–0.8 s in all,
#: a transformer's weights 0.02–2.0 s once its files are cached (2.6–2.9 s before).
_KIND_LOAD_SECONDS = {
    "static": 0.5,
    "corpus": 0.5,
    "onnx": 0.2,
    "transformer": 1.0,
    "compiled": 1.0,
    "hub": 2.7,
}


def seconds_to_units(seconds: float) -> float:
    """Prior ``seconds`` of embedding work as the stage's units (100 characters read by all-MiniLM-L6-v2)."""
    return seconds / _EMBED_UNIT_SECONDS


def embedding_cost(spec: Any) -> tuple[float, float]:
    """``(weight, load_units)`` of embedding with the model of ``spec``: its cost per character relative
    to all-MiniLM-L6-v2, and the units (of ``_EMBED_UNIT_SECONDS``) that loading it costs.

    A transformer's cost grows with its layers and, less than squared, with its width (length-bucketed
    batches spend much of their time outside the matrix products): all-mpnet-base-v2 (12 × 768) weighs
    5.7 and took 5.1 times MiniLM's time per character on 2,000 texts; the 3-layer MiniLMs weigh 0.5
    (measured 0.4–0.5).
    """
    kind = getattr(spec, "kind", "hub")
    load = _KIND_LOAD_SECONDS.get(kind, 0.0) / _EMBED_UNIT_SECONDS
    if kind == "transformer" and spec.layers and spec.dim:
        return spec.layers * spec.dim**1.5 / (6 * 384**1.5), load
    return _KIND_WEIGHT.get(kind, 1.0), load


def measured_cost(
    kind: str | None, record: Mapping[str, Any] | None, *, cached: bool
) -> tuple[float, float] | None:
    """``(weight, load_units)`` of a model from the speed measured on this machine (``record``: its
    ``chars_per_s`` and ``load_s``, :mod:`flare_core.encoders.cost`), or None when it has no speed.

    The weight makes the model read 100 characters in ``100 / chars_per_s`` seconds. A model fitted on the
    corpus (``kind`` ``"corpus"``) learns while it loads and its speed counts that: it loads for nothing
    more. A model whose embeddings of this corpus are ``cached`` reads nothing (the stored file is copied):
    it costs its load alone (a fitted model fits again)."""
    speed = float((record or {}).get("chars_per_s") or 0.0)
    if speed <= 0:
        return None
    load_s = max(0.0, float(record.get("load_s") or 0.0))  # type: ignore[union-attr]
    weight = 100.0 / (speed * _EMBED_UNIT_SECONDS)
    if cached:
        return 0.0, load_s / _EMBED_UNIT_SECONDS
    return weight, (0.0 if kind == "corpus" else load_s) / _EMBED_UNIT_SECONDS


def model_embedding_units(
    costs: Mapping[str, tuple[float, float]], corpus_units: float
) -> dict[str, tuple[float, float]]:
    """Each model's ``(load units, reading units)`` of the embedding stage, from its :func:`embedding_cost`
    and the corpus's :func:`text_units`; the plan and the stage's progress both count in these."""
    return {model: (load, weight * corpus_units) for model, (weight, load) in costs.items()}


def text_units(texts: Sequence[str], max_length: int | None) -> float:
    """Units of work (100 characters) in reading ``texts`` once: each text counts its characters, at
    least 20 (a batch's fixed cost) and at most 4 per token a model reads (``max_length``, 512 if None)."""
    cap = 4 * (max_length or 512)
    return sum(min(max(len(text), 20), cap) for text in texts) / 100


#: The collapse stage counts its work in tenths of a prior second (:func:`collapse_costs`).
COLLAPSE_UNIT_SECONDS = 0.1


def token_counts(texts: Sequence[str], max_length: int | None) -> list[float]:
    """Tokens a transformer reads of each of ``texts``, estimated from its characters: about 4 a token in
    English, plus the two special tokens, at most ``max_length`` (512 if None)."""
    cap = max_length or 512
    return [min(len(text) / 4 + 2, cap) for text in texts]


#: Seconds per (pair × mean tokens × longest tokens) of a 384-wide model's collapse, on 2 cores.
_PAIR_TOKEN_SECONDS = 2.2e-8


def collapse_costs(
    weight: float, width: int, texts: Sequence[str], max_length: int | None
) -> tuple[float, float]:
    """Prior seconds ``(reading, pairs)`` of one model's collapse: a model of :func:`embedding_cost`
    ``weight`` and ``width`` reads the sampled ``texts`` once for their token states, then computes one
    nuclear norm per pair of texts.

    A pair's product costs its first text's tokens × the longest text of its batch × width, so the pairs
    cost pairs × mean tokens × longest text × width / 384 × ``_PAIR_TOKEN_SECONDS`` (fitted on the
    collapse stages of four recorded runs: 40 and 200 texts, 30 to 87 tokens on average, the longest
    66 to 256: 3.7–66 s measured, each within 25%).
    """
    tokens = token_counts(texts, max_length)
    reading = weight * text_units(texts, max_length) * _EMBED_UNIT_SECONDS
    if len(tokens) < 2:
        return reading, 0.0
    pairs = len(tokens) * (len(tokens) - 1) / 2
    pair_work = pairs * (sum(tokens) / len(tokens)) * max(tokens)
    return reading, _PAIR_TOKEN_SECONDS * pair_work * width / 384


#: Prior seconds of one IS unit, per 1,800 training texts (``fit``), by estimator and executor: in this
#: process (one thread) or on a pool of worker processes, which also start once (importing torch).
#: Measured on recorded runs: flows 0.17–0.21 s a unit at 225 texts and 0.60–0.65 s at 629 in this
#: process; mixtures 0.06–0.07 and 0.15–0.17 s. On two workers at 1,800 texts, the whole pool's runs on a
#: quiet machine (288 units): flows 0.49–0.55 s (batched flows drop those that stopped), mixtures
#: 0.19–0.20 s.
_IS_UNIT_SECONDS = {
    ("flow", False): (0.0, 1.75),
    ("flow", True): (0.0, 0.55),
    ("gmm", False): (0.02, 0.41),
    ("gmm", True): (0.02, 0.17),
}
_POOL_START_SECONDS = 4.0
#: Prior seconds of one 2-D map of 2,000 points and the stage's start, in this process or on the pool.
_MAP_SECONDS = {False: (2.6, 1.0), True: (1.4, 3.0)}
#: Uniformity reads at most this many pairs of texts (the geometry stage's own limit).
_GEOMETRY_PAIRS = 200_000


def run_plan(
    *,
    n_texts: int,
    n_fit: int,
    costs: Mapping[str, tuple[float, float]],
    corpus_units: float,
    estimators: Sequence[str],
    is_units: int,
    is_pool: bool,
    collapse_models: Sequence[tuple[float, int]],
    collapse_texts: Sequence[str],
    max_length: int | None,
    geometry: bool,
    downstream: bool,
    validation: bool,
    maps: bool,
    collapse: bool,
    concentration: bool,
) -> list[StagePlan]:
    """The stages of a run with their prior costs on a 2-core CPU (see the module docstring).

    ``costs``: each model's :func:`embedding_cost`; ``corpus_units``: :func:`text_units` of the corpus.
    ``n_fit``: texts the IS estimators train on; ``is_units``: marginals + conditionals per estimator;
    ``is_pool``: whether they run on a pool of worker processes. ``collapse_models``: ``(weight, width)``
    of each model whose token states the collapse and layer stages read; ``collapse_texts``: the texts
    sampled for the collapse.

    Priors measured on recorded runs with every stage (9 models × 2,000 rotten-tomatoes reviews and
    2,000 BBC articles, 9 × 699 debate statements, the demo's 8 models × 250 paragraphs).
    """
    models = len(costs)
    scale = n_texts / 2000
    fit = n_fit / 1800
    embed_units = sum(map(sum, model_embedding_units(costs, corpus_units).values()))
    fixed = _EMBED_FIXED_SECONDS if any(weight > 0 or load > 0 for weight, load in costs.values()) else 0.0
    plan = [StagePlan("embeddings", max(1, round(embed_units)), _EMBED_UNIT_SECONDS, fixed)]
    for index, estimator in enumerate(estimators):
        base, per_fit = _IS_UNIT_SECONDS.get((estimator, is_pool), (0.1, 0.7))
        start = _POOL_START_SECONDS if is_pool and index == 0 else 0.0
        plan.append(StagePlan(f"sufficiency_{estimator}", is_units, base + per_fit * fit, start))
    if geometry:
        # uniformity's pairs stop growing at _GEOMETRY_PAIRS (about 630 texts)
        pairs = min(1.0, n_texts * (n_texts - 1) / 2 / _GEOMETRY_PAIRS)
        plan.append(StagePlan("geometry", models, 0.15 + 1.1 * pairs))  # 1.25–1.5 s a model measured
    if downstream:
        plan.append(StagePlan("downstream", models, 0.03 + 0.63 * scale))
    if validation:
        plan.append(StagePlan("validation", len(estimators) + 1, 0.55))
    if maps:
        # a map of 2,000 points: about 2.6 s in this process; side by side on the estimators' pool 1.4 s
        # a model after 3 s of loading umap-learn in the workers (19 models: 29.9 s measured)
        per_map, start = _MAP_SECONDS[is_pool]
        plan.append(StagePlan("maps", models, per_map * min(scale, 1.5), start))
    n_transformers = len(collapse_models)
    if collapse and n_transformers:
        seconds = sum(sum(collapse_costs(w, d, collapse_texts, max_length)) for w, d in collapse_models)
        units = max(1, round(seconds / COLLAPSE_UNIT_SECONDS))
        plan.append(StagePlan("collapse", units, COLLAPSE_UNIT_SECONDS))
    if concentration and n_transformers:
        plan.append(StagePlan("concentration", n_transformers, 1.2))
    return plan


def timestamp_seconds(stamp: str | None) -> float | None:
    """Seconds since the epoch of an ISO timestamp from a manifest, or None."""
    if not stamp:
        return None
    import datetime as _dt

    return _dt.datetime.fromisoformat(stamp).timestamp()


def manifest_remaining_seconds(manifest: Mapping[str, Any], now: float) -> float | None:
    """Seconds left for a running run, from the plan and the stage records in its ``manifest``."""
    rows = manifest.get("plan")
    if not rows:
        return None
    states = {}
    for name, entry in (manifest.get("stages") or {}).items():
        done = entry.get("work_done", entry.get("done", 0))
        states[name] = StageState(
            int(done), timestamp_seconds(entry.get("started")), timestamp_seconds(entry.get("finished"))
        )
    return remaining_seconds(plan_from_dicts(rows), states, now)


def expected_embedding_seconds(
    models: Sequence[str], texts: Sequence[str], device: str | None = None, *, cached: Sequence[str] = ()
) -> tuple[dict[str, float], list[str]]:
    """``({model: seconds}, unmeasured)``: how long each model of ``models`` should take to load and embed
    ``texts`` on this machine, from the speeds measured here (by ``flare models --measure`` and by every
    run: :mod:`flare_core.encoders.model_costs`), and the models with no measurement here. A model whose
    embeddings of these texts are ``cached`` only loads: its measured load time, else its kind's prior."""
    from flare_core.encoders.cost import expected_seconds, load_measurements
    from flare_core.encoders.model_costs import this_device_kind

    stored = load_measurements().get(this_device_kind(device), {})
    seconds, unmeasured = {}, []
    for model in models:
        record = stored.get(model) or {}
        if model in cached:
            load = record.get("load_s")
            seconds[model] = float(load) if load is not None else _prior_load_seconds(model)
            continue
        value = expected_seconds(record, texts) if record else None
        if value is None:
            unmeasured.append(model)
        else:
            seconds[model] = value
    return seconds, unmeasured


def cached_for_corpus(models: Sequence[str], corpus_hash: str, max_length: int | None) -> list[str]:
    """The ``models`` whose embeddings of the corpus ``corpus_hash`` are in this machine's embedding cache
    (a run reads them from it instead of embedding again), in the order given."""
    from flare_core.encoders.embedding_cache import cached_models
    from flare_core.store.cache_folder import cache_root

    found = cached_models(models, corpus_hash, cache_root() / "embeddings", max_length)
    return [m for m in models if m in found]


def _prior_load_seconds(model: str) -> float:
    from flare_core.encoders import get_spec

    try:
        spec = get_spec(model)
    except ValueError:
        spec = None
    return embedding_cost(spec)[1] * _EMBED_UNIT_SECONDS


def describe_duration(seconds: float) -> str:
    """``"under 10 s"``, ``"about 40 s"``, ``"about 3 min"``, ``"about 1.5 h"`` (plain words)."""
    check_number(seconds, "seconds", min_value=0)
    if seconds < 10:
        return "under 10 s"
    if seconds < 90:
        return f"about {round(seconds, -1):.0f} s"
    if seconds < 5400:
        return f"about {round(seconds / 60):.0f} min"
    return f"about {seconds / 3600:.1f} h"
