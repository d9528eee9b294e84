"""The shared argument checks: what each accepts, what it refuses, and the message it gives."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flare_core.checks import (
    check_bool,
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_probability,
)
from flare_core.errors import CorpusError


def test_check_int_accepts_integers_and_returns_python_ints():
    assert check_int(3, "n") == 3
    value = check_int(np.int64(7), "n", min_value=1)
    assert value == 7 and type(value) is int
    assert check_int(None, "n", allow_none=True) is None
    assert check_int(5, "n", min_value=5, max_value=5) == 5


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (True, {"min_value": 1}, "workers must be a positive integer, got True"),
        (np.bool_(False), {"min_value": 0}, "workers must be an integer >= 0, got "),
        (0, {"min_value": 1}, "workers must be a positive integer, got 0"),
        (2.0, {"min_value": 1}, "workers must be a positive integer, got 2.0"),
        ("2", {}, "workers must be an integer, got '2'"),
        (None, {"min_value": 1}, "workers must be a positive integer, got None"),
        (1, {"min_value": 2}, "workers must be an integer >= 2, got 1"),
        (9, {"min_value": 1, "max_value": 8}, r"workers must be an integer in \[1, 8\], got 9"),
        (0, {"min_value": 1, "allow_none": True}, "workers must be a positive integer or None, got 0"),
        (1, {"min_value": 2, "reason": "pairs"}, r"workers must be an integer >= 2 \(pairs\), got 1"),
    ],
)
def test_check_int_refusals_name_the_argument_the_rule_and_the_value(value, kwargs, message):
    with pytest.raises(ValueError, match=message):
        check_int(value, "workers", **kwargs)


def test_checks_raise_the_error_class_they_are_given():
    with pytest.raises(CorpusError, match="max_rows must be a positive integer or None"):
        check_int(0, "max_rows", min_value=1, allow_none=True, error=CorpusError)
    with pytest.raises(CorpusError, match="ci must be"):
        check_probability(2.0, "ci", error=CorpusError)


def test_check_number_bounds_open_and_closed():
    assert check_number(1, "x") == 1.0 and type(check_number(1, "x")) is float
    assert check_number(np.float32(0.5), "p", min_value=0, max_value=1) == 0.5
    assert check_number(0.0, "x", min_value=0) == 0.0
    with pytest.raises(ValueError, match="x must be a finite number > 0, got 0.0"):
        check_number(0.0, "x", min_value=0, include_min=False)
    with pytest.raises(ValueError, match=r"p must be a finite number in \(0, 1\), got 1"):
        check_number(1, "p", min_value=0, max_value=1, include_min=False, include_max=False)
    assert check_number(math.inf, "cpus", min_value=0, finite=False) == math.inf
    with pytest.raises(ValueError, match="cpus must be a number >= 0, got nan"):
        check_number(math.nan, "cpus", min_value=0, finite=False)
    for bad in (math.nan, math.inf, True, "1", None):
        with pytest.raises(ValueError, match="x must be a finite number"):
            check_number(bad, "x")
    assert check_number(None, "x", allow_none=True) is None


def test_check_probability():
    assert check_probability(0, "p") == 0.0 and check_probability(1, "p") == 1.0
    with pytest.raises(ValueError, match=r"val_fraction must be a finite number in \(0, 1\), got 1.0"):
        check_probability(1.0, "val_fraction", include_min=False, include_max=False)
    with pytest.raises(ValueError, match=r"p must be a finite number in \[0, 1\], got -0.1"):
        check_probability(-0.1, "p")


def test_check_bool_choice_callable():
    assert check_bool(np.bool_(True), "flag") is True
    assert check_bool(None, "stream", allow_none=True) is None
    with pytest.raises(ValueError, match="autocast must be True or False, got 1"):
        check_bool(1, "autocast")
    with pytest.raises(ValueError, match="stream must be True, False or None, got 'yes'"):
        check_bool("yes", "stream", allow_none=True)
    assert check_choice("gmm", "estimator", ("flow", "gmm")) == "gmm"
    with pytest.raises(ValueError, match=r"estimator must be one of \['flow', 'gmm'\], got 'knn'"):
        check_choice("knn", "estimator", ("flow", "gmm"))
    with pytest.raises(ValueError, match="must be one of"):
        check_choice(["flow"], "estimator", {"flow", "gmm"})  # unhashable
    assert check_callable(None, "progress") is None and check_callable(print, "progress") is print
    with pytest.raises(ValueError, match="progress must be callable or None, got int"):
        check_callable(3, "progress")


def test_check_matrix_converts_and_refuses():
    out = check_matrix([[1, 2], [3, 4]], "x", dtype=np.float32)
    assert out.dtype == np.float32 and out.flags.c_contiguous and out.tolist() == [[1, 2], [3, 4]]
    objects = np.array([[1.0, 2], [3, 4.5]], dtype=object)
    assert check_matrix(objects, "x").dtype == np.float64
    cases = [
        (np.ones(3), {}, r"x must be a 2-D array of shape \(N, d\), got shape \(3,\)"),
        (np.ones((1, 2)), {"min_rows": 2}, r"x needs at least 2 rows, got shape \(1, 2\)"),
        (np.ones((3, 1)), {"min_cols": 2}, r"x needs at least 2 columns, got shape \(3, 1\)"),
        (np.ones((3, 2)), {"n_cols": 3}, "x has 2 columns, expected 3"),
        (np.array([[1.0, np.nan], [np.inf, 0.0]]), {}, r"x has 2 non-finite entries \(NaN or infinity\)"),
        (np.ones((2, 2), dtype=bool), {}, "x must be a numeric array of shape .*dtype bool"),
        (np.array([["a", "b"]]), {}, "x must be a numeric array"),
        (np.array([[1, "a"]], dtype=object), {}, "non-numeric entries"),
        (np.ones((2, 2), dtype=complex), {}, "dtype complex128"),
    ]
    for array, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            check_matrix(array, "x", **kwargs)


def test_check_labels_codes_rows_and_refusals():
    codes = check_labels(["b", "a", "b"], 3)
    assert codes.tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="labels has 2 entries but x has 3 rows"):
        check_labels(["a", "b"], 3)
    with pytest.raises(ValueError, match="labels has 1 missing values"):
        check_labels(["a", None, "b"], 3)
    with pytest.raises(ValueError, match=r"labels must be one-dimensional, got shape \(1, 3\)"):
        check_labels([["a", "b", "c"]], 3)
