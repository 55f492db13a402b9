"""The base of every config model: unknown keys refused, numbers real, values frozen."""

from __future__ import annotations

import math
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

__all__ = ["_Strict", "reject_bool_and_non_finite"]


def _numeric(annotation: Any) -> bool:
    """Whether a field's type admits int or float (and not bool)."""
    args = get_args(annotation)
    if args:
        return any(_numeric(a) for a in args if a is not type(None))
    return annotation in (int, float)


def reject_bool_and_non_finite(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """Numbers in config must be real numbers: no YAML booleans, no inf or nan."""
    field = cls.model_fields.get(info.field_name or "")
    if field is None or not _numeric(field.annotation):
        return value
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be finite")
    if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("inf", "infinity", "nan"):
        raise ValueError("must be finite")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    _numbers = field_validator("*", mode="before")(classmethod(reject_bool_and_non_finite))
