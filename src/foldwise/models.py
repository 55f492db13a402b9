"""Model registry: build chat models from `models:` entries and resolve names."""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel

from foldwise.config import BUILTIN_EXTRACTIVE, FoldwiseConfig, interpolate
from foldwise.errors import ConfigError, ModelConstructionError

__all__ = ["ModelRegistry", "import_object"]

logger = logging.getLogger(__name__)

FAILURE_TTL_SECONDS = 60.0
"""How long a construction failure is remembered before the model is tried again."""


def import_object(path: str, *, what: str = "object") -> Any:
    """Import `module:attr` (the attribute may be dotted) and return it.

    Raises:
        ConfigError: The module or attribute cannot be imported; the message names `path`.
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{what} path {path!r} must look like 'package.module:name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"cannot import module {module_name!r} for {what} {path!r}: {err}"
        ) from err
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{what} {path!r}: module {module_name!r} has no {attr!r}") from None
    return obj


class ModelRegistry:
    """Builds and caches the chat models named in a configuration.

    Successful builds are cached for the registry's lifetime; failures are cached for
    `failure_ttl` seconds only, so a transient outage does not disable a model forever.
    The name `extractive` always resolves to the offline `ExtractiveSummarizer`.
    """

    def __init__(
        self,
        config: FoldwiseConfig,
        *,
        overrides: dict[str, BaseChatModel] | None = None,
        failure_ttl: float = FAILURE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._overrides = dict(overrides or {})
        self._models: dict[str, BaseChatModel] = {}
        self._failures: dict[str, tuple[float, ModelConstructionError]] = {}
        self._failure_ttl = failure_ttl
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def default_name(self) -> str | None:
        """Name of the default run model (the first configured), if any."""
        entry = self.config.model()
        return entry.name if entry else None

    def knows(self, name: str) -> bool:
        """Whether `name` resolves to a model (configured, overridden or built in)."""
        return (
            name == BUILTIN_EXTRACTIVE
            or name in self._overrides
            or self.config.model(name) is not None
        )

    def get(self, name: str) -> BaseChatModel:
        """Return the model called `name`, building it on first use.

        Raises:
            ModelConstructionError: The model is unknown or its constructor failed (the failure
                is remembered for `failure_ttl` seconds).
        """
        if name in self._overrides:
            return self._overrides[name]
        with self._lock:
            if name in self._models:
                return self._models[name]
            failed = self._failures.get(name)
            if failed and self._clock() - failed[0] < self._failure_ttl:
                raise failed[1]
        try:
            model = self._build(name)
        except ModelConstructionError as err:
            with self._lock:
                self._failures[name] = (self._clock(), err)
            logger.warning("model %s could not be built: %s", name, err)
            raise
        with self._lock:
            self._failures.pop(name, None)
            self._models.setdefault(name, model)
            return self._models[name]

    def _build(self, name: str) -> BaseChatModel:
        if name == BUILTIN_EXTRACTIVE:
            from foldwise.summarizers import ExtractiveSummarizer

            extractive: BaseChatModel = ExtractiveSummarizer()
            return extractive
        entry = self.config.model(name)
        if entry is None:
            raise ModelConstructionError(name, "no model with that name is configured")
        try:
            cls = import_object(entry.use, what=f"models[{name}].use")
        except ConfigError as err:
            raise ModelConstructionError(name, str(err)) from err
        options = interpolate(entry.options)
        try:
            model: Any = cls(**options)
        except Exception as err:  # any constructor failure is reported with the model name
            raise ModelConstructionError(name, f"{type(err).__name__}: {err}") from err
        if not isinstance(model, BaseChatModel):
            raise ModelConstructionError(name, f"{entry.use} is not a BaseChatModel")
        if entry.context_window and getattr(model, "profile", None) is None:
            try:
                model.profile = {"max_input_tokens": entry.context_window}
            except (AttributeError, TypeError, ValueError):
                logger.debug("model %s does not accept a profile", name)
        return model
