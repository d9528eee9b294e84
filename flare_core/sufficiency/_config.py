"""Dictionary round trip shared by the estimator configurations (stored in run manifests)."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, TypeVar

_Config = TypeVar("_Config", bound="DictConfig")


class DictConfig:
    """Mixin for dataclass configurations: ``to_dict`` and a strict ``from_dict``."""

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
