"""Checks of the arguments public functions receive, in the style of scikit-learn's ``check_scalar``.

Each check returns the value in its canonical type or raises ``error`` (``ValueError`` by default, or a
subclass such as :class:`~flare_core.errors.CorpusError`) with a message that names the argument, says
what it must be and shows what it got::

    check_int(True, "workers", min_value=1)      # ValueError: workers must be a positive integer, got True
    check_number(1.5, "p", min_value=0, max_value=1)   # p must be a finite number in [0, 1], got 1.5

Booleans are never accepted as numbers, NaN never passes a range, and numpy scalars are accepted and
returned as Python ``int`` / ``float``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from numbers import Integral, Real
from typing import Any, TypeVar

import numpy as np
import pandas as pd

T = TypeVar("T")


def _int_description(min_value: int | None, max_value: int | None) -> str:
    if min_value is not None and max_value is not None:
        return f"an integer in [{min_value}, {max_value}]"
    if min_value == 1:
        return "a positive integer"
    if min_value is not None:
        return f"an integer >= {min_value}"
    if max_value is not None:
        return f"an integer <= {max_value}"
    return "an integer"


def check_int(
    value: Any,
    name: str,
    *,
    min_value: int | None = None,
    max_value: int | None = None,
    allow_none: bool = False,
    reason: str | None = None,
    error: type[ValueError] = ValueError,
) -> int | None:
    """``value`` as an ``int`` within ``[min_value, max_value]`` (bounds optional); None passes with
    ``allow_none``.

    ``bool`` is refused; numpy integers are accepted. ``reason`` is added to the message in brackets.
    """
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool | np.bool_)
        or not isinstance(value, Integral)
        or (min_value is not None and value < min_value)
        or (max_value is not None and value > max_value)
    ):
        allowed = " or None" if allow_none else ""
        why = f" ({reason})" if reason else ""
        raise error(f"{name} must be {_int_description(min_value, max_value)}{allowed}{why}, got {value!r}")
    return int(value)


def _number_description(
    min_value: float | None, max_value: float | None, include_min: bool, include_max: bool, finite: bool
) -> str:
    kind = "a finite number" if finite else "a number"
    if min_value is not None and max_value is not None:
        left, right = "[" if include_min else "(", "]" if include_max else ")"
        return f"{kind} in {left}{min_value:g}, {max_value:g}{right}"
    if min_value is not None:
        return f"{kind} {'>=' if include_min else '>'} {min_value:g}"
    if max_value is not None:
        return f"{kind} {'<=' if include_max else '<'} {max_value:g}"
    return kind


def check_number(
    value: Any,
    name: str,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    include_min: bool = True,
    include_max: bool = True,
    finite: bool = True,
    allow_none: bool = False,
    reason: str | None = None,
    error: type[ValueError] = ValueError,
) -> float | None:
    """``value`` as a ``float`` within the given bounds (open or closed); finite unless ``finite=False``.

    ``bool`` and NaN are refused; ints and numpy numbers are accepted. ``reason`` is added to the
    message in brackets.
    """
    if value is None and allow_none:
        return None
    ok = isinstance(value, Real) and not isinstance(value, bool | np.bool_) and not math.isnan(value)
    if ok and finite:
        ok = math.isfinite(value)
    if ok and min_value is not None:
        ok = value >= min_value if include_min else value > min_value
    if ok and max_value is not None:
        ok = value <= max_value if include_max else value < max_value
    if not ok:
        what = _number_description(min_value, max_value, include_min, include_max, finite)
        allowed = " or None" if allow_none else ""
        why = f" ({reason})" if reason else ""
        raise error(f"{name} must be {what}{allowed}{why}, got {value!r}")
    return float(value)


def check_probability(
    value: Any,
    name: str,
    *,
    include_min: bool = True,
    include_max: bool = True,
    error: type[ValueError] = ValueError,
) -> float:
    """``value`` as a float in [0, 1] (either end open when asked)."""
    checked = check_number(
        value,
        name,
        min_value=0.0,
        max_value=1.0,
        include_min=include_min,
        include_max=include_max,
        error=error,
    )
    assert checked is not None
    return checked


def check_bool(
    value: Any, name: str, *, allow_none: bool = False, error: type[ValueError] = ValueError
) -> bool | None:
    """``value`` itself when it is ``True`` or ``False`` (numpy booleans included), else ``error``."""
    if value is None and allow_none:
        return None
    if not isinstance(value, bool | np.bool_):
        allowed = ", False or None" if allow_none else " or False"
        raise error(f"{name} must be True{allowed}, got {value!r}")
    return bool(value)


def check_choice(value: Any, name: str, choices: Collection[T], *, error: type[ValueError] = ValueError) -> T:
    """``value`` when it is one of ``choices``, else ``error`` listing them."""
    try:
        found = value in choices
    except TypeError:  # an unhashable value in a set of choices
        found = False
    if not found:
        raise error(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_callable(
    value: Any, name: str, *, allow_none: bool = True, error: type[ValueError] = ValueError
) -> Any:
    """``value`` when it is callable (or None with ``allow_none``), else ``error``."""
    if (value is None and allow_none) or callable(value):
        return value
    raise error(f"{name} must be callable{' or None' if allow_none else ''}, got {type(value).__name__}")


def check_matrix(
    x: Any,
    name: str,
    *,
    min_rows: int = 1,
    min_cols: int = 1,
    n_cols: int | None = None,
    dtype: Any = np.float64,
    error: type[ValueError] = ValueError,
) -> np.ndarray:
    """``x`` as a contiguous 2-D array (n, d) of ``dtype``: real numbers, all finite, n >= ``min_rows``,
    d >= ``min_cols`` (exactly ``n_cols`` when given).

    Booleans, complex numbers and strings are refused; object arrays are accepted when every entry is a
    number.
    """
    arr = np.asarray(x)
    if arr.dtype.kind == "O":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise error(
                f"{name} must be a numeric array of shape (N, d), got non-numeric entries ({exc})"
            ) from None
    elif arr.dtype.kind not in "iuf":
        raise error(f"{name} must be a numeric array of shape (N, d), got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise error(f"{name} must be a 2-D array of shape (N, d), got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise error(f"{name} needs at least {min_rows} rows, got shape {arr.shape}")
    if arr.shape[1] < min_cols:
        raise error(f"{name} needs at least {min_cols} columns, got shape {arr.shape}")
    if n_cols is not None and arr.shape[1] != n_cols:
        raise error(f"{name} has {arr.shape[1]} columns, expected {n_cols}")
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise error(f"{name} has {bad} non-finite entries (NaN or infinity)")
    return np.ascontiguousarray(arr, dtype=dtype)


def check_labels(labels: Any, n: int, name: str = "labels") -> np.ndarray:
    """One label per row of an (n, d) matrix ``x``, none missing; returns integer codes of shape (n,)."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but x has {n} rows")
    missing = pd.isna(arr)
    if np.any(missing):
        raise ValueError(f"{name} has {int(np.sum(missing))} missing values")
    _, codes = np.unique(arr.astype(str) if arr.dtype == object else arr, return_inverse=True)
    return codes.reshape(-1)
