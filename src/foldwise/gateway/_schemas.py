"""Request bodies, shaped like LangGraph Server's so the official SDK's calls validate.

LangGraph-shaped bodies ignore unknown keys (the SDK adds options over time), but options that
would change what a run does and that this gateway does not implement are refused with 422
instead of being silently ignored. foldwise's own `/compact` body forbids unknown keys.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from foldwise.config import ContextSize
from foldwise.gateway._errors import RequestFieldError

__all__ = [
    "MAX_OFFSET",
    "MAX_PAGE",
    "SUPPORTED_STREAM_MODES",
    "AfterSeqQuery",
    "CompactRequest",
    "HistoryRequest",
    "OffsetQuery",
    "PageQuery",
    "RunCreate",
    "StateAtCheckpoint",
    "StateUpdate",
    "ThreadCount",
    "ThreadCreate",
    "ThreadPatch",
    "ThreadSearch",
    "check_filter_ints",
    "checkpoint_id_checked",
]

SUPPORTED_STREAM_MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "debug",
    "tasks",
    "checkpoints",
    "events",
)
"""Stream modes of `POST /threads/{id}/runs/stream`."""

MAX_OFFSET = 2**63 - 1
"""Largest `offset` / `after_seq`: what a SQL BIGINT (and a SQLite INTEGER) can hold.

