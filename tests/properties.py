"""Property checks shared by the module tests: finite values, shapes and invariances."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def as_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def assert_finite(x, name: str = "value") -> None:
    """No NaN and no infinity anywhere in ``x``."""
    arr = as_numpy(x)
    bad = ~np.isfinite(arr)
    assert not bad.any(), f"{name} has {int(bad.sum())} non-finite entries out of {arr.size}"


def assert_shape(x, shape: Sequence[int | None], name: str = "value") -> None:
    """``x`` has ``shape``; ``None`` in ``shape`` matches any size on that axis."""
    arr = as_numpy(x)
    assert arr.ndim == len(shape), f"{name} has {arr.ndim} axes, expected {len(shape)}"
    for axis, (got, want) in enumerate(zip(arr.shape, shape, strict=True)):
        assert want is None or got == want, f"{name} axis {axis} has size {got}, expected {want}"


def assert_invariant(
    fn: Callable[..., object],
    args: Sequence[object],
    transformed_args: Sequence[object],
    rtol: float = 1e-6,
    atol: float = 1e-9,
    name: str = "function",
) -> None:
    """``fn(*args)`` equals ``fn(*transformed_args)`` within tolerance."""
    a, b = as_numpy(fn(*args)), as_numpy(fn(*transformed_args))
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{name} is not invariant")


def assert_rows_permutation_equivariant(
    fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, seed: int = 0
) -> None:
    """Permuting the rows of ``x`` permutes the rows of ``fn(x)`` the same way."""
    perm = np.random.default_rng(seed).permutation(len(x))
    np.testing.assert_allclose(as_numpy(fn(x))[perm], as_numpy(fn(x[perm])), rtol=1e-5, atol=1e-7)
