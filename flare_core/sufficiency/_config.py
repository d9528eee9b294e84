"""Dictionary round trip shared by the estimator configurations (stored in run manifests)."""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any, TypeVar

_Config = TypeVar("_Config", bound="DictConfig")


class DictConfig:
    """Mixin for dataclass configurations: ``to_dict``, a strict ``from_dict`` and shared field checks."""

    def _require_positive_ints(self, *names: str) -> None:
        """ValueError unless every field in ``names`` is an int >= 1 (bool excluded)."""
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    def _require_optimiser_settings(self) -> None:
        """ValueError unless ``lr`` is positive and finite and ``grad_clip`` positive or None."""
        lr = getattr(self, "lr")  # noqa: B009 - a field of the dataclass this mixin serves
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr must be a positive finite number, got {lr!r}")
        grad_clip = getattr(self, "grad_clip")  # noqa: B009
        if grad_clip is not None and not grad_clip > 0:
            raise ValueError(f"grad_clip must be positive or None, got {grad_clip!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[_Config], data: dict[str, Any]) -> _Config:
        """Build from ``to_dict`` output; unknown keys raise ValueError."""
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
        return cls(**data)
