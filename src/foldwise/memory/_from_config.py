"""Build a `MemoryManager`'s parts from `foldwise.yaml` (the `memory:` block)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from foldwise.errors import ConfigError
from foldwise.memory._model_extractor import ModelExtractor
from foldwise.memory._rules import RulesExtractor
from foldwise.models import ModelRegistry, import_object

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from foldwise.config import FoldwiseConfig

__all__ = ["manager_parts"]


def manager_parts(
    config: FoldwiseConfig, *, store: BaseStore | None = None, model: Any = None
) -> dict[str, Any]:
    """Keyword arguments for `MemoryManager` from `config.memory`.

    Args:
        config: The whole configuration (``memory.url`` falls back to ``storage.url``).
        store: A LangGraph store to keep facts in instead of the configured URL.
        model: The extractor model (a `BaseChatModel`); else ``memory.extractor.model_name``
            is built from the configured models; else the rules extractor alone.
    """
    from foldwise.memory._backends import open_backend

    memory = config.memory
    backend = open_backend(memory.url or config.storage.url, store=store)
    if not backend.capabilities.search:
        raise ConfigError(
            f"the backend at {memory.url or config.storage.url!r} cannot search; "
            f"memory.mode {memory.mode!r} needs search",
            key="memory.url",
        )
    name = memory.extractor.model_name
    if model is None and name is not None:
        registry = ModelRegistry(config)
        if not registry.knows(name):
            raise ConfigError(
                f"{name!r} names no configured model", key="memory.extractor.model_name"
            )
        model = registry.get(name)
    rules = RulesExtractor()
    extractor = (
        rules
        if model is None
        else ModelExtractor(model, timeout_seconds=memory.extractor.timeout_seconds)
    )
    fallback = rules if model is not None and memory.extractor.fallback == "rules" else None
    embedder = None
    if memory.embedder is not None:
        try:
            embedder = import_object(memory.embedder, what="embedder")()
        except Exception as exc:
            raise ConfigError(
                f"could not build the embedder: {exc}", key="memory.embedder"
            ) from exc
    return {
        "backend": backend,
        "extractor": extractor,
        "fallback": fallback,
        "embedder": embedder,
        "min_confidence": memory.min_confidence,
        "max_active_facts": memory.retention.max_active_facts,
    }
