"""The small public API of ``import flare_core``: the same names as before, each reaching its module."""

from __future__ import annotations

import flare_core as fc

PUBLIC = [
    "Corpus",
    "CorpusError",
    "RunParams",
    "RunStore",
    "correlation_table",
    "create_run",
    "downstream_report",
    "embed",
    "execute",
    "geometry_report",
    "layer_concentration",
    "list_models",
    "load_corpus",
    "load_encoder",
    "load_precomputed",
    "model_scores",
    "pair_distances",
    "run_results",
    "sufficiency_matrix",
]


def test_the_public_names_are_kept_and_resolve():
    assert sorted(fc.__all__) == PUBLIC
    for name in PUBLIC:
        value = getattr(fc, name)
        assert value.__module__.startswith("flare_core"), (name, value.__module__)
        assert getattr(value, "__name__", name) == name


def test_an_unknown_name_is_an_attribute_error():
    try:
        fc.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "has no attribute 'no_such_name'" in str(exc)
    else:
        raise AssertionError("flare_core.no_such_name should not exist")
