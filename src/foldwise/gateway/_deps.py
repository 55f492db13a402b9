"""Shared request plumbing: the gateway's services, validated path ids, wire shapes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from foldwise._lru import LRUDict
from foldwise.config import FoldwiseConfig
from foldwise.errors import ThreadNotFoundError
from foldwise.gateway._agents import AgentRegistry, HostedAgent
from foldwise.gateway._auth import request_identity
from foldwise.gateway._leases import ThreadLeases
from foldwise.gateway._manager import RunManager
from foldwise.gateway._queue import RunQueue
from foldwise.gateway._serde import jsonable
from foldwise.gateway.storage import GatewayStorage, ThreadRecord, validate_thread_id
from foldwise.memory import MemoryManager, MemoryOutbox

__all__ = [
    "CONTEXT_IDS_CACHED",
    "MAX_REGEX_SEARCHES",
    "Gateway",
    "GatewayDep",
    "IdentityDep",
    "ThreadIdDep",
    "require_thread",
    "state_json",
    "thread_json",
]


CONTEXT_IDS_CACHED = 32
"""Head checkpoints whose message ids the transcript keeps (`Gateway.context_ids`)."""
MAX_REGEX_SEARCHES = 2
"""Regex artifact searches the HTTP route runs at once (`Gateway.regex_searches`)."""


@dataclass
class Gateway:
    """Everything a request handler needs, opened once by the app's lifespan."""

    config: FoldwiseConfig
    storage: GatewayStorage
    checkpointer: BaseCheckpointSaver[Any]
    agents: AgentRegistry
    leases: ThreadLeases
    runs: RunManager
    queue: RunQueue
    store: BaseStore | None = None
    """The LangGraph store behind `/store/*` (on the gateway database)."""
    memory: MemoryManager | None = None
    """Long-term memory behind `/memory/*`; `None` unless `memory.enabled`."""
    memory_queue: MemoryOutbox | None = None
    """The memory write queue (`GET /memory/queue`); `None` unless `memory.enabled`."""
    context_ids: LRUDict[tuple[str, str], frozenset[str]] = field(
        default_factory=lambda: LRUDict(CONTEXT_IDS_CACHED)
    )
    """Message ids in a thread's checkpoint, by `(thread_id, checkpoint_id)` (immutable)."""
    regex_searches: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(MAX_REGEX_SEARCHES)
    )
    """Slots for regex artifact searches from HTTP (each holds a worker up to its budget)."""

    def agent_for(
        self,
        thread: ThreadRecord,
        *,
        assistant_id: str | None = None,
        model_name: str | None = None,
    ) -> HostedAgent:
        """The agent for a thread: the given assistant, else the one that last ran on it."""
        if assistant_id is None:
            assistant_id = self.agents.remembered(thread.metadata.get("assistant_id"))
        return self.agents.get(assistant_id, model_name)


async def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


async def _thread_id(
    thread_id: Annotated[str, Path(description="A UUID or 1-128 characters A-Z a-z 0-9 _ -")],
) -> str:
    return validate_thread_id(thread_id)


GatewayDep = Annotated[Gateway, Depends(_gateway)]
ThreadIdDep = Annotated[str, Depends(_thread_id)]
IdentityDep = Annotated[str, Depends(request_identity)]
"""The caller's identity (`LOCAL_IDENTITY` when no auth is configured); it owns threads."""


async def require_thread(gateway: Gateway, thread_id: str, identity: str) -> ThreadRecord:
    """The thread's record, if `identity` owns it.

    Raises:
        ThreadNotFoundError: No such thread, or another identity's (404: existence never leaks).
    """
    record = await gateway.storage.get_thread(thread_id, owner=identity)
    if record is None:
        raise ThreadNotFoundError(thread_id)
    return record


def thread_json(record: ThreadRecord, *, busy: bool, values: Any = None) -> dict[str, Any]:
    """A thread as LangGraph Server returns it (`langgraph_sdk.schema.Thread`)."""
    status = "busy" if busy else "error" if record.status == "error" else "idle"
    return {
        "thread_id": record.thread_id,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "metadata": record.metadata,
        "status": status,
        "values": jsonable(values) if values is not None else None,
        "interrupts": {},
    }


def _checkpoint(config: Any) -> dict[str, Any] | None:
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id"):
        return None
    return {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


def _task(task: Any) -> dict[str, Any]:
    error = getattr(task, "error", None)
    return {
        "id": str(getattr(task, "id", "")),
        "name": str(getattr(task, "name", "")),
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
        "interrupts": jsonable(list(getattr(task, "interrupts", ()) or ())),
        "checkpoint": None,
        "state": None,
        "result": jsonable(getattr(task, "result", None)),
    }


def state_json(snapshot: Any) -> dict[str, Any]:
    """A LangGraph `StateSnapshot` as LangGraph Server returns it (`ThreadState`)."""
    return {
        "values": jsonable(snapshot.values or {}),
        "next": list(snapshot.next or ()),
        "checkpoint": _checkpoint(snapshot.config),
        "metadata": jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": _checkpoint(snapshot.parent_config),
        "tasks": [_task(t) for t in snapshot.tasks or ()],
        "interrupts": jsonable(list(getattr(snapshot, "interrupts", ()) or ())),
    }