Every integer of a request is range-checked here, at the edge, so a value the database cannot
bind is a 422 naming the field rather than a 500 (SQLite) or a 503 (PostgreSQL).
"""
MAX_PAGE = 1000
"""Largest `limit` of a listing."""

OffsetQuery = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
"""`?offset=`: rows to skip, 0..2^63-1."""
AfterSeqQuery = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
"""`?after_seq=`: the last transcript `seq` seen, 0..2^63-1."""
PageQuery = Annotated[int, Query(ge=1, le=MAX_PAGE)]
"""`?limit=`: page size, 1..1000."""

_Json = dict[str, Any]
_FILTER_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_INT64 = range(-(2**63), 2**63)


def check_filter_ints(value: Any, field: str) -> None:
    """Raise `RequestFieldError` for an integer of a filter that a database cannot bind.

    The checkpointer binds metadata filter values as SQL parameters: past 64 bits SQLite
    raises `OverflowError` (a 500) and PostgreSQL refuses the query.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        raise RequestFieldError(field, "integers must lie within -2^63..2^63-1")
    if isinstance(value, dict):
        for key, item in value.items():
            check_filter_ints(item, f"{field}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_filter_ints(item, f"{field}[{index}]")


class _LangGraphBody(BaseModel):
    model_config = ConfigDict(extra="ignore")


def refuse_if_set(body: BaseModel, *names: str, why: str = "is not supported") -> None:
    """Raise `RequestFieldError` for the first of `names` that the client set (not null)."""
    for name in names:
        value = getattr(body, name, None)
        if value not in (None, False, [], {}, 0):
            raise RequestFieldError(name, f"{why} by the foldwise gateway")


class ThreadCreate(_LangGraphBody):
    """`POST /threads`."""

    thread_id: str | None = None
    metadata: _Json | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: list[Any] | None = None
    ttl: Any = None


class ThreadPatch(_LangGraphBody):
    """`PATCH /threads/{id}`: shallow-merge metadata."""

    metadata: _Json = Field(default_factory=dict)
    ttl: Any = None


class ThreadSearch(_LangGraphBody):
    """`POST /threads/search`."""

    metadata: _Json | None = None
    values: _Json | None = None
    ids: list[str] | None = Field(default=None, max_length=1000)
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(default=10, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["created_at", "updated_at"] | None = None
    sort_order: Literal["desc"] | None = None


class ThreadCount(_LangGraphBody):
    """`POST /threads/count`: the filters of `/threads/search`."""

    metadata: _Json | None = None
    values: _Json | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


def _checkpoint_id(value: Any, field: str) -> str | None:
    if value is None:
        return None
    return checkpoint_id_checked(value, field)


def checkpoint_id_checked(value: Any, field: str) -> str:
    """`value` if it can be a checkpoint id, else `RequestFieldError` naming `field`.

    A string of 1-128 characters without NUL or lone surrogates: PostgreSQL text cannot hold
    NUL, and neither database can store a string that is not valid Unicode.
    """
    if not isinstance(value, str) or not 1 <= len(value) <= 128:
        raise RequestFieldError(field, "must be a checkpoint id (a string of 1-128 characters)")
    if "\x00" in value or _unencodable(value):
        raise RequestFieldError(field, "must not contain NUL characters or lone surrogates")
    return value


def _unencodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class StateUpdate(_LangGraphBody):
    """`POST /threads/{id}/state`: LangGraph's `update_state`."""

    values: _Json | list[Any] | None = None
    as_node: str | None = Field(default=None, min_length=1, max_length=256)
    checkpoint: _Json | None = None
    checkpoint_id: str | None = None

    def target_checkpoint(self) -> str | None:
        """The checkpoint id to update from (`checkpoint.checkpoint_id` or `checkpoint_id`)."""
        if self.checkpoint and self.checkpoint.get("checkpoint_ns"):
            raise RequestFieldError("checkpoint.checkpoint_ns", "subgraph state is not supported")
        found = _checkpoint_id((self.checkpoint or {}).get("checkpoint_id"), "checkpoint")
        return found or _checkpoint_id(self.checkpoint_id, "checkpoint_id")


class StateAtCheckpoint(_LangGraphBody):
    """`POST /threads/{id}/state/checkpoint`."""

    checkpoint: _Json
    subgraphs: bool = False

    def checkpoint_id(self) -> str:
        """The requested checkpoint id (subgraph namespaces are refused)."""
        if self.checkpoint.get("checkpoint_ns"):
            raise RequestFieldError("checkpoint.checkpoint_ns", "subgraph state is not supported")
        found = _checkpoint_id(self.checkpoint.get("checkpoint_id"), "checkpoint.checkpoint_id")
        if found is None:
            raise RequestFieldError("checkpoint.checkpoint_id", "required")
        return found


class HistoryRequest(_LangGraphBody):
    """`POST /threads/{id}/history`."""

    limit: int = Field(default=10, ge=1, le=MAX_PAGE)
    before: str | _Json | None = None
    metadata: _Json | None = None
    checkpoint: _Json | None = None

    @field_validator("metadata")
    @classmethod
    def _filter_keys(cls, value: _Json | None) -> _Json | None:
        for key in value or {}:
            if not _FILTER_KEY.fullmatch(key):
                raise ValueError(
                    f"invalid filter key {key[:40]!r}: use letters, digits, '_', '.' and '-'"
                )
        return value

    def start_id(self) -> str | None:
        """The checkpoint id history starts at (`checkpoint.checkpoint_id`), if any."""
        return _checkpoint_id(
            (self.checkpoint or {}).get("checkpoint_id"), "checkpoint.checkpoint_id"
        )

    def before_id(self) -> str | None:
        """The checkpoint id of `before` (a string or a checkpoint object)."""
        if isinstance(self.before, dict):
            return _checkpoint_id(self.before.get("checkpoint_id"), "before.checkpoint_id")
        return _checkpoint_id(self.before, "before")


class RunCreate(_LangGraphBody):
    """`POST /threads/{id}/runs/wait` and `/runs/stream`."""

    assistant_id: str = Field(min_length=1, max_length=128)
    input: _Json | None = None
    command: _Json | None = None
    config: _Json | None = None
    context: _Json | None = None
    metadata: _Json | None = None
    model_name: str | None = Field(default=None, min_length=1, max_length=128)
    stream_mode: str | list[str] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    webhook: str | None = None
    checkpoint: _Json | None = None
    checkpoint_id: str | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    if_not_exists: Literal["reject", "create"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    after_seconds: float | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    on_completion: Literal["delete", "keep"] | None = None

    def check_supported(self) -> None:
        """Refuse options that would change the run and are not implemented here."""
        refuse_if_set(self, "interrupt_before", "interrupt_after", "webhook", "after_seconds")

    def stream_modes(self) -> list[str]:
        """The requested stream modes, validated."""
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else self.stream_mode
        for index, mode in enumerate(modes):
            if mode not in SUPPORTED_STREAM_MODES:
                where = (
                    "stream_mode" if isinstance(self.stream_mode, str) else f"stream_mode[{index}]"
                )
                raise RequestFieldError(
                    where,
                    f"unsupported stream mode {mode!r}; use {', '.join(SUPPORTED_STREAM_MODES)}",
                )
        return list(dict.fromkeys(modes)) or ["values"]

    def requested_model(self) -> tuple[str | None, str]:
        """The run model asked for, and the field it came from."""
        if self.model_name is not None:
            return self.model_name, "model_name"
        configurable = (self.config or {}).get("configurable") or {}
        if not isinstance(configurable, dict):
            raise RequestFieldError("config.configurable", "must be an object")
        for source, where in (
            (configurable, "config.configurable.model_name"),
            (self.context or {}, "context.model_name"),
        ):
            value = source.get("model_name")
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise RequestFieldError(where, "must be a non-empty string")
                return value, where
        return None, "model_name"

    def recursion_limit(self) -> int | None:
        """`config.recursion_limit`, validated."""
        value = (self.config or {}).get("recursion_limit")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
            raise RequestFieldError("config.recursion_limit", "must be an integer in 1..100000")
        return value


class CompactRequest(BaseModel):
    """`POST /threads/{id}/compact`: foldwise's manual compaction (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    force: StrictBool = True
    """Compact even when no trigger fired."""
    keep: ContextSize | None = None
    """Retention for this call only (validated like `summarization.keep`)."""
    model_name: str | None = Field(default=None, min_length=1, max_length=128)
    """The run model the next request would use (a configured model name)."""
    assistant_id: str | None = Field(default=None, min_length=1, max_length=128)
    """The assistant whose agent compacts (default: the thread's)."""

    @field_validator("keep", mode="before")
    @classmethod
    def _keep_object(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict | ContextSize):
            raise ValueError('must be an object like {"type": "messages", "value": 10}')
        return value
