"""The parameters of a run: everything that determines its numbers, stored in its manifest."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flare_core.analyses.studies import STUDIES
from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.checks import check_bool, check_choice, check_int
from flare_core.choosing.probes import TOLERANCES

#: Estimator presets: "fast" (small flows, for demos and tests), "default", and "paper" (FLARE as
#: published as far as a CPU allows: a wider whitened width, and KNIFE's own mixtures).
FLOW_PRESETS = ("fast", "default", "paper")
#: Controls added to every run unless asked otherwise: where a model that learned nothing lands.
DEFAULT_CONTROLS = ("random-minilm-l6", "shuffled-glove-6b-50d")
#: Dimensions every embedding is PCA-whitened to before the densities are fitted.
DEFAULT_MAX_DIMS = 32
#: The whitened width of each preset, where a person does not set one.
PRESET_MAX_DIMS = {"fast": DEFAULT_MAX_DIMS, "default": DEFAULT_MAX_DIMS, "paper": 128}
ESTIMATOR_CHOICES = ("both", *ESTIMATOR_NAMES)
#: What the embeddings will be used for (the answer's label-free rule follows it).
USES = ("search", "grouping", "classifier", "unsure")  # what a person picks: every estimator, or one


@dataclass
class RunParams:
    """Everything that determines a run's numbers; stored in its manifest."""

    models: list[str]
    estimators: list[str] = field(default_factory=lambda: ["flow", "gmm"])
    controls: list[str] = field(default_factory=lambda: list(DEFAULT_CONTROLS))
    max_dims: int | None = DEFAULT_MAX_DIMS
    flow_preset: str = "default"
    max_texts_sufficiency: int | None = 2000
    reference_pool: list[str] = field(default_factory=list)
    collapse: bool = True
    collapse_texts: int = 200
    concentration: bool = True
    concentration_texts: int = 32
    geometry: bool = True
    downstream: bool = True
    maps: bool = True
    map_points: int = 3000
    validation: list[str] = field(default_factory=lambda: ["subsampling", "aggregation", "pool_size"])
    validation_repeats: int = 20
    executor: str = "local"
    ray_address: str | None = None
    workers: int | None = None
    autocast: bool = False
    #: Flows: how many conditionals of one target train together as one batched model; None (automatic):
    #: all of them (:func:`~flare_core.run.sufficiency_stage.conditionals_per_model`).
    batch_conditionals: int | None = None
    seed: int = 0
    device: str | None = None
    batch_size: int = 32
    max_length: int | None = 256
    #: What the embeddings are for (search, grouping, classifier, unsure): picks the label-free rule.
    use: str = "unsure"
    #: "Good enough": a model at most this many points below the best will do (1, 2 or 5).
    tolerance_points: float = 2.0

    def validate(self) -> RunParams:
        """These parameters, each checked as ``flare run`` and the New run page check it; raises
        ``ValueError`` naming the first one refused (an imported bundle's are read through here too)."""
        self._check_lists()
        for name in ("max_dims", "max_texts_sufficiency"):
            check_int(getattr(self, name), name, min_value=2, allow_none=True)
        check_int(self.workers, "workers", min_value=1, allow_none=True)
        for name in ("concentration_texts", "batch_size", "map_points", "validation_repeats"):
            check_int(getattr(self, name), name, min_value=1)
        check_int(self.batch_conditionals, "batch_conditionals", min_value=1, allow_none=True)
        check_int(self.collapse_texts, "collapse_texts", min_value=2, reason="SOCM compares pairs of texts")
        check_int(self.seed, "seed", min_value=0)
        check_int(self.max_length, "max_length", min_value=1, allow_none=True)
        for name in ("collapse", "concentration", "geometry", "downstream", "maps", "autocast"):
            check_bool(getattr(self, name), name)
        for name in ("ray_address", "device"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be text or None, got {getattr(self, name)!r}")
        from flare_core.compute import EXECUTORS

        if not isinstance(self.executor, str) or self.executor not in EXECUTORS:
            raise ValueError(f"unknown executor {self.executor!r}: choose from {sorted(EXECUTORS)}")
        if self.ray_address and self.executor != "ray":
            raise ValueError("a Ray address needs the Ray executor (--executor ray)")
        if (self.workers or 1) > 1 and self.executor != "local":
            raise ValueError("workers sizes the local process pool; a Ray cluster sizes itself")
        check_choice(self.use, "use", USES)
        if isinstance(self.tolerance_points, bool) or self.tolerance_points not in TOLERANCES:
            raise ValueError(
                f"the tolerance for 'good enough' is one of {', '.join(f'{t:g}' for t in TOLERANCES)} "
                f"points, got {self.tolerance_points!r}"
            )
        return self

    def _check_lists(self) -> None:
        """The lists of names: models, estimators, controls, references, validation studies."""
        for name in ("models", "estimators", "controls", "reference_pool", "validation"):
            values = getattr(self, name)
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                raise ValueError(f"{name} must be a list of names, got {values!r}")
        if len(set(self.models)) != len(self.models):
            raise ValueError("a model is listed twice")
        unknown = sorted(set(self.estimators) - set(ESTIMATOR_NAMES))
        if unknown:
            raise ValueError(f"unknown estimator(s) {unknown}: choose from {list(ESTIMATOR_NAMES)}")
        if not isinstance(self.flow_preset, str) or self.flow_preset not in FLOW_PRESETS:
            raise ValueError(f"unknown flow preset {self.flow_preset!r}: choose from {list(FLOW_PRESETS)}")
        if len(set(self.controls)) != len(self.controls):
            raise ValueError("controls must be a list of distinct model ids")
        unknown = sorted(set(self.validation) - set(STUDIES))
        if unknown:
            raise ValueError(f"unknown validation stud(ies) {unknown}: choose from {list(STUDIES)}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunParams:
        """Parameters stored in a manifest. Runs stored before controls and whitening existed had
        neither: they resume as they were computed (no controls, standardised coordinates)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("controls", [])
        values.setdefault("max_dims", None)
        return cls(**values)


def check_stored_params(data: Mapping[str, Any]) -> RunParams:
    """The :class:`RunParams` of a manifest's ``params`` read from outside (an imported bundle), each
    checked as ``flare run`` and the New run page check them; raises ``ValueError`` naming the first
    one refused. Settings this version does not know are ignored, as on every read of a manifest."""
    if not isinstance(data, Mapping):
        raise ValueError(f"the run's settings must be an object, got {type(data).__name__}")
    if "models" not in data:
        raise ValueError("the run's settings do not list its models")
    return RunParams.from_dict(data).validate()


def build_params(
    *,
    models: Sequence[str],
    estimator: str = "both",
    references: Sequence[str] = (),
    controls: Sequence[str] | None = None,
    collapse: bool = True,
    **options: Any,
) -> RunParams:
    """The checked :class:`RunParams` of a person's choices: the ``flare run`` options and the New run
    page's settings both come through here.

    ``estimator`` is a registered estimator or ``"both"`` (every one); ``references`` lists models used
    only as IS targets, or is ``["builtin"]`` for every available built-in model not among ``models``;
    ``controls`` (default :data:`DEFAULT_CONTROLS`) are run as IS sources beside the candidates;
    ``collapse`` turns SOCM and the layer-wise concentration on or off together. ``options`` are other
    :class:`RunParams` fields (``flow_preset``, ``collapse_texts``, ``seed``, ``workers``…); without
    ``max_dims`` the preset's whitened width (:data:`PRESET_MAX_DIMS`) is used.
    """
    check_choice(estimator, "estimator", ESTIMATOR_CHOICES)
    # an unknown preset is refused by RunParams.validate with the choices
    options.setdefault(
        "max_dims", PRESET_MAX_DIMS.get(options.get("flow_preset", "default"), DEFAULT_MAX_DIMS)
    )
    from flare_core.encoders import check_model_ids, is_available, list_models

    references = list(references)
    if references == ["builtin"]:
        references = [s.id for s in list_models() if s.id not in models and is_available(s.id)]
    check_model_ids([*models, *references, *(controls or [])])
    return RunParams(
        models=list(models),
        estimators=list(ESTIMATOR_NAMES) if estimator == "both" else [estimator],
        reference_pool=references,
        controls=list(DEFAULT_CONTROLS if controls is None else controls),
        collapse=collapse,
        concentration=collapse,
        **options,
    ).validate()
