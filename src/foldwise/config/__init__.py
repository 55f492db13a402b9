"""Configuration: pydantic models for `foldwise.yaml` and its loader."""

from foldwise.config import _loader, _models
from foldwise.config._loader import *  # noqa: F403 - the names in `_loader.__all__`
from foldwise.config._models import *  # noqa: F403 - the names in `_models.__all__`

__all__ = _loader.__all__ + _models.__all__
