"""The `memory:` block: long-term memory across threads (docs/memory.md).

DeerFlow's `memory:` block loads too: its keys are mapped to these (``injection_enabled`` →
``injection.enabled``, ``max_injection_tokens`` → ``injection.max_tokens``, ``model`` /
``model_name`` → ``extractor.model_name``, ``max_facts`` → ``retention.max_active_facts``,
``fact_confidence_threshold`` → ``min_confidence``, ``storage_path`` ignored) and keys that
have no meaning here are accepted with one warning that names them.
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from foldwise.config._strict import _Strict

__all__ = [
    "MemoryConfig",
    "MemoryExtractorConfig",
    "MemoryInjectionConfig",
    "MemoryRetentionConfig",
]

_AGENT_NAME = re.compile(r"^[A-Za-z0-9_.@:+-]{1,128}$")
_DEERFLOW_MOVED = {
    "injection_enabled": ("injection", "enabled"),
    "max_injection_tokens": ("injection", "max_tokens"),
    "model_name": ("extractor", "model_name"),
    "max_facts": ("retention", "max_active_facts"),
    "fact_confidence_threshold": (None, "min_confidence"),
}
_DEERFLOW_IGNORED = (
    "storage_path",
    "storage_class",
    "manager_class",
    "backend_config",
    "strict_user_scope",
    "token_counting",
    "queue_max_depth",
    "shutdown_flush_timeout_seconds",
    "fact_eviction_policy",
    "retrieval_adapter",
    "staleness_review_enabled",
    "consolidation_enabled",
)


class MemoryExtractorConfig(_Strict):
    """Who proposes facts from a conversation."""

    model_name: str | None = None
    """A configured model; `None`: the offline rules extractor only."""
    fallback: Literal["rules", "none"] = "rules"
    """When the model fails or answers malformed output: the rules extractor, or nothing."""
    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """A model extraction slower than this fails (and falls back)."""


class MemoryInjectionConfig(_Strict):
    """What the model sees of memory, inside the durable data block."""

    enabled: bool = True
    """Inject the profile and recall sections (tool mode alone may turn it off)."""
    max_tokens: int = Field(default=1500, ge=50, le=32_000)
    """Both sections together stay within this many tokens."""
    recall_k: int = Field(default=8, ge=0, le=50)
    """At most this many facts chosen by the current request (0: profile only)."""
    profile_share: float = Field(default=0.6, gt=0, le=1)
    """The profile's share of `max_tokens`; recall gets the rest and what the profile left."""


class MemoryRetentionConfig(_Strict):
    """Bounds on what a namespace keeps."""

    max_active_facts: int = Field(default=1000, ge=10, le=100_000)
    """Past this, the least important, least confident, oldest active fact is retracted."""


class MemoryConfig(_Strict):
    """Long-term memory across threads (seed 003's third layer)."""

    enabled: bool = False
    """Remember facts about users across threads."""
    mode: Literal["middleware", "tool", "both"] = "middleware"
    """`middleware`: facts extracted after each run and injected; `tool`: the model uses the
    memory tools; `both`. Tool mode does not remove the compaction flush."""
    url: str | None = None
    """The memory database: `sqlite:///path`, `postgresql://...`, `memory://`; `None`: the
    gateway's `storage.url`."""
    agent: str = "agent"
    """The agent part of the namespace (`("users", user, "agents", agent)`)."""
    extractor: MemoryExtractorConfig = MemoryExtractorConfig()
    """Extraction settings."""
    injection: MemoryInjectionConfig = MemoryInjectionConfig()
    """Injection settings."""
    retention: MemoryRetentionConfig = MemoryRetentionConfig()
    """Retention limits."""
    min_confidence: float = Field(default=0.5, ge=0, le=1)
    """Extracted facts below this confidence are not stored (reason `low_confidence`)."""
    embedder: str | None = None
    """Optional `module:factory` returning a LangChain `Embeddings` (hybrid search)."""
    debounce_seconds: float = Field(default=30.0, ge=0, le=3600)
    """Runs of one thread within this window become one extraction (the write queue)."""
    flush_on_compaction: bool = True
    """A compaction's removed span is sent to memory, whatever the mode."""

    @model_validator(mode="before")
    @classmethod
    def _deerflow_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "model" in data and isinstance(data["model"], str):
            data["model_name"] = data.pop("model")
        for old, (section, key) in _DEERFLOW_MOVED.items():
            if old not in data:
                continue
            value = data.pop(old)
            if section is None:
                data.setdefault(key, value)
            else:
                data[section] = {key: value, **dict(data.get(section) or {})}
        ignored = [key for key in _DEERFLOW_IGNORED if key in data]
        for key in ignored:
            data.pop(key)
        if ignored:
            warnings.warn(
                f"memory: {', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no "
                "meaning in foldwise and will be ignored",
                stacklevel=2,
            )
        return data

    @field_validator("agent")
    @classmethod
    def _check_agent(cls, value: str) -> str:
        if not _AGENT_NAME.match(value):
            raise ValueError("must be 1-128 characters of letters, digits and _.@:+-")
        return value

    @field_validator("embedder")
    @classmethod
    def _check_embedder(cls, value: str | None) -> str | None:
        if value is not None and ":" not in value:
            raise ValueError(f"{value!r} is not an import path; write `package.module:factory`")
        return value
