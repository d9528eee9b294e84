"""Dictionary round trip shared by the estimator configurations (stored in run manifests)."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, TypeVar

from flare_core.checks import check_int, check_number

_Config = TypeVar("_Config", bound="DictConfig")


class DictConfig:
    """Mixin for dataclass configurations: ``to_dict``, a strict ``from_dict`` and shared field checks."""

    def _require_positive_ints(self, *names: str) -> None:
        """ValueError unless every field in ``names`` is an int >= 1 (bool excluded)."""
        for name in names:
            check_int(getattr(self, name), name, min_value=1)

    def _require_optimiser_settings(self) -> None:
        """ValueError unless ``lr`` is positive and finite and ``grad_clip`` positive or None."""
        # B009: the fields of the dataclass, read by name
        lr, grad_clip = getattr(self, "lr"), getattr(self, "grad_clip")  # noqa: B009
        check_number(lr, "lr", min_value=0, include_min=False)
        check_number(grad_clip, "grad_clip", min_value=0, include_min=False, allow_none=True)

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
